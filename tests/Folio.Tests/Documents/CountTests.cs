using System.Collections.Concurrent;
using System.Globalization;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Counts made from the checkpoint's per-tree counts and the ids whose existence changed since, against the walk of
/// every document at the same snapshot, while ids are created and deleted, checkpoints move the trees and trim the
/// added ids, and documents replayed at the open are written over and deleted; and counts, walks and queries against a
/// model of the writes, over many opens whose first checkpoint (the one that drops the replayed documents) races the
/// first writes.
/// </summary>
public sealed class CountTests
{
    private const string Collection = "Item";
    private const int Ids = 400;

    [Theory]
    [InlineData(false)]
    [InlineData(true)] // checkpoints in slices at any size: counts over trees ahead of their checkpoint for some ids
    public async Task Counts_agree_with_a_walk_at_their_snapshot_while_ids_come_and_go_across_checkpoints_and_a_replay(
        bool sliced)
    {
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        if (sliced)
        {
            options.MinCheckpointSliceBytes = 1; // slices of a quarter of the live pages (the default share)
        }

        await SeedAsync(dir.Path, options);
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
        int slicedCheckpoints = 0;
        var checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                long generation = store.Pages.Current.Generation;
                await store.CheckpointAsync();
                slicedCheckpoints += store.Pages.Current.Generation - generation > 1 ? 1 : 0;
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
        Assert.True(!sliced || slicedCheckpoints > 0, "no checkpoint was written in slices");
        Assert.Equal(store.Index.CountByWalking(Collection, store.LastCommittedSequence),
            store.Index.Count(Collection, store.LastCommittedSequence));
    }

    [Fact]
    public async Task Counts_and_queries_match_a_model_while_the_first_checkpoint_after_an_open_races_the_first_writes()
    {
        // The first checkpoint after an open takes the replayed documents and then drops them from memory, while the
        // first writes since the open shadow them: a short run after each of many opens, checked against a model.
        double seconds = StressDuration.Seconds(3);
        var failures = new List<string>();
        long deadline = Environment.TickCount64 + (long)(seconds * 1000);
        int opens = 0;
        do
        {
            failures.AddRange(await OneOpenAsync());
            opens++;
        }
        while (failures.Count == 0 && (Environment.TickCount64 < deadline || opens < 3));

        Assert.True(failures.Count == 0, $"after {opens} opens:\n" + string.Join("\n", failures.Take(10)));
    }

    /// <summary>Seeds a store, reopens it, and for 300 ms runs two writers, a checkpointer and a reader; returns every
    /// read (a count, a walk of the index, a session query with each document's value, loads of a few ids, all at one
    /// snapshot) that differs from the model of the seeded state and the writes at or below the snapshot.</summary>
    private static async Task<List<string>> OneOpenAsync()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        await SeedAsync(dir.Path, options);
        await using var store = DocumentStore.Open(dir.Path, options);
        var writes = new ConcurrentBag<(long Sequence, int Id, int? N)>(); // N null: a delete
        var reads = new ConcurrentBag<Read>();
        using var stop = new CancellationTokenSource(TimeSpan.FromMilliseconds(300));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            for (int n = 1; !stop.IsCancellationRequested; n++)
            {
                int i = (random.Next(Ids / 2) * 2) + w;
                bool delete = random.Next(3) == 0;
                long sequence = delete ? await store.DeleteAsync(Collection, Id(i))
                    : await store.PutAsync(Collection, Id(i), Json(i, n));
                writes.Add((sequence, i, delete ? null : n));
            }
        })).ToList();
        Task checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync();
            }
        });
        Task reader = Task.Run(async () =>
        {
            var random = new Random(2);
            while (!stop.IsCancellationRequested)
            {
                await using DocumentSession session = store.OpenSession();
                int count = await session.CountAsync<Item>();
                long snapshot = session.SnapshotSequence!.Value;
                var walked = store.Index.Range(Collection, null, null, descending: false, snapshot)
                    .Select(entry => entry.Id).ToList();
                var queried = new List<(string, int)>();
                await foreach (Item item in session.QueryAsync<Item>())
                {
                    queried.Add((item.Key, item.N));
                }

                var loaded = new List<(string, int?)>();
                for (int k = 0; k < 8; k++)
                {
                    string id = Id(random.Next(Ids));
                    loaded.Add((id, (await session.LoadAsync<Item>(id))?.N));
                }

                reads.Add(new Read(snapshot, count, walked, queried, loaded));
            }
        });
        await Task.WhenAll(writers.Append(checkpointer).Append(reader));

        var failures = new List<string>();
        var ordered = writes.OrderBy(write => write.Sequence).ToList();
        foreach (Read read in reads)
        {
            var model = new SortedDictionary<string, int>(StringComparer.Ordinal);
            foreach (int i in Enumerable.Range(0, Ids).Where(i => i >= 150 || i % 3 != 0))
            {
                model[Id(i)] = 0;
            }

            foreach ((long sequence, int id, int? n) in ordered.TakeWhile(write => write.Sequence <= read.Snapshot))
            {
                if (n is { } value)
                {
                    model[Id(id)] = value;
                }
                else
                {
                    model.Remove(Id(id));
                }
            }

            List<(string, int)> expected = model.Select(pair => (pair.Key, pair.Value)).ToList();
            if (read.Count != model.Count || !model.Keys.SequenceEqual(read.Walked)
                || !expected.SequenceEqual(read.Queried)
                || read.Loaded.Any(load => load.N != (model.TryGetValue(load.Id, out int n) ? n : null)))
            {
                failures.Add($"snapshot {read.Snapshot}: model {model.Count}, count {read.Count}; walk lacks "
                    + $"[{string.Join(",", model.Keys.Except(read.Walked))}], has "
                    + $"[{string.Join(",", read.Walked.Except(model.Keys))}]; query lacks "
                    + $"[{string.Join(",", expected.Except(read.Queried))}], has "
                    + $"[{string.Join(",", read.Queried.Except(expected))}]; loads "
                    + string.Join(",", read.Loaded));
            }
        }

        return failures;
    }

    private sealed record Read(long Snapshot, int Count, List<string> Walked, List<(string Id, int N)> Queried,
        List<(string Id, int? N)> Loaded);

    private static DocumentStoreOptions Options()
    {
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.CheckpointOnClose = false; // the next open replays what follows the checkpoint
        options.AddedIdsTrimMinimum = 4;
        options.PagesPerChunk = 4;
        return options;
    }

    /// <summary>Ids 0-299 checkpointed, then every third of 0-149 deleted and 300-399 put, left to the journal:
    /// 350 live documents, 150 of them replayed at the next open.</summary>
    private static async Task SeedAsync(string path, DocumentStoreOptions options)
    {
        await using var first = DocumentStore.Open(path, options);
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

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"items/{i:D4}");

    private static byte[] Json(int i, int n) =>
        Encoding.UTF8.GetBytes(string.Create(CultureInfo.InvariantCulture, $"{{\"Key\":\"{Id(i)}\",\"N\":{n}}}"));

    public sealed class Item
    {
        public string Key { get; set; } = "";

        public int N { get; set; }
    }
}
