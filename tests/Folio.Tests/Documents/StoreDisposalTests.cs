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
        (ManualResetEventSlim gate, Task<long> put) =
            files.HoldNextSync(() => Task.Run(() => store.PutAsync("C", "k", "{}"u8.ToArray()).AsTask()));

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

    [Fact]
    public async Task Reads_through_a_small_cache_racing_the_disposal_return_right_bytes_or_ObjectDisposedException()
    {
        // Found from the outside: a scan that missed the cache while the store closed loaded its page into frames the
        // disposal had freed, and the process died of an access violation.
        using var dir = new TempDirectory();
        const int Documents = 3_000;
        DocumentStoreOptions Options()
        {
            DocumentStoreOptions options = TestStoreOptions.SmallSegments();
            options.TestCacheBytes = 4 * 16 * 1024; // four frames: nearly every leaf read is a load
            return options;
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options()))
        {
            var batch = new CommitBatch();
            for (int i = 0; i < Documents; i++)
            {
                batch.Put("C", $"d/{i:D5}", System.Text.Encoding.UTF8.GetBytes(JsonOf(i)));
            }

            await store.WriteAsync(batch);
            await store.CheckpointAsync(); // reads now go through the data file's pages
        }

        int rightReads = 0;
        for (int round = 0; round < 20; round++)
        {
            DocumentStore store = DocumentStore.Open(dir.Path, Options());
            using IEnumerator<StoredDocument> leaked = store.Scan("C").GetEnumerator();
            Assert.True(leaked.MoveNext());
            using var start = new Barrier(4);
            var readers = new Task<int>[3];
            for (int t = 0; t < readers.Length; t++)
            {
                int seed = (round * 4) + t;
                readers[t] = Task.Factory.StartNew(() => // own threads: the barrier blocks them
                {
                    var random = new Random(seed);
                    int right = 0;
                    start.SignalAndWait();
                    try
                    {
                        while (true)
                        {
                            int from = random.Next(Documents);
                            int n = from;
                            foreach (StoredDocument document in store.Scan("C", $"d/{from:D5}"))
                            {
                                AssertDocument(n++, document);
                                if (n - from == 50)
                                {
                                    break;
                                }
                            }

                            int id = random.Next(Documents);
                            AssertDocument(id, store.Get("C", $"d/{id:D5}") ?? throw new InvalidOperationException(
                                $"d/{id:D5} was missing"));
                            right++;
                        }
                    }
                    catch (ObjectDisposedException)
                    {
                        return right;
                    }
                }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
            }

            start.SignalAndWait();
            await Task.Delay(Random.Shared.Next(1, 30));
            await store.DisposeAsync().AsTask().WaitAsync(TestDeadline.Hang);
            foreach (Task<int> reader in readers)
            {
                rightReads += await reader.WaitAsync(TestDeadline.Hang);
            }

            // A scan left open across the close goes on with right bytes or ends with ObjectDisposedException.
            try
            {
                for (int n = 1; leaked.MoveNext(); n++)
                {
                    AssertDocument(n, leaked.Current);
                }
            }
            catch (ObjectDisposedException)
            {
            }
        }

        Assert.True(rightReads > 0);

        static void AssertDocument(int n, StoredDocument document)
        {
            Assert.Equal($"d/{n:D5}", document.Id);
            Assert.Equal(JsonOf(n), System.Text.Encoding.UTF8.GetString(document.Json.Span));
        }

        static string JsonOf(int n) => $"{{\"n\":{n},\"pad\":\"{new string('p', 200)}\"}}";
    }

    /// <summary>A close asked for from inside the store's own scrub (its progress callback) or backup (its destination
    /// stream) cannot wait for that operation, which cannot end while the callback waits: it cancels the operation,
    /// returns, and completes once the operation has ended (the folder's lock released, a close from elsewhere
    /// awaiting it).</summary>
    [Theory]
    [InlineData("scrub, Dispose")]
    [InlineData("scrub, Dispose from a task it waits for")]
    [InlineData("backup, Dispose")]
    [InlineData("backup, DisposeAsync awaited")]
    public async Task A_store_closed_from_inside_its_own_backup_or_scrub_closes_once_that_operation_ends(string how)
    {
        using var dir = new TempDirectory();
        DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        var batch = new CommitBatch();
        for (int i = 0; i < 2_000; i++)
        {
            batch.Put("c", $"d{i:D5}",
                System.Text.Encoding.UTF8.GetBytes($"{{\"n\":{i},\"p\":\"{new string('x', 300)}\"}}"));
        }

        await store.WriteAsync(batch);
        await store.CheckpointAsync();
        await store.PutAsync("c", "late", "{}"u8.ToArray()); // journal after the checkpoint, for the backup to copy

        int closes = 0;
        void Close()
        {
            if (Interlocked.Increment(ref closes) == 1)
            {
                if (how.EndsWith("waits for", StringComparison.Ordinal))
                {
                    Task.Run(store.Dispose).Wait(); // the task flows from the callback: still inside the scrub
                }
                else
                {
                    store.Dispose();
                }

                Assert.Throws<ObjectDisposedException>(() => store.Get("c", "d00001")); // closed for callers at once
            }
        }

        Task operation = how.StartsWith("scrub", StringComparison.Ordinal)
            ? store.VerifyAsync(new SynchronousProgress<VerifyProgress>(_ => Close())).AsTask()
            : store.BackupAsync(new AfterWriteStream(Stream.Null, async (_, _) =>
            {
                if (how.EndsWith("awaited", StringComparison.Ordinal))
                {
                    await store.DisposeAsync(); // would await the backup awaiting this write
                }
                else
                {
                    Close();
                }
            })).AsTask();
        await Assert.ThrowsAsync<ObjectDisposedException>(() => operation.WaitAsync(TestDeadline.Hang));
        await store.DisposeAsync().AsTask().WaitAsync(TestDeadline.Hang); // from outside: awaits the deferred close

        await using DocumentStore reopened = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        Assert.Equal(2_001, reopened.Scan("c").Count());
    }

    /// <summary>Work a scrub's callback starts (its async flow inherited) that closes the store after the scrub ended
    /// is an ordinary close: it awaits the close, so the folder can be opened again at once.</summary>
    [Fact]
    public async Task A_close_from_work_a_scrub_started_but_that_outlives_it_awaits_the_close()
    {
        using var dir = new TempDirectory();
        DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        for (int i = 0; i < 500; i++)
        {
            await store.PutAsync("c", $"d{i}", "{\"n\":1}"u8.ToArray());
        }

        var scrubEnded = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        Task? closing = null;
        await store.VerifyAsync(new SynchronousProgress<VerifyProgress>(_ => closing ??= Task.Run(async () =>
        {
            await scrubEnded.Task;
            await store.PutAsync("c", "last", "{}"u8.ToArray()); // the close has a checkpoint to write
            await store.DisposeAsync();
            using DocumentStore reopened = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
            Assert.NotNull(reopened.Get("c", "last"));
        })));
        scrubEnded.SetResult();
        await closing!.WaitAsync(TestDeadline.Hang);
    }
}
