using System.Collections.Concurrent;
using System.Globalization;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Counts made from the checkpoint's per-tree counts and the ids whose existence changed since, against the walk of
/// every document at the same snapshot, while ids are created and deleted, checkpoints move the trees and trim the
/// added ids, and documents replayed at the open are written over and deleted.
/// </summary>
public sealed class CountTests
{
    private const string Collection = "Item";
    private const int Ids = 400;

    [Fact]
    public async Task Counts_agree_with_a_walk_at_their_snapshot_while_ids_come_and_go_across_checkpoints_and_a_replay()
    {
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 1L << 40;
        options.CheckpointOnClose = false; // the next open replays what follows the checkpoint
        options.AddedIdsTrimMinimum = 4;
        options.PagesPerChunk = 4;
        await using (var first = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 300; i++)
            {
                await first.PutAsync(Collection, Id(i), Json(i, 0));
            }

            await first.CheckpointAsync();
            for (int i = 0; i < 50; i++)
            {
                await first.DeleteAsync(Collection, Id(i * 3));
            }

            for (int i = 300; i < Ids; i++)
            {
                await first.PutAsync(Collection, Id(i), Json(i, 0));
            }
        }

        await using var store = DocumentStore.Open(dir.Path, options);
        Assert.Equal(350, store.Index.Count(Collection, store.LastCommittedSequence));
        var failures = new ConcurrentQueue<string>();
        long counted = 0;
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Interlocked.Read(ref counted) <= 20, TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            for (int n = 1; !stop.IsCancellationRequested; n++)
            {
                int i = (random.Next(Ids / 2) * 2) + w; // each writer owns half the ids
                if (random.Next(3) == 0)
                {
                    await store.DeleteAsync(Collection, Id(i));
                }
                else
                {
                    await store.PutAsync(Collection, Id(i), Json(i, n));
                }
            }
        })).ToList();
        var checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync();
                await Task.Delay(3);
            }
        });
        var counters = Enumerable.Range(0, 2).Select(_ => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await using DocumentSession session = store.OpenSession();
                int count = await session.CountAsync<Item>();
                long snapshot = session.SnapshotSequence!.Value;
                int walked = store.Index.CountByWalking(Collection, snapshot);
                int queried = 0;
                await foreach (Item _ in session.QueryAsync<Item>())
                {
                    queried++;
                }

                if (count != walked || count != queried)
                {
                    failures.Enqueue($"snapshot {snapshot}: count {count}, walk {walked}, query {queried}");
                }

                Interlocked.Increment(ref counted);
            }
        })).ToList();

        await Task.WhenAll(writers.Concat(counters).Append(checkpointer));
        Assert.True(failures.IsEmpty, string.Join("\n", failures.Take(10)));
        Assert.True(Interlocked.Read(ref counted) > 20, $"{counted} counts made");
        Assert.Equal(store.Index.CountByWalking(Collection, store.LastCommittedSequence),
            store.Index.Count(Collection, store.LastCommittedSequence));
    }

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"items/{i:D4}");

    private static byte[] Json(int i, int n) =>
        Encoding.UTF8.GetBytes(string.Create(CultureInfo.InvariantCulture, $"{{\"Key\":\"{Id(i)}\",\"N\":{n}}}"));

    public sealed class Item
    {
        public string Key { get; set; } = "";

        public int N { get; set; }
    }
}
