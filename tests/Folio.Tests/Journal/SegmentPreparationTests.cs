using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// The next journal segment is zero-filled and synced ahead of time, off the commit path. The committer waits for it
/// at rotation, and committers run on the thread pool: were it prepared by a pool work item, a rotation under writers
/// that keep the pool's threads busy would wait for an item queued behind theirs, and the rest of the process's work
/// (here a timer loop; in a service, its requests) would wait with it.
/// <para>
/// The timer loop shares the thread pool with whatever else the process runs, so the test runs alone
/// (<see cref="SerialTests"/>): beside the rest of the suite it once got one tick in two seconds with the preparation
/// on its own thread, which is what the preparation on the pool gives.
/// </para>
/// </summary>
[Collection(SerialTests.Name)]
public sealed class SegmentPreparationTests
{
    [Fact]
    public async Task Rotating_segments_under_writers_that_commit_in_a_loop_leaves_the_thread_pool_to_other_work()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments(); // a rotation every few hundred commits
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        // The writers run for at least 2 s and until they made 2,000 commits (a few rotations), however slow the
        // host's fsyncs are; a dedicated timer thread, not the pool, ends the window.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(2),
            () => store.LastCommittedSequence <= 2000, maxExtension: TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                await store.PutAsync("items", $"w{w}-{n % 500}", "{\"n\":1}"u8.ToArray());
            }
        })).ToList();
        int ticks = 0;
        Task ticker = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await Task.Delay(5);
                ticks++;
            }
        });
        await Task.WhenAll(writers.Append(ticker));

        long segments = Directory.GetFiles(Path.Combine(dir.Path, "journal"), "*.journal").Length;
        Assert.True(store.LastCommittedSequence > 2000, $"{store.LastCommittedSequence} commits");
        // 13 to 130 ticks of 5 ms get through in 2 s beside the writers on two cores; with the preparation on the pool,
        // one.
        Assert.True(ticks >= 5, $"the timer loop ran {ticks} times beside the writers ({segments} segments)");
    }
}
