using System.Globalization;
using System.Text;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The document store over its page store: checkpoints, reopens from a checkpoint plus the journal after it, crash
/// images taken between checkpoints, snapshots held across checkpoints, and the checks of a journal that does not
/// match its data file.
/// </summary>
public sealed class StoreCheckpointTests
{
    private static readonly string[] s_collections = ["orders", "people"];

    [Property(MaxTest = 40, EndSize = 150, Arbitrary = [typeof(StoreCheckpointTests)])]
    public void A_store_with_checkpoints_reopens_and_crash_recovers_to_its_model(int[] program)
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        DocumentStoreOptions options = Options();
        options.PagesPerChunk = 3; // every checkpoint of more than three pages is several chunks
        var store = DocumentStore.Open(folder, options);
        var model = s_collections.ToDictionary(c => c,
            _ => new SortedDictionary<string, string>(StringComparer.Ordinal));
        var held = new List<(DocumentStore Store, DocumentSession Session, Dictionary<string, string> State)>();
        int images = 0;
        try
        {
            foreach (int op in program)
            {
                int argument = (op >>> 4) & 0xFFFFF;
                string collection = s_collections[argument % 2];
                string id = Id((argument / 2) % 300);
                switch (op & 0xF)
                {
                    case 0 or 1 or 2 or 3:
                        Put(store, model, collection, id, argument);
                        break;
                    case 4:
                        for (int i = 0; i < 40; i++)
                        {
                            Put(store, model, collection, Id(((argument / 2) + (i * 3)) % 300), argument + i);
                        }

                        break;
                    case 5 or 6:
                        store.DeleteAsync(collection, id).AsTask().GetAwaiter().GetResult();
                        model[collection].Remove(id);
                        break;
                    case 7 or 8:
                        store.CheckpointAsync().AsTask().GetAwaiter().GetResult();
                        Assert.Equal(store.LastCommittedSequence, store.Pages.Current.Sequence);
                        break;
                    case 9:
                        store.Dispose();
                        store = DocumentStore.Open(folder, options);
                        break;
                    case 10:
                        {
                            // A crash image: the files as they are on disk now, without the close's checkpoint. The
                            // program goes on with the store recovered from it (its journal after the checkpoint
                            // replayed, to be checkpointed later).
                            string image = Path.Combine(dir.Path, $"image{images++}");
                            CopyFolder(folder, image);
                            store.Dispose();
                            folder = image;
                            store = DocumentStore.Open(folder, options);
                            AssertHolds(store, model, new Random(argument));
                            break;
                        }

                    case 11:
                        {
                            DocumentSession session = store.OpenSession();
                            _ = session.LoadAsync<Doc>("none").AsTask().GetAwaiter().GetResult(); // takes the snapshot
                            held.Add((store, session,
                                new Dictionary<string, string>(model["people"], StringComparer.Ordinal)));
                            break;
                        }

                    default:
                        AssertHolds(store, model, new Random(argument));
                        break;
                }
            }

            foreach ((DocumentStore owner, DocumentSession session, Dictionary<string, string> state) in held)
            {
                // A session of this store instance still reads the state it first read, whatever was checkpointed
                // since (its snapshot is registered, so nothing it can see is pruned).
                if (ReferenceEquals(owner, store) && session.SnapshotSequence is long snapshot)
                {
                    var seen = store.Index.Range("people", null, null, false, snapshot)
                        .ToDictionary(e => e.Id, e => Encoding.UTF8.GetString(e.Version.Json.Span));
                    Assert.Equal(state.OrderBy(p => p.Key, StringComparer.Ordinal),
                        seen.OrderBy(p => p.Key, StringComparer.Ordinal));
                    Assert.Equal(state.Count, store.Index.Count("people", snapshot));
                }

                session.Dispose();
            }

            held.Clear();
            AssertHolds(store, model, new Random(program.Length));
            store.Dispose();
            store = DocumentStore.Open(folder, options);
            AssertHolds(store, model, new Random(program.Length + 1));
        }
        finally
        {
            foreach ((_, DocumentSession session, _) in held)
            {
                session.Dispose();
            }

            store.Dispose();
        }
    }

    [Fact]
    public async Task An_idle_stores_checkpoint_loop_rests_and_its_next_commits_checkpoint_at_once()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointThreshold = 64 * 1024;
        await using var store = DocumentStore.Open(dir.Path, options);
        byte[] body = Encoding.UTF8.GetBytes("{\"text\":\"" + new string('r', 2000) + "\"}");
        for (int round = 0; round < 3; round++)
        {
            await WaitUntilAsync(() => store.Resting.CheckpointLoop && store.Resting.SyncTimer);

            // The first commit wakes the loop (before it is submitted); writes past the threshold are checkpointed
            // as soon as the loop sees them, not after its resting tick.
            long generation = store.Pages.LastCheckpoint.Generation;
            await store.PutAsync("Doc", $"first-{round}", body);
            Assert.False(store.Resting.CheckpointLoop);
            for (int i = 0; i < 40; i++)
            {
                await store.PutAsync("Doc", $"r{round}-{i}", body);
            }

            await WaitUntilAsync(() => store.Pages.LastCheckpoint.Generation > generation);
        }

        Assert.Equal(3 * 41, store.GetInfo().Collections.Single(c => c.Name == "Doc").Documents);

        static async Task WaitUntilAsync(Func<bool> condition)
        {
            var deadline = DateTime.UtcNow.AddSeconds(30);
            while (!condition())
            {
                Assert.True(DateTime.UtcNow < deadline, "the condition did not hold within 30 s");
                await Task.Delay(10);
            }
        }
    }

    [Fact]
    public async Task A_session_reads_its_snapshot_across_checkpoints_and_queries_merge_every_layer()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 300; i += 2)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "v1"));
            }

            await store.CheckpointAsync();
        }

        // Reopened: the even ids are in the checkpointed tree. Replayed and written layers go on top.
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 1; i < 300; i += 4)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "v1"));
            }

            await using DocumentSession before = store.OpenSession();
            Assert.Equal(225, await before.CountAsync<Doc>());
            for (int round = 0; round < 3; round++)
            {
                for (int i = 0; i < 300; i += 3)
                {
                    await store.PutAsync("Doc", Id(i), Json(i, $"r{round}"));
                }

                await store.DeleteAsync("Doc", Id(round * 2));
                await store.CheckpointAsync();
            }

            // The session's snapshot predates all of it.
            List<Doc> seen = await ToListAsync(before.QueryByRangeAsync<Doc>(Id(0), Id(20)));
            Assert.Equal([0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18], seen.Select(d => d.N));
            Assert.All(seen, d => Assert.Equal("v1", d.Tag));

            await using DocumentSession after = store.OpenSession();
            List<Doc> now = await ToListAsync(after.QueryByRangeAsync<Doc>(Id(0), Id(20), descending: true));
            Assert.Equal([18, 17, 16, 15, 14, 13, 12, 10, 9, 8, 6, 5, 3, 1, 0], now.Select(d => d.N));
            Assert.Equal("r2", now.Single(d => d.N == 18).Tag);
            Assert.Equal("v1", now.Single(d => d.N == 16).Tag);
            Assert.Null(await after.LoadAsync<Doc>(Id(4)));
        }
    }

    [Fact]
    public async Task Writes_of_ids_at_and_above_the_trees_highest_keep_every_snapshots_view_and_its_count()
    {
        // Ids that grow past the checkpointed tree's highest: the highest itself overwritten, ids a later checkpoint
        // moved into the tree, an id deleted from it and written again; every snapshot keeps its view and count.
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 100; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "v1"));
            }

            await store.CheckpointAsync(); // the tree's highest: ids/00099
            await using DocumentSession first = store.OpenSession();
            Assert.Equal(100, await first.CountAsync<Doc>());
            await store.PutAsync("Doc", Id(99), Json(99, "v2")); // the highest itself: in the tree
            for (int i = 100; i < 200; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "v1")); // above it: new
            }

            Assert.Equal("v1", (await first.LoadAsync<Doc>(Id(99)))!.Tag);
            Assert.Null(await first.LoadAsync<Doc>(Id(150)));
            Assert.Equal(100, await first.CountAsync<Doc>());

            await store.CheckpointAsync(); // ids/00100 to ids/00199 leave memory for the tree (the session holds
                                           // back only what it can see)
            await using DocumentSession second = store.OpenSession();
            Assert.Equal(200, await second.CountAsync<Doc>()); // the first read fixes the session's snapshot
            await store.PutAsync("Doc", Id(150), Json(150, "v2")); // above the first tree's highest, in the second
            await store.DeleteAsync("Doc", Id(199));
            await store.CheckpointAsync(); // the tree's highest is now ids/00198
            await using DocumentSession third = store.OpenSession();
            Assert.Equal(199, await third.CountAsync<Doc>());
            await store.PutAsync("Doc", Id(199), Json(199, "v3")); // above the highest again, deleted from the tree

            Assert.Equal("v1", (await second.LoadAsync<Doc>(Id(150)))!.Tag);
            Assert.Equal("v1", (await second.LoadAsync<Doc>(Id(199)))!.Tag);
            Assert.Null(await third.LoadAsync<Doc>(Id(199)));
            Assert.Equal(200, await second.CountAsync<Doc>());
            Assert.Equal(199, await third.CountAsync<Doc>());
            await using DocumentSession now = store.OpenSession();
            Assert.Equal(200, await now.CountAsync<Doc>());
            Assert.Equal("v2", (await now.LoadAsync<Doc>(Id(150)))!.Tag);
            Assert.Equal("v3", (await now.LoadAsync<Doc>(Id(199)))!.Tag);
        }

        // Reopened: the checkpoint's tree plus the journal after it, replayed.
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            await using DocumentSession session = store.OpenSession();
            Assert.Equal(200, await session.CountAsync<Doc>());
            await store.PutAsync("Doc", Id(198), Json(198, "v2")); // the reopened tree's highest
            await store.PutAsync("Doc", Id(200), Json(200, "v1"));
            Assert.Equal("v1", (await session.LoadAsync<Doc>(Id(198)))!.Tag);
            Assert.Null(await session.LoadAsync<Doc>(Id(200)));
            Assert.Equal(200, await session.CountAsync<Doc>());
            await using DocumentSession now = store.OpenSession();
            Assert.Equal(201, await now.CountAsync<Doc>());
        }
    }

    [Fact]
    public async Task A_checkpoint_moves_what_it_covers_out_of_memory_unless_an_open_session_still_needs_it()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 400; i++)
            {
                await store.PutAsync(i % 2 == 0 ? "Doc" : "Other", Id(i), Json(i, "v1"));
            }

            for (int i = 0; i < 400; i += 10)
            {
                await store.DeleteAsync(i % 2 == 0 ? "Doc" : "Other", Id(i));
            }

            Assert.Equal(400, store.Index.HeadCount);
            await store.CheckpointAsync();
            Assert.Equal(0, store.Index.HeadCount); // deletes included: the tree no longer has them
            await AssertDocsAsync(store, "v1", "v1");

            // A session whose snapshot predates the overwrites keeps them in memory across checkpoints.
            DocumentSession before = store.OpenSession();
            Assert.Equal(160, await before.CountAsync<Doc>());
            for (int i = 4; i < 400; i += 4)
            {
                if (i % 10 != 0)
                {
                    await store.PutAsync("Doc", Id(i), Json(i, "v2"));
                }
            }

            await store.CheckpointAsync();
            Assert.Equal(80, store.Index.HeadCount);
            await store.CheckpointAsync(); // nothing new to write: the held keys stay while the session is open
            Assert.Equal(80, store.Index.HeadCount);
            List<Doc> old = await ToListAsync(before.QueryByPrefixAsync<Doc>("ids/"));
            Assert.Equal(160, old.Count);
            Assert.All(old, d => Assert.Equal("v1", d.Tag));
            Assert.Equal("v1", (await before.LoadAsync<Doc>(Id(4)))!.Tag);
            before.Dispose();

            await store.CheckpointAsync(); // no commit since: evicts what the session held back
            Assert.Equal(0, store.Index.HeadCount);
            await AssertDocsAsync(store, "v1", "v2");

            // Documents read back from the tree and written again start a chain again, and leave after the next one.
            await store.PutAsync("Doc", Id(2), Json(2, "v3"));
            Assert.Equal(1, store.Index.HeadCount);
            await store.CheckpointAsync();
            Assert.Equal(0, store.Index.HeadCount);
            Assert.Contains("v3", Encoding.UTF8.GetString(store.Get("Doc", Id(2))!.Value.Json.Span),
                StringComparison.Ordinal);
        }

        await using var reopened = DocumentStore.Open(dir.Path, options);
        Assert.Equal(0, reopened.Index.HeadCount);
        Assert.Equal(360, reopened.Index.LiveDocuments());

        static async Task AssertDocsAsync(DocumentStore store, string tag, string overwrittenTag)
        {
            await using DocumentSession session = store.OpenSession();
            List<Doc> docs = await ToListAsync(session.QueryByPrefixAsync<Doc>("ids/"));
            Assert.Equal(Enumerable.Range(0, 400).Where(i => i % 2 == 0 && i % 10 != 0), docs.Select(d => d.N));
            foreach (Doc doc in docs)
            {
                Assert.Equal(doc.N % 4 == 0 ? overwrittenTag : tag, doc.Tag);
                Doc loaded = (await session.LoadAsync<Doc>(Id(doc.N)))!;
                Assert.Equal(doc.Tag, loaded.Tag);
                Assert.Equal(session.GetVersion(loaded), store.Get("Doc", Id(doc.N))!.Value.Version);
            }

            Assert.Null(store.Get("Doc", Id(10)));
            Assert.Null(await session.LoadAsync<Doc>(Id(20)));
            Assert.Equal(160, await session.CountAsync<Doc>());
        }
    }

    /// <summary>
    /// A checkpoint that evicts some ids of a collection and holds others back for an open session replaces the
    /// collection's heads with a new table; the held-back ids are then found again by their ids in that table, and
    /// leave it at the first checkpoint after the session closes, while every version stays readable.
    /// </summary>
    [Fact]
    public async Task Ids_held_back_through_a_checkpoint_that_replaced_their_table_are_evicted_once_the_session_closes()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 100; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "v1"));
        }

        DocumentSession session = store.OpenSession();
        Assert.Equal(100, await session.CountAsync<Doc>()); // the session's snapshot: before the writes below
        for (int i = 50; i < 150; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "v2"));
        }

        Assert.Equal(150, store.Index.HeadCount);
        await store.CheckpointAsync(); // ids 0-49 leave; 50-149 are newer than the session, so they stay
        Assert.Equal(100, store.Index.HeadCount);
        Assert.Equal("v1", (await session.LoadAsync<Doc>(Id(60)))!.Tag);
        Assert.Null(await session.LoadAsync<Doc>(Id(120)));
        session.Dispose();

        await store.CheckpointAsync(); // nothing new to write: the held-back ids leave the replaced table
        Assert.Equal(0, store.Index.HeadCount);
        for (int i = 0; i < 150; i++)
        {
            string expected = i < 50 ? "v1" : "v2";
            Assert.Contains($"\"{expected}\"", Encoding.UTF8.GetString(store.Get("Doc", Id(i))!.Value.Json.Span),
                StringComparison.Ordinal);
        }
    }

    [Fact]
    public async Task Background_checkpoints_purge_the_journal_and_the_next_open_replays_only_what_follows()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointThreshold = 64 * 1024;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 20_000; i++)
            {
                await store.PutAsync("Doc", Id(i % 500), Json(i, "x"));
            }

            // The loop checks once a second.
            DateTime until = DateTime.UtcNow.AddSeconds(10);
            while (store.Journal.SegmentCount > 4 && DateTime.UtcNow < until)
            {
                await Task.Delay(50);
            }

            Assert.InRange(store.Journal.SegmentCount, 1, 4);
            Assert.True(store.Journal.FirstSequence > 1, "segments below the checkpoint were purged");
            Assert.True(store.Pages.Current.Generation >= 1);
        }

        await using var reopened = DocumentStore.Open(dir.Path, options);
        Assert.Equal(500, reopened.Index.LiveDocuments());
        StoredDocument? last = reopened.Get("Doc", Id(19_999 % 500));
        Assert.NotNull(last);
        Assert.Contains("19999", Encoding.UTF8.GetString(last.Value.Json.Span), StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_checkpoint_threshold_counts_the_journal_after_the_checkpoint_inside_its_own_segment()
    {
        using var dir = new TempDirectory();
        string tag = new('x', 400);
        await using (var store = DocumentStore.Open(dir.Path, ThresholdOptions(64 * 1024)))
        {
            long first = await WriteUntilCheckpointAsync(store, 0);
            Assert.Equal(1, store.Journal.SegmentCount);

            // The next checkpoint starts once 64 KiB follow the first one, though no segment starts after it.
            long second = await WriteUntilCheckpointAsync(store, 1000);
            Assert.True(second > first);
            Assert.Equal(1, store.Journal.SegmentCount);

            // Below the threshold, nothing starts (the loop checks every 100 ms).
            for (int i = 0; i < 10; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, tag));
            }

            await Task.Delay(500);
            Assert.Equal(second, store.Pages.Current.Sequence);
        }

        // What an open replays counts too: 130 KiB written after the checkpoint (under a threshold that does not
        // start one), then closed without one, then opened with the 64 KiB threshold.
        await using (var store = DocumentStore.Open(dir.Path, ThresholdOptions(1 << 20)))
        {
            for (int i = 0; i < 300; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, tag));
            }
        }

        await using var reopened = DocumentStore.Open(dir.Path, ThresholdOptions(64 * 1024));
        long replayedFrom = reopened.Pages.Current.Sequence;
        Assert.True(reopened.LastCommittedSequence >= replayedFrom + 300);
        DateTime until = DateTime.UtcNow.AddSeconds(30);
        while (reopened.Pages.Current.Sequence == replayedFrom && DateTime.UtcNow < until)
        {
            await Task.Delay(20);
        }

        Assert.Equal(reopened.LastCommittedSequence, reopened.Pages.Current.Sequence);

        static DocumentStoreOptions ThresholdOptions(long threshold)
        {
            DocumentStoreOptions options = Options(); // 1 MiB segments: everything here stays in one
            options.CheckpointThreshold = threshold;
            options.CheckpointOnClose = false;
            return options;
        }

        async Task<long> WriteUntilCheckpointAsync(DocumentStore store, int from)
        {
            long before = store.Pages.Current.Sequence;
            for (int i = from; i < from + 200; i++) // about 90 KiB of records
            {
                await store.PutAsync("Doc", Id(i), Json(i, tag));
            }

            DateTime deadline = DateTime.UtcNow.AddSeconds(30);
            while (store.Pages.Current.Sequence == before && DateTime.UtcNow < deadline)
            {
                await Task.Delay(20);
            }

            Assert.True(store.Pages.Current.Sequence > before, "a checkpoint started past the threshold");
            return store.Pages.Current.Sequence;
        }
    }

    [Fact]
    public async Task Commits_wait_while_checkpoints_fall_behind_and_resume_when_one_finishes_losing_nothing()
    {
        using var dir = new TempDirectory();
        using var gate = new ManualResetEventSlim(false);
        var files = new FaultInjectingFileSystem
        {
            Matches = static path => path.EndsWith(DocumentStore.DataFileName, StringComparison.Ordinal),
            SyncGate = gate, // every checkpoint's fsync waits here: checkpoints cannot finish
        };
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.FileSystem = files;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 64 * 1024;
        options.CheckpointBackpressureThreshold = 256 * 1024;
        var acknowledged = new System.Collections.Concurrent.ConcurrentDictionary<string, string>();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            using var stop = new CancellationTokenSource();
            using var release = new Releaser(gate, stop); // on a failed assertion too, so the close can finish
            Task writer = Task.Run(async () =>
            {
                for (int i = 0; !stop.IsCancellationRequested; i++)
                {
                    byte[] json = Json(i, new string('x', 500));
                    await store.PutAsync("Doc", Id(i % 2000), json);
                    acknowledged[Id(i % 2000)] = Encoding.UTF8.GetString(json);
                    if (i % 64 == 0)
                    {
                        // A put that needs no hand-off completes on this thread; yield now and then so that the
                        // test's own timers run should the backpressure fail to stop this loop.
                        await Task.Yield();
                    }
                }
            });

            DateTime until = DateTime.UtcNow.AddSeconds(30);
            while (!store.IsCheckpointBehind && DateTime.UtcNow < until && !writer.IsCompleted)
            {
                await Task.Delay(10);
            }

            Assert.True(store.IsCheckpointBehind, "the journal after the held checkpoint passed the limit");
            // Commits in flight when the flag rose finish (on a busy machine that may take a while): wait until the
            // sequence holds still for 300 ms, then check that it stays there.
            long held;
            until = DateTime.UtcNow.AddSeconds(30);
            do
            {
                held = store.LastCommittedSequence;
                await Task.Delay(300);
            }
            while (store.LastCommittedSequence != held && DateTime.UtcNow < until);

            await Task.Delay(500);
            Assert.Equal(held, store.LastCommittedSequence); // nobody commits past the limit
            Assert.False(store.IsFaulted);

            // A commit waiting for the checkpoint can be cancelled, and the store stays usable.
            using (var cancel = new CancellationTokenSource(50))
            {
                await Assert.ThrowsAnyAsync<OperationCanceledException>(async () =>
                    await store.PutAsync("Doc", "cancelled", Json(0, "c"), cancellationToken: cancel.Token));
            }

            gate.Set(); // the checkpoint finishes: the journal behind it drops and the writers resume
            until = DateTime.UtcNow.AddSeconds(30);
            while (store.LastCommittedSequence < held + 200 && DateTime.UtcNow < until)
            {
                await Task.Delay(10);
            }

            Assert.True(store.LastCommittedSequence >= held + 200, "commits resumed after the checkpoint");
            await stop.CancelAsync();
            await writer;
            Assert.Null(store.Get("Doc", "cancelled"));
        }

        await using var reopened = DocumentStore.Open(dir.Path, Options());
        foreach ((string id, string json) in acknowledged)
        {
            Assert.Equal(json, Encoding.UTF8.GetString(reopened.Get("Doc", id)!.Value.Json.Span));
        }
    }

    /// <summary>Opens the held checkpoint's gate and stops the writer when disposed.</summary>
    private sealed class Releaser(ManualResetEventSlim gate, CancellationTokenSource stop) : IDisposable
    {
        public void Dispose()
        {
            gate.Set();
            stop.Cancel();
        }
    }

    [Fact]
    public async Task A_failing_checkpoint_does_not_hold_commits_back()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = static path => path.EndsWith(DocumentStore.DataFileName, StringComparison.Ordinal),
        };
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.FileSystem = files;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 64 * 1024;
        options.CheckpointBackpressureThreshold = 128 * 1024;
        await using var store = DocumentStore.Open(dir.Path, options);
        using var done = new CancellationTokenSource();
        var failer = new Thread(() =>
        {
            while (!done.IsCancellationRequested)
            {
                files.Arm(FileFault.DiskFull); // every checkpoint of the run fails
                Thread.Sleep(2);
            }
        });
        failer.Start();
        Task writes = Task.Run(async () =>
        {
            for (int i = 0; i < 3000; i++)
            {
                await store.PutAsync("Doc", Id(i % 1000), Json(i, new string('y', 200)));
            }
        });

        try
        {
            await writes.WaitAsync(TimeSpan.FromSeconds(60)); // throws TimeoutException if the writers were held
        }
        finally
        {
            await done.CancelAsync();
            failer.Join();
        }

        Assert.True(store.Pages.Current.Generation == 0, "no checkpoint succeeded");
        Assert.False(store.IsFaulted);
        Assert.Contains("2999", Encoding.UTF8.GetString(store.Get("Doc", Id(999))!.Value.Json.Span),
            StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(FileFault.WriteFails, 0)]
    [InlineData(FileFault.ShortWrite, 0)]
    [InlineData(FileFault.DiskFull, 0)]
    [InlineData(FileFault.SyncFails, 0)]
    [InlineData(FileFault.WriteFails, 1)]
    [InlineData(FileFault.SyncFails, 1)]
    [InlineData(FileFault.WriteBackFails, 0)]
    public async Task A_checkpoint_that_fails_leaves_the_store_serving_and_the_next_one_takes_its_changes(
        FileFault fault, int skip)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = static path => path.EndsWith(DocumentStore.DataFileName, StringComparison.Ordinal),
        };
        DocumentStoreOptions options = Options();
        options.FileSystem = files;
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int round = 0; round < 3; round++)
            {
                for (int i = 0; i < 300; i++)
                {
                    string id = Id((i * 7) + round);
                    byte[] json = Json(i, $"r{round}");
                    await store.PutAsync("Doc", id, json);
                    model[id] = Encoding.UTF8.GetString(json);
                }

                await store.DeleteAsync("Doc", Id(round));
                model.Remove(Id(round));
                long before = store.Pages.Current.Sequence;
                if (round == 1)
                {
                    // A checkpoint writes its chunk and fsyncs, then its header slot and fsyncs: skip 1 hits the
                    // header's.
                    files.Arm(fault, skip);
                    await Assert.ThrowsAnyAsync<IOException>(async () => await store.CheckpointAsync());
                    Assert.Equal(before, store.Pages.Current.Sequence);
                    Assert.False(store.IsFaulted);
                    await store.PutAsync("Doc", "after-failure", Json(1, "ok"));
                    model["after-failure"] = Encoding.UTF8.GetString(Json(1, "ok"));
                }

                await store.CheckpointAsync();
                Assert.Equal(store.LastCommittedSequence, store.Pages.Current.Sequence);
            }
        }

        await using var reopened = DocumentStore.Open(dir.Path, Options());
        var all = reopened.Index.Range("Doc", null, null, false, reopened.LastCommittedSequence)
            .ToDictionary(e => e.Id, e => Encoding.UTF8.GetString(e.Version.Json.Span));
        Assert.Equal(model.OrderBy(p => p.Key, StringComparer.Ordinal),
            all.OrderBy(p => p.Key, StringComparer.Ordinal));
    }

    [Fact]
    public async Task A_checkpoint_records_its_duration_phases_bytes_and_pages_on_the_Folio_meter()
    {
        using var dir = new TempDirectory();
        var recorded = new System.Collections.Concurrent.ConcurrentDictionary<string, double>();
        var phases = new System.Collections.Concurrent.ConcurrentDictionary<string, int>();
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener = meters.Listen();
        listener.SetMeasurementEventCallback<double>((instrument, value, tags, _) =>
        {
            recorded.AddOrUpdate(instrument.Name, value, (_, total) => total + value);
            foreach (KeyValuePair<string, object?> tag in tags)
            {
                if (tag.Key == "folio.phase" && value >= 0)
                {
                    phases.AddOrUpdate((string)tag.Value!, 1, (_, count) => count + 1);
                }
            }
        });
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) =>
            recorded.AddOrUpdate(instrument.Name, value, (_, total) => total + value));
        listener.SetMeasurementEventCallback<int>((instrument, value, _, _) =>
            recorded.AddOrUpdate(instrument.Name, value, (_, total) => total + value));
        listener.Start();
        DocumentStoreOptions options = Options();
        options.MeterFactory = meters;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 200; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "x"));
        }

        await store.CheckpointAsync();
        listener.RecordObservableInstruments();
        Assert.True(recorded.GetValueOrDefault("folio.checkpoint.duration") > 0);
        Assert.True(recorded.GetValueOrDefault("folio.checkpoint.phase.duration") > 0);
        Assert.Equal(["apply", "publish", "serialize", "write"], phases.Keys.Order(StringComparer.Ordinal));
        Assert.All(phases.Values, count => Assert.Equal(phases["write"], count)); // each checkpoint records all four
        Assert.Equal(store.Pages.LastCheckpoint.Bytes, recorded.GetValueOrDefault("folio.checkpoint.bytes"));
        Assert.Equal(store.Pages.LastCheckpoint.Pages, recorded.GetValueOrDefault("folio.checkpoint.pages"));
        Assert.Equal(store.Pages.ChunkCount, recorded.GetValueOrDefault("folio.datafile.chunks"));
        Assert.True(recorded.ContainsKey("folio.journal.bytes_since_checkpoint"));
    }

    [Fact]
    public async Task An_operators_checkpoint_and_compaction_run_on_the_checkpoint_thread_not_the_thread_pool()
    {
        using var dir = new TempDirectory();
        var threads = new System.Collections.Concurrent.ConcurrentQueue<(string? Name, bool Pooled)>();
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener =
            meters.Listen(instrument => instrument.Name == "folio.checkpoint.duration");
        listener.SetMeasurementEventCallback<double>((_, _, _, _) =>
            threads.Enqueue((Thread.CurrentThread.Name, Thread.CurrentThread.IsThreadPoolThread)));
        listener.Start();
        DocumentStoreOptions options = Options();
        options.MeterFactory = meters;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int round = 0; round < 3; round++)
        {
            for (int i = 0; i < 200; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, $"round {round}"));
            }

            Assert.Equal(store.LastCommittedSequence, await store.CheckpointAsync());
        }

        await store.CompactAsync();
        Assert.True(threads.Count >= 4, $"{threads.Count} checkpoints recorded");
        Assert.All(threads, thread => Assert.Equal(("Folio checkpoints", false), thread));
    }

    [Fact]
    public async Task A_cancelled_checkpoint_request_throws_and_requests_racing_a_close_finish_or_fail_as_disposed()
    {
        using var dir = new TempDirectory();
        var store = DocumentStore.Open(dir.Path, Options());
        for (int i = 0; i < 100; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "x"));
        }

        await Assert.ThrowsAnyAsync<OperationCanceledException>(
            () => store.CheckpointAsync(new CancellationToken(canceled: true)).AsTask());
        Assert.Equal(store.LastCommittedSequence, await store.CheckpointAsync()); // still usable

        // Requests from many threads while the store closes: each either checkpoints or meets the closed store, and
        // every put acknowledged before is there after a reopen.
        using var start = new ManualResetEventSlim();
        var acknowledged = new System.Collections.Concurrent.ConcurrentQueue<string>();
        Task<long>[] requests = Enumerable.Range(0, 32).Select(i => Task.Run(async () =>
        {
            start.Wait();
            try
            {
                await store.PutAsync("Doc", Id(1_000 + i), Json(i, "y"));
                acknowledged.Enqueue(Id(1_000 + i));
            }
            catch (ObjectDisposedException)
            {
            }

            return await store.CheckpointAsync();
        })).ToArray();
        start.Set();
        await Task.Delay(1);
        await store.DisposeAsync();
        Task all = Task.WhenAll(requests);
        await Task.WhenAny(all, Task.Delay(TimeSpan.FromSeconds(60)));
        Assert.All(requests, request => Assert.True(request.IsCompleted, "a request outlived the close"));
        foreach (Task<long> request in requests)
        {
            if (!request.IsCompletedSuccessfully)
            {
                Assert.IsType<ObjectDisposedException>(request.Exception!.InnerException);
            }
        }

        await using var reopened = DocumentStore.Open(dir.Path, Options());
        Assert.All(acknowledged, id => Assert.NotNull(reopened.Get("Doc", id)));
    }

    [Fact]
    public async Task A_journal_purged_past_a_missing_data_file_is_corruption_not_an_empty_store()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options(TestStoreOptions.TinySegments());
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 3_000; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "x"));
            }

            await store.CheckpointAsync();
            Assert.True(store.Journal.FirstSequence > 1);
        }

        File.Delete(Path.Combine(dir.Path, DocumentStore.DataFileName));
        var error = Assert.Throws<StoreCorruptedException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Contains("purged", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_lost_purge_watermark_loses_nothing_a_checkpoint_holds_a_segment_lost_after_it_is_corruption()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options(TestStoreOptions.TinySegments());
        options.CheckpointOnClose = false; // the commits after the checkpoint stay in the journal only
        string after = new('y', 200);
        long checkpointed;
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 3_000; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "x"));
            }

            await store.CheckpointAsync();
            checkpointed = store.LastCommittedSequence;
            Assert.True(store.Journal.FirstSequence > 1);
            for (int i = 3_000; i < 4_000; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, after)); // several segments after the checkpoint
            }
        }

        string journal = Path.Combine(dir.Path, DocumentStore.JournalFolderName);
        string watermark = Path.Combine(journal, Folio.Journal.JournalFormat.PurgeWatermarkFileName);
        byte[] written = File.ReadAllBytes(watermark);
        for (int round = 0; round < 2; round++)
        {
            if (round == 0)
            {
                File.Delete(watermark);
            }
            else
            {
                File.WriteAllBytes(watermark, [.. written[..^1], (byte)(written[^1] ^ 1)]);
            }

            await using var store = DocumentStore.Open(dir.Path, options);
            for (int i = 0; i < 4_000; i++)
            {
                Assert.Equal(Json(i, i < 3_000 ? "x" : after), store.Get("Doc", Id(i))!.Value.Json.ToArray());
            }

            Assert.True((await store.VerifyAsync()).IsHealthy);
            Assert.Equal(written[..8], File.ReadAllBytes(watermark)[..8]); // written again, same first sequence
        }

        // A segment missing after the checkpoint held commits nothing else has: corruption, as before.
        string[] segments = Directory.GetFiles(journal, "*.journal").Order(StringComparer.Ordinal).ToArray();
        Assert.True(segments.Length > 2, $"{segments.Length} segments");
        long second = long.Parse(Path.GetFileNameWithoutExtension(segments[1]),
            System.Globalization.CultureInfo.InvariantCulture);
        Assert.True(second > checkpointed + 1, $"the second segment starts at {second}, checkpoint at {checkpointed}");
        File.Delete(segments[0]);
        File.Delete(watermark);
        Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options));
    }

    [Fact]
    public async Task A_data_file_ahead_of_its_journal_is_corruption()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 100; i++)
            {
                await store.PutAsync("Doc", Id(i), Json(i, "x"));
            }

            await store.CheckpointAsync();
        }

        Directory.Delete(Path.Combine(dir.Path, "journal"), recursive: true);
        var error = Assert.Throws<StoreCorruptedException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Contains("before the data file's checkpoint", error.Message, StringComparison.Ordinal);
    }

    public static Arbitrary<int[]> Programs() =>
        Gen.ArrayOf(Gen.Choose(0, int.MaxValue)).Select(ops => ops.Length > 150 ? ops[..150] : ops).ToArbitrary();

    /// <summary><paramref name="options"/> (default: small segments) checkpointing only where the test asks.</summary>
    [Fact]
    public async Task Ids_added_since_the_open_leave_memory_once_a_checkpoint_holds_them_and_no_snapshot_needs_them()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.AddedIdsTrimMinimum = 64;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 2_000; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "v1"));
        }

        Assert.Equal(2_000, store.Index.AddedIdCount("Doc"));
        using DocumentSession before = store.OpenSession();
        Assert.Equal(2_000, await before.CountAsync<Doc>());
        for (int i = 0; i < 2_000; i += 20)
        {
            await store.DeleteAsync("Doc", Id(i)); // 100 deletes an open session still sees as alive
        }

        await store.CheckpointAsync();
        await store.PutAsync("Doc", Id(5_000), Json(5_000, "v1")); // the committer trims before it applies this
        Assert.InRange(store.Index.AddedIdCount("Doc"), 100, 200); // the held deletes and the new id, not 2,000

        List<Doc> old = await ToListAsync(before.QueryByPrefixAsync<Doc>("ids/"));
        Assert.Equal(2_000, old.Count); // the deleted ids are in no tree now: the trimmed list still has them
        Assert.Equal(Enumerable.Range(0, 2_000).Select(Id), old.Select(d => d.Id));
        using (DocumentSession now = store.OpenSession())
        {
            List<Doc> current = await ToListAsync(now.QueryByPrefixAsync<Doc>("ids/"));
            Assert.Equal(1_901, current.Count);
            Assert.DoesNotContain(current, d => int.Parse(d.Id[4..], CultureInfo.InvariantCulture) % 20 == 0
                && d.Id != Id(5_000));
            Assert.Equal(1_901, await now.CountAsync<Doc>());
        }

        before.Dispose();
        await store.CheckpointAsync(); // the deletes leave the heads now that no session holds them
        await store.PutAsync("Doc", Id(5_001), Json(5_001, "v1"));
        Assert.InRange(store.Index.AddedIdCount("Doc"), 1, 2);
        using DocumentSession last = store.OpenSession();
        Assert.Equal(1_902, await last.CountAsync<Doc>());
    }

    [Fact]
    public async Task A_query_abandoned_without_disposing_its_enumerator_lets_go_of_its_checkpoint_once_collected()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, Options());
        for (int i = 0; i < 50; i++)
        {
            await store.PutAsync("Doc", Id(i), Json(i, "v1"));
        }

        await store.CheckpointAsync();
        Folio.Pages.PageCheckpoint first = store.Pages.Current;
        int heldByIndex = first.Pins;
        await StartQueryAndAbandonItAsync(store);
        Assert.Equal(heldByIndex + 1, first.Pins); // the abandoned range read still pins the checkpoint it walks

        await store.PutAsync("Doc", Id(1), Json(1, "v2"));
        await store.CheckpointAsync(); // the index moves to the new checkpoint and lets go of its own pin
        for (int attempt = 0; attempt < 10 && first.Pins > 0; attempt++)
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
        }

        Assert.Equal(0, first.Pins);
    }

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static async Task StartQueryAndAbandonItAsync(DocumentStore store)
    {
        DocumentSession session = store.OpenSession();
        IAsyncEnumerator<Doc> enumerator = session.QueryByPrefixAsync<Doc>("ids/").GetAsyncEnumerator();
        Assert.True(await enumerator.MoveNextAsync());
        session.Dispose(); // the session, not the enumerator
    }

    private static DocumentStoreOptions Options(DocumentStoreOptions? options = null)
    {
        options ??= TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan; // checkpoints only where the test asks
        options.CheckpointThreshold = 1L << 40;
        options.AddedIdsTrimMinimum = 8; // trim the added ids at almost every checkpoint
        return options;
    }

    private static void Put(DocumentStore store, Dictionary<string, SortedDictionary<string, string>> model,
        string collection, string id, int n)
    {
        string tag = n % 13 == 0 ? new string('L', 3000) : "t" + n; // some values go to overflow pages
        byte[] json = Json(n, tag);
        store.PutAsync(collection, id, json).AsTask().GetAwaiter().GetResult();
        model[collection][id] = Encoding.UTF8.GetString(json);
    }

    private static void AssertHolds(DocumentStore store, Dictionary<string, SortedDictionary<string, string>> model,
        Random random)
    {
        long snapshot = store.LastCommittedSequence;
        foreach ((string collection, SortedDictionary<string, string> documents) in model)
        {
            var ascending = store.Index.Range(collection, null, null, false, snapshot).ToList();
            Assert.Equal(documents.Keys, ascending.Select(e => e.Id));
            Assert.Equal(documents.Values, ascending.Select(e => Encoding.UTF8.GetString(e.Version.Json.Span)));
            Assert.Equal(documents.Keys.Reverse(),
                store.Index.Range(collection, null, null, true, snapshot).Select(e => e.Id));
            Assert.Equal(documents.Count, store.Index.Count(collection, snapshot));
            for (int i = 0; i < 5; i++)
            {
                string from = Id(random.Next(300));
                string to = Id(random.Next(300));
                if (string.CompareOrdinal(from, to) > 0)
                {
                    (from, to) = (to, from);
                }

                var expected = documents.Keys.Where(k => string.CompareOrdinal(k, from) >= 0
                    && string.CompareOrdinal(k, to) < 0).ToList();
                Assert.Equal(expected, store.Index.Range(collection, from, to, false, snapshot).Select(e => e.Id));
                string id = Id(random.Next(300));
                StoredDocument? found = store.Get(collection, id);
                Assert.Equal(documents.TryGetValue(id, out string? json) ? json : null,
                    found is { } document ? Encoding.UTF8.GetString(document.Json.Span) : null);
            }

            Assert.Equal(documents.Keys.Where(k => k.StartsWith("ids/0001", StringComparison.Ordinal)),
                store.Index.Prefix(collection, "ids/0001", false, snapshot).Select(e => e.Id));
        }
    }

    internal static void CopyFolder(string source, string destination)
    {
        Directory.CreateDirectory(destination);
        foreach (string file in Directory.GetFiles(source, "*", SearchOption.AllDirectories))
        {
            if (file.EndsWith(".lock", StringComparison.Ordinal))
            {
                continue; // held by the open store; an open creates it
            }

            string target = Path.Combine(destination, Path.GetRelativePath(source, file));
            Directory.CreateDirectory(Path.GetDirectoryName(target)!);
            File.Copy(file, target);
        }
    }

    private static async Task<List<T>> ToListAsync<T>(IAsyncEnumerable<T> items)
    {
        var list = new List<T>();
        await foreach (T item in items)
        {
            list.Add(item);
        }

        return list;
    }

    private static string Id(int n) => $"ids/{n:D5}";

    private static byte[] Json(int n, string tag) => Encoding.UTF8.GetBytes($"{{\"N\":{n},\"Tag\":\"{tag}\"}}");

    public sealed class Doc
    {
        public string Id { get; set; } = "";

        public int N { get; set; }

        public string Tag { get; set; } = "";
    }
}
