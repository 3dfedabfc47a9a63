using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary><see cref="DocumentStore.DisposeAsync"/> awaits the commits in flight instead of blocking a
/// thread.</summary>
public sealed class StoreDisposalTests
{
    [Fact]
    public async Task DisposeAsync_completes_only_after_the_commit_in_flight_and_a_second_call_awaits_the_first()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.FileSystem = files;
        var store = DocumentStore.Open(dir.Path, options);

        // Hold the commit's fsync: the commit is in flight while the store is disposed.
        var gate = new ManualResetEventSlim();
        Task<long>? put = null;
        files.SyncWaiting.Reset();
        files.SyncGate = gate;
        put = Task.Run(() => store.PutAsync("C", "k", "{}"u8.ToArray()).AsTask());
        Assert.True(files.SyncWaiting.Wait(TestDeadline.Hang), "the commit reached its fsync");

        Task first = store.DisposeAsync().AsTask();
        Task second = store.DisposeAsync().AsTask();
        await Task.Delay(100);
        Assert.False(first.IsCompleted, "DisposeAsync returned while a commit was in flight");
        Assert.False(second.IsCompleted, "a second DisposeAsync returned before the first finished");
        Assert.False(put.IsCompleted);

        files.SyncGate = null;
        gate.Set();
        await Task.WhenAll(first, second).WaitAsync(TestDeadline.Hang);
        Assert.Equal(1, await put);
        Assert.Throws<ObjectDisposedException>(() => store.OpenSession());

        await using DocumentStore reopened = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        Assert.NotNull(reopened.Get("C", "k"));
    }

    [Fact]
    public async Task DisposeAsync_with_cancelled_and_failed_commits_pending_still_completes()
    {
        using var dir = new TempDirectory();
        var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        using var cancelled = new CancellationTokenSource();
        var commits = Enumerable.Range(0, 200).Select(i => Task.Run(async () =>
        {
            try
            {
                await store.PutAsync("C", $"k{i % 10}", "{}"u8.ToArray(), expectedVersion: i % 3 == 0 ? 12345 : null,
                    cancellationToken: cancelled.Token);
            }
            catch (Exception e) when (
                e is ConcurrencyException or OperationCanceledException or ObjectDisposedException)
            {
            }
        })).ToList();
        cancelled.CancelAfter(1);
        await store.DisposeAsync().AsTask().WaitAsync(TestDeadline.Hang);
        await Task.WhenAll(commits).WaitAsync(TestDeadline.Hang);
        await store.DisposeAsync();
    }
}
