using System.Text;
using System.Text.Json;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Change-feed readers that keep falling behind writers whose checkpoints purge the journal every few kilobytes: one
/// stream in the writer's process and one reader of the files, both pausing as they read. Each asserts every change
/// it sees: sequences one after another, and per writer's document a counter one above the last one seen, so a
/// skipped, repeated or reordered commit fails the test.
/// </summary>
public sealed class ChangeFeedStressTests
{
    private const int Writers = 4;

    [Fact]
    public async Task Lagging_readers_in_and_out_of_process_see_every_commit_in_order_while_checkpoints_purge()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions
        {
            SegmentSize = 8 * 1024, MaxDocumentSize = 1024, MaxGroupBytes = 4096, CheckpointThreshold = 4096,
        };
        await using var store = DocumentStore.Open(dir.Path, options);
        await store.PutAsync("c", "start", "{}"u8.ToArray());
        TimeSpan duration = TimeSpan.FromSeconds(StressDuration.Seconds(3));
        using var stop = new CancellationTokenSource();
        using var deadline = new CancellationTokenSource(duration + TestDeadline.Hang); // the readers then catch up
        Task<long> inProcess = ReadAsync(store.Changes.ReadAsync(1, deadline.Token), deadline.Token);
        Task<long> files = ReadAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: true, deadline.Token),
            deadline.Token);

        Task[] writers = Enumerable.Range(0, Writers).Select(w => Task.Run(async () =>
        {
            for (long n = 1; !stop.IsCancellationRequested; n++)
            {
                await store.PutAsync("c", $"w{w}", Encoding.UTF8.GetBytes(
                    $"{{\"n\":{n},\"pad\":\"{new string('x', 100)}\"}}"));
            }
        })).ToArray();
        await Task.Delay(duration);
        await stop.CancelAsync();
        await Task.WhenAll(writers);
        long last = await store.PutAsync("c", "end", "{}"u8.ToArray());

        Assert.Equal(last, await inProcess);
        Assert.Equal(last, await files);
        Assert.True(store.Journal.SegmentCount > 1 || store.Changes.FirstSequence > 1, "the writers rotated segments");
        await store.CheckpointAsync();
        Assert.True(store.Changes.FirstSequence > last / 2, $"purged once read: {store.Changes.FirstSequence}");
    }

    /// <summary>Reads from sequence 1 to the "end" document, pausing every 500 changes, checking each one; returns
    /// the last sequence read.</summary>
    private static async Task<long> ReadAsync(IAsyncEnumerable<DocumentChange> changes, CancellationToken token)
    {
        var counters = new long[Writers];
        long expected = 1;
        await foreach (DocumentChange change in changes.WithCancellation(token))
        {
            Assert.Equal(expected, change.Sequence);
            Assert.Equal(ChangeKind.Put, change.Kind);
            if (change.Id == "end")
            {
                return change.Sequence;
            }

            if (change.Id != "start")
            {
                int writer = change.Id[1] - '0';
                long n = JsonDocument.Parse(change.Json).RootElement.GetProperty("n").GetInt64();
                Assert.Equal(counters[writer] + 1, n);
                counters[writer] = n;
            }

            if (expected++ % 500 == 0)
            {
                await Task.Delay(50, token);
            }
        }

        throw new InvalidOperationException("the stream ended before the end document");
    }
}
