using System.IO.Pipelines;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Callers on a thread with a <see cref="SynchronizationContext"/> (a UI thread, classic ASP.NET, a test framework's
/// own) that block on the store's async methods: a continuation the store posted to that context would wait for the
/// blocked thread, a deadlock. Every public async operation is called here with a context that records each post (and
/// runs it on the thread pool, so a failure is a count, not a hang), blocking on its result.
/// </summary>
public sealed class SynchronizationContextTests
{
    [Fact]
    public void No_operation_of_the_store_posts_a_continuation_to_the_callers_synchronization_context()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        byte[] doc = Encoding.UTF8.GetBytes("{\"Name\":\"x\",\"Pad\":\"" + new string('p', 400) + "\"}");
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointThreshold = 256 * 1024;
        var posts = new List<string>();
        var context = new RecordingContext();
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(context);
        try
        {
            void Call(string operation, Action action)
            {
                int before = context.Posts;
                action();
                if (context.Posts != before)
                {
                    posts.Add($"{operation}: {context.Posts - before}");
                }
            }

            DocumentStore store = null!;
            Call("OpenAsync", () => store = Wait(DocumentStore.OpenAsync(folder, options)));

            // Writers on the thread pool (no context) hold the committer role now and then, so that the calls below
            // also wait for commits of others and complete asynchronously, not only inline.
            using var stop = new CancellationTokenSource();
            Task[] background = Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
            {
                for (int i = 0; !stop.IsCancellationRequested; i++)
                {
                    await store.PutAsync("Background", $"b/{w}/{i % 64}", doc);
                }
            })).ToArray();
            for (int round = 0; round < 2; round++)
            {
                // Opened now, the feed holds its start in the journal through this round's checkpoints.
                IAsyncEnumerable<DocumentChange> feed = null!;
                Call("ReadAsync", () => feed = store.Changes.ReadAsync(store.LastCommittedSequence + 1));
                Call("PutAsync", () =>
                {
                    for (int i = 0; i < 1000; i++)
                    {
                        Wait(store.PutAsync(nameof(User), $"u/{i}", doc));
                    }
                });
                Call("concurrent PutAsync", () => Task.WaitAll(Enumerable.Range(0, 32)
                    .Select(i => store.PutAsync(nameof(User), $"c/{i}", doc).AsTask()).ToArray()));
                Call("WriteAsync", () => Wait(store.WriteAsync(new CommitBatch()
                    .Put(nameof(User), "w/1", doc).Delete(nameof(User), "u/1"))));
                Call("DeleteAsync", () => Wait(store.DeleteAsync(nameof(User), "u/2")));
                Call("session", () =>
                {
                    using DocumentSession session = store.OpenSession();
                    User user = Wait(session.LoadAsync<User>("u/3"))!;
                    user.Name = $"round {round}";
                    session.Store(new User { Name = "new" });
                    session.SaveChangesAsync().GetAwaiter().GetResult();
                    Wait(session.CountAsync<User>());
                    Drain(session.QueryAsync<User>(take: 50), _ => false);
                    Drain(session.QueryByPrefixAsync<User>("u/1"), _ => false);
                    Drain(session.QueryByRangeAsync<User>("u/5", "u/6", descending: true), _ => false);
                });
                Call("CheckpointAsync", () => Wait(store.CheckpointAsync()));
                Call("CompactAsync", () => Wait(store.CompactAsync()));
                Call("VerifyAsync", () => Wait(store.VerifyAsync()));
                Call("BackupAsync to a file", () => Wait(store.BackupAsync(Path.Combine(dir.Path, $"{round}.bak"))));
                Call("BackupAsync to a stream", () =>
                {
                    using var stream = new MemoryStream();
                    Wait(store.BackupAsync(stream));
                });
                Call("BackupAsync to a pipe", () =>
                {
                    var pipe = new Pipe();
                    Task reader = Task.Run(() => DrainPipeAsync(pipe.Reader));
                    Wait(store.BackupAsync(pipe.Writer));
                    pipe.Writer.Complete();
                    reader.GetAwaiter().GetResult();
                });
                long last = store.LastCommittedSequence;
                Call("the change feed", () => Drain(feed, change => change.Sequence >= last));
                Call("the change feed waiting for a commit", () =>
                {
                    IAsyncEnumerator<DocumentChange> changes = store.Changes.ReadAsync(last + 1).GetAsyncEnumerator();
                    Task<bool> next = changes.MoveNextAsync().AsTask();
                    Task.Run(async () =>
                    {
                        await Task.Delay(20);
                        await store.PutAsync(nameof(User), "late", doc);
                    });
                    Assert.True(next.GetAwaiter().GetResult());
                    Wait(changes.DisposeAsync());
                });
            }

            stop.Cancel();
            Wait(Task.WhenAll(background));
            Call("DisposeAsync", () => Wait(store.DisposeAsync()));
            Call("ReadInfoAsync", () => DocumentStore.ReadInfoAsync(folder).GetAwaiter().GetResult());
            Call("VerifyFilesAsync", () => DocumentStore.VerifyFilesAsync(folder).GetAwaiter().GetResult());
            Call("ScanFilesAsync", () => Drain(DocumentStore.ScanFilesAsync(folder), _ => false));
            Call("BackupFilesAsync",
                () => Wait(DocumentStore.BackupFilesAsync(folder, Path.Combine(dir.Path, "files.bak"))));
            string restored = Path.Combine(dir.Path, "restored");
            Call("RestoreAsync", () => Wait(DocumentStore.RestoreAsync(Path.Combine(dir.Path, "1.bak"), restored)));
            for (int i = 0; i < 20; i++)
            {
                Call("Open, PutAsync, Dispose", () =>
                {
                    DocumentStore reopened = DocumentStore.Open(restored, TestStoreOptions.SmallSegments());
                    Wait(reopened.PutAsync(nameof(User), "again", doc));
                    reopened.Dispose();
                });
            }
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }

        Assert.Empty(posts);
    }

    private static T Wait<T>(ValueTask<T> task) => task.AsTask().GetAwaiter().GetResult();

    private static void Wait(ValueTask task) => task.AsTask().GetAwaiter().GetResult();

    private static void Wait(Task task) => task.GetAwaiter().GetResult();

    /// <summary>Enumerates until the end or until <paramref name="last"/> says the item was the last wanted.</summary>
    private static void Drain<T>(IAsyncEnumerable<T> items, Func<T, bool> last)
    {
        IAsyncEnumerator<T> enumerator = items.GetAsyncEnumerator();
        try
        {
            while (Wait(enumerator.MoveNextAsync()) && !last(enumerator.Current))
            {
            }
        }
        finally
        {
            Wait(enumerator.DisposeAsync());
        }
    }

    private static async Task DrainPipeAsync(PipeReader reader)
    {
        while (true)
        {
            ReadResult read = await reader.ReadAsync();
            reader.AdvanceTo(read.Buffer.End);
            if (read.IsCompleted)
            {
                await reader.CompleteAsync();
                return;
            }
        }
    }

    /// <summary>Counts posts and runs them on the thread pool.</summary>
    private sealed class RecordingContext : SynchronizationContext
    {
        private int _posts;

        public int Posts => Volatile.Read(ref _posts);

        public override void Post(SendOrPostCallback d, object? state)
        {
            Interlocked.Increment(ref _posts);
            ThreadPool.QueueUserWorkItem(_ => d(state));
        }
    }
}
