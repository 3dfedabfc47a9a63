using System.Collections.Concurrent;
using Folio.Pages;
using Folio.Transactions;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A process that cannot create another thread (its threads, memory or file descriptors exhausted, as under a
/// container's pids limit): <see cref="Thread.Start()"/> throws <see cref="OutOfMemoryException"/>. An open fails
/// saying why and leaves nothing running; a group that would be applied on the apply thread during its sync is
/// applied by its committer after the sync; a range read goes on without its prefetch. The refusal is process-wide
/// (<see cref="DedicatedThread.Refuse"/>), so these tests run alone.
/// </summary>
[Collection(SerialTests.Name)]
public sealed class ThreadStartFailureTests : IDisposable
{
    public void Dispose() => DedicatedThread.Refuse = null;

    [Fact]
    public async Task An_open_that_cannot_start_its_checkpoint_thread_fails_saying_so_and_a_later_open_succeeds()
    {
        using var dir = new TempDirectory();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()))
        {
            await store.PutAsync("c", "kept", "{}"u8.ToArray());
        }

        DedicatedThread.Refuse = static name => name == "Folio checkpoints";
        StoreUnavailableException error = Assert.Throws<StoreUnavailableException>(
            () => DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()));
        Assert.Contains("checkpoint thread could not be started", error.Message, StringComparison.Ordinal);
        Assert.IsType<OutOfMemoryException>(error.InnerException);

        DedicatedThread.Refuse = null;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()))
        {
            Assert.NotNull(store.Get("c", "kept")); // the failed open let go of the folder's lock
            await store.PutAsync("c", "after", "{}"u8.ToArray());
        }
    }

    [Fact]
    public async Task Commits_whose_apply_thread_cannot_be_started_are_applied_by_their_committer_and_all_succeed()
    {
        using var dir = new TempDirectory();
        int refused = 0;
        DedicatedThread.Refuse = name => name == ApplyThread.ThreadName && Interlocked.Increment(ref refused) > 0;
        var files = new FaultInjectingFileSystem { SyncGateHoldsOne = true };
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.FileSystem = files;
        var acknowledged = new Dictionary<string, long>();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            // The first commit's fsync is held, so the next ones queue behind it and form one group, large enough to
            // be applied on the apply thread while its committer syncs it.
            using var gate = new ManualResetEventSlim();
            files.SyncGate = gate;
            Task<long> first = Task.Run(async () => await store.PutAsync("c", "first", "{}"u8.ToArray()));
            Assert.True(files.SyncWaiting.Wait(TestDeadline.Hang));
            int calling = 0;
            Task<long>[] queued = Enumerable.Range(0, CommitPipeline.MinBatchesToApplyDuringSync + 8)
                .Select(i => Task.Run(async () =>
                {
                    Interlocked.Increment(ref calling);
                    return await store.PutAsync("c", $"q{i}", "{}"u8.ToArray());
                })).ToArray();
            // Every caller started (however slowly a busy pool runs them), then a moment to reach the queue.
            Assert.True(SpinWait.SpinUntil(() => Volatile.Read(ref calling) == queued.Length, TestDeadline.Hang));
            await Task.Delay(100);
            gate.Set();
            acknowledged["first"] = await first.WaitAsync(TestDeadline.Hang);
            for (int i = 0; i < queued.Length; i++)
            {
                acknowledged[$"q{i}"] = await queued[i].WaitAsync(TestDeadline.Hang);
            }

            Assert.True(refused > 0, "no group was large enough to want the apply thread");
            Assert.False(store.IsFaulted);
            acknowledged["after"] = await store.PutAsync("c", "after", "{}"u8.ToArray());
        }

        DedicatedThread.Refuse = null;
        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()))
        {
            foreach ((string id, long version) in acknowledged)
            {
                Assert.Equal(version, reopened.Get("c", id)?.Version);
            }
        }
    }

    [Fact]
    public void A_prefetch_request_with_no_thread_to_read_it_is_dropped_and_a_later_one_is_read()
    {
        var read = new ConcurrentQueue<int>();
        int dropped = 0;
        using var prefetcher = new PagePrefetcher((pages, _) =>
        {
            read.Enqueue(pages.Length);
            return 0;
        }, count => Interlocked.Add(ref dropped, count));

        DedicatedThread.Refuse = static name => name == "Folio prefetch";
        prefetcher.Request(Positions(3)); // a range read's request: it must return, not throw
        Assert.Equal(3, dropped);
        Assert.Equal(3, prefetcher.DroppedPages);
        Assert.Equal(0, prefetcher.Queued);

        DedicatedThread.Refuse = null;
        prefetcher.Request(Positions(2));
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal([2], read.ToArray());
    }

    private static PagePosition[] Positions(int count) =>
        Enumerable.Range(0, count).Select(i => new PagePosition(1, (uint)i)).ToArray();
}
