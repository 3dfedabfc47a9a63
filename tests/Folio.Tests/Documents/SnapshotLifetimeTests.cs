using System.Runtime.CompilerServices;
using System.Text;
using Folio.Documents;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// Sessions that are never disposed must neither freeze reads nor pin old versions forever: the snapshot registry
/// grows instead of waiting for a free slot, a session that the collector finds unreachable releases its snapshot,
/// and a session kept alive but forgotten stops holding versions back after
/// <see cref="DocumentStoreOptions.MaxSnapshotAge"/>, after which its reads throw
/// <see cref="SnapshotExpiredException"/>
/// rather than return a wrong answer.
/// </summary>
public sealed class SnapshotLifetimeTests
{
    private const int LeakedSessions = 100_000;
    private const int KeptReachable = 10_000;

    [Fact]
    public async Task A_hundred_thousand_leaked_sessions_neither_block_reads_nor_pin_old_versions_after_a_collection()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "hot", "{\"Name\":\"v0\"}"u8.ToArray());

        // Open the sessions on another thread with a deadline: registering the 4,097th snapshot once waited forever.
        // The first sessions stay reachable for a while (more than the 4,096 slots the registry once had); the rest
        // are unreachable at once, so the collector may already be releasing them while the loop runs.
        var reachable = new List<DocumentSession>();
        await Task.Run(() => LeakSessions(reachable)).WaitAsync(TestDeadline.Hang);
        Assert.True(store.Index.OpenSnapshots >= KeptReachable, $"{store.Index.OpenSnapshots} snapshots are open");

        User? loaded = await Task.Run(async () =>
        {
            await using var session = store.OpenSession();
            return await session.LoadAsync<User>("hot");
        }).WaitAsync(TestDeadline.Hang);
        Assert.Equal("v0", loaded!.Name);

        // Versions written while the leaked snapshots are open are kept for them...
        for (int i = 1; i <= 20; i++)
        {
            await store.PutAsync("User", "hot", Encoding.UTF8.GetBytes($"{{\"Name\":\"v{i}\"}}"));
        }

        var key = new DocumentKey("User", "hot");
        Assert.True(store.Index.ChainLength(key) > 20);

        // ...until the collector finds the sessions unreachable: their snapshots are released, and pruning resumes.
        reachable.Clear();
        for (int round = 0; round < 3 && store.Index.OpenSnapshots > 0; round++)
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
        }

        Assert.Equal(0, store.Index.OpenSnapshots);
        for (int i = 0; i < 1000; i++)
        {
            await store.PutAsync("User", "hot", Encoding.UTF8.GetBytes($"{{\"Name\":\"w{i}\"}}"));
        }

        Assert.True(store.Index.ChainLength(key) <= 2, $"chain length {store.Index.ChainLength(key)}");
        Assert.Equal("{\"Name\":\"w999\"}", Encoding.UTF8.GetString(store.Get("User", "hot")!.Value.Json.Span));

        [MethodImpl(MethodImplOptions.NoInlining)] // no local of this frame may keep a session reachable
        void LeakSessions(List<DocumentSession> reachable)
        {
            for (int i = 0; i < LeakedSessions; i++)
            {
                DocumentSession session = store.OpenSession();
                _ = session.LoadAsync<User>("hot").AsTask().GetAwaiter().GetResult();
                if (i < KeptReachable)
                {
                    reachable.Add(session);
                }
            }
        }
    }

    [Fact]
    public async Task A_session_kept_alive_past_the_maximum_snapshot_age_stops_pinning_versions_and_its_reads_throw()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.MaxSnapshotAge = TimeSpan.FromMilliseconds(200);
        var clock = new ManualTimeProvider(DateTimeOffset.UnixEpoch);
        options.SnapshotClock = clock; // the snapshots' age moves only when the test says so, however slow the host
        await using var store = DocumentStore.Open(dir.Path, options);
        await store.PutAsync("User", "hot", "{\"Name\":\"v0\"}"u8.ToArray());
        await store.PutAsync("User", "other", "{\"Name\":\"o\"}"u8.ToArray());

        var forgotten = new List<DocumentSession>();
        for (int i = 0; i < 1000; i++)
        {
            DocumentSession session = store.OpenSession();
            Assert.Equal("v0", (await session.LoadAsync<User>("hot"))!.Name);
            forgotten.Add(session);
        }

        var key = new DocumentKey("User", "hot");
        for (int i = 1; i <= 50; i++)
        {
            await store.PutAsync("User", "hot", Encoding.UTF8.GetBytes($"{{\"Name\":\"v{i}\"}}"));
        }

        Assert.True(store.Index.ChainLength(key) > 50, "young snapshots keep their versions");
        clock.Advance(TimeSpan.FromMilliseconds(400));
        for (int i = 51; i <= 100; i++)
        {
            await store.PutAsync("User", "hot", Encoding.UTF8.GetBytes($"{{\"Name\":\"v{i}\"}}"));
        }

        Assert.True(store.Index.ChainLength(key) <= 2,
            $"chain length {store.Index.ChainLength(key)} after the snapshots expired");

        // The stale sessions' next reads fail loudly instead of answering from versions that are gone.
        DocumentSession stale = forgotten[^1];
        Assert.Equal("v0", (await stale.LoadAsync<User>("hot"))!.Name); // the identity map answers without the index
        var expired = await Assert.ThrowsAsync<SnapshotExpiredException>(() => stale.LoadAsync<User>("other").AsTask());
        Assert.IsAssignableFrom<FolioException>(expired);
        Assert.Contains("MaxSnapshotAge", expired.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<SnapshotExpiredException>(async () =>
        {
            await foreach (User _ in forgotten[0].QueryAsync<User>())
            {
            }
        });
        await Assert.ThrowsAsync<SnapshotExpiredException>(() => forgotten[1].CountAsync<User>().AsTask());

        // A stale session can still save what it tracks (its writes are checked against the committed state).
        User mine = (await forgotten[2].LoadAsync<User>("hot"))!;
        mine.Name = "from a stale session";
        // it loaded v0, long gone
        await Assert.ThrowsAsync<ConcurrencyException>(() => forgotten[2].SaveChangesAsync());

        foreach (DocumentSession session in forgotten)
        {
            session.Dispose();
        }

        Assert.Equal(0, store.Index.OpenSnapshots);
        await using var fresh = store.OpenSession();
        Assert.Equal("v100", (await fresh.LoadAsync<User>("hot"))!.Name);
    }

    [Fact]
    public async Task Reads_racing_the_expiry_of_their_snapshot_either_answer_correctly_or_throw()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = DurabilityMode.Buffered;
        options.MaxSnapshotAge = TimeSpan.FromMilliseconds(1);
        await using var store = DocumentStore.Open(dir.Path, options);
        string[] ids = ["a", "b", "c", "d"];
        foreach (string id in ids)
        {
            await store.PutAsync("User", id, "{\"Name\":\"0\"}"u8.ToArray());
        }

        // Run for at least a second and until both outcomes were seen (at most 20 s). A stopwatch rather than a
        // timer: four busy loops on two cores can starve the pool thread a timer needs.
        var clock = System.Diagnostics.Stopwatch.StartNew();
        long expired = 0;
        long answered = 0;
        bool Done() => clock.Elapsed > TimeSpan.FromSeconds(20)
            || (clock.Elapsed > TimeSpan.FromSeconds(1)
                && Interlocked.Read(ref answered) > 0
                && Interlocked.Read(ref expired) > 0);
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !Done(); n++)
            {
                await store.PutAsync("User", ids[n % ids.Length], Encoding.UTF8.GetBytes($"{{\"Name\":\"{w}-{n}\"}}"));
            }
        })).ToList();

        string? wrong = null;
        var readers = Enumerable.Range(0, 2).Select(_ => Task.Run(async () =>
        {
            while (!Done())
            {
                await using var session = store.OpenSession();
                try
                {
                    foreach (string id in ids)
                    {
                        User? user = await session.LoadAsync<User>(id);
                        if (user is null || session.GetVersion(user) > session.SnapshotSequence)
                        {
                            wrong ??= $"{id}: {(user is null ? "null" : $"version {session.GetVersion(user)}")} at " +
                                $"snapshot {session.SnapshotSequence}";
                        }

                        Interlocked.Increment(ref answered);
                        Thread.SpinWait(2000); // let the snapshot age while the writers prune
                    }
                }
                catch (SnapshotExpiredException)
                {
                    Interlocked.Increment(ref expired);
                }
            }
        })).ToList();

        await Task.WhenAll(writers.Concat(readers));
        Assert.Null(wrong);
        Assert.True(answered > 0 && expired > 0, $"answered {answered}, expired {expired}");
    }

    [Fact]
    public async Task A_session_held_open_under_overwrites_expires_past_its_retained_bytes_and_short_ones_never()
    {
        // Before: each write walked every version the held snapshot kept (writes slowed twentyfold within a minute),
        // and with that walk skipped memory grew by gigabytes until MaxSnapshotAge (docs/measurements.md).
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = DurabilityMode.Buffered;
        options.MaxSnapshotRetainedBytes = DocumentStoreOptions.MinSnapshotRetainedBytes;
        await using var store = DocumentStore.Open(dir.Path, options);
        string pad = new('p', 1000);
        async Task WriteRoundAsync(int round)
        {
            var batch = new CommitBatch();
            for (int i = 0; i < 100; i++)
            {
                batch.Put("User", $"u/{i}", Encoding.UTF8.GetBytes($"{{\"Name\":\"r{round}\",\"Pad\":\"{pad}\"}}"));
            }

            await store.WriteAsync(batch);
        }

        await WriteRoundAsync(0);
        DocumentSession held = store.OpenSession();
        Assert.Equal("r0", (await held.LoadAsync<User>("u/0"))!.Name);
        long heldAt = held.SnapshotSequence!.Value;
        var key = new DocumentKey("User", "u/5");

        // About 110 KB of versions a round: the held snapshot keeps them all for eight rounds.
        for (int round = 1; round <= 8; round++)
        {
            await WriteRoundAsync(round);
        }

        Assert.True(store.Index.ChainLength(key) >= 9, $"chain length {store.Index.ChainLength(key)}");
        Assert.Equal("r0", (await held.LoadAsync<User>("u/1"))!.Name); // still its snapshot

        // Past 1 MiB the commit that crossed it expires the held snapshot; short sessions opened between the rounds
        // are newer than it and are never expired.
        for (int round = 9; round <= 30; round++)
        {
            await WriteRoundAsync(round);
            await using DocumentSession brief = store.OpenSession();
            Assert.Equal($"r{round}", (await brief.LoadAsync<User>("u/7"))!.Name);
        }

        var expired = await Assert.ThrowsAsync<SnapshotExpiredException>(() => held.LoadAsync<User>("u/2").AsTask());
        Assert.Contains("MaxSnapshotRetainedBytes", expired.Message, StringComparison.Ordinal);
        Assert.Equal(heldAt, expired.SnapshotSequence);

        // What it kept is pruned by the writes that follow.
        await WriteRoundAsync(31);
        Assert.True(store.Index.ChainLength(key) <= 2, $"chain length {store.Index.ChainLength(key)}");
        held.Dispose();
        await using DocumentSession fresh = store.OpenSession();
        Assert.Equal("r31", (await fresh.LoadAsync<User>("u/2"))!.Name);
    }

    [Fact]
    public async Task A_session_held_open_while_new_documents_are_written_expires_past_its_retained_bytes()
    {
        // New ids cannot leave the heads while a snapshot older than them is open: before, a held session under
        // inserts kept every one in memory until MaxSnapshotAge (5 GB of heap in 40 s, docs/measurements.md).
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = DurabilityMode.Buffered;
        options.MaxSnapshotRetainedBytes = DocumentStoreOptions.MinSnapshotRetainedBytes;
        await using var store = DocumentStore.Open(dir.Path, options);
        await store.PutAsync("User", "first", "{\"Name\":\"first\"}"u8.ToArray());
        DocumentSession held = store.OpenSession();
        Assert.Equal("first", (await held.LoadAsync<User>("first"))!.Name);
        byte[] document = Encoding.UTF8.GetBytes($"{{\"Name\":\"new\",\"Pad\":\"{new string('p', 1000)}\"}}");
        for (int round = 0; round < 20; round++)
        {
            var batch = new CommitBatch();
            for (int i = 0; i < 100; i++)
            {
                batch.Put("User", $"new/{round}/{i}", document);
            }

            await store.WriteAsync(batch);
            if (round == 5)
            {
                Assert.Null(await held.LoadAsync<User>("new/0/0")); // still its snapshot: none of them exists
            }
        }

        var expired = await Assert.ThrowsAsync<SnapshotExpiredException>(() => held.LoadAsync<User>("x").AsTask());
        Assert.Contains("MaxSnapshotRetainedBytes", expired.Message, StringComparison.Ordinal);
        held.Dispose();
        Assert.Equal(0, store.Index.OpenSnapshots);
    }

    [Fact]
    public void MaxSnapshotRetainedBytes_is_at_least_one_mebibyte()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.MaxSnapshotRetainedBytes = DocumentStoreOptions.MinSnapshotRetainedBytes - 1;
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.MaxSnapshotRetainedBytes), error.ParamName);
        Assert.Equal(0, new DocumentStoreOptions().MaxSnapshotRetainedBytes); // sized to the memory available
        Assert.Equal(256L << 20,
            new DocumentStoreOptions { FixedAvailableMemory = 64L << 30 }.EffectiveMaxSnapshotRetainedBytes);
        Assert.Equal(48L << 20,
            new DocumentStoreOptions { FixedAvailableMemory = 384L << 20 }.EffectiveMaxSnapshotRetainedBytes);
    }

    [Fact]
    public void MaxSnapshotAge_must_be_positive_or_infinite()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.MaxSnapshotAge = TimeSpan.Zero;
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.MaxSnapshotAge), error.ParamName);
        options.MaxSnapshotAge = Timeout.InfiniteTimeSpan;
        using DocumentStore store = DocumentStore.Open(dir.Path, options);
        Assert.Equal(TimeSpan.FromMinutes(10), new DocumentStoreOptions().MaxSnapshotAge);
    }
}
