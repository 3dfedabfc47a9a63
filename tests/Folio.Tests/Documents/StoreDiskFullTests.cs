using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A disk that fills up under a running store: commits fail with <see cref="StoreFullException"/>, alone, the store
/// is not faulted, every acknowledged document stays readable, commits succeed again once space is freed, and a
/// reopen finds exactly what was acknowledged.
/// </summary>
public sealed class StoreDiskFullTests
{
    [Fact]
    public async Task A_full_disk_fails_commits_alone_and_the_store_takes_them_again_once_space_is_freed()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            // The journal's segments (their holes are filled as they are written) and next segment, and the data
            // file: none can take new blocks while the disk is full.
            Matches = static path => Path.GetFileName(path) is "next-segment.tmp" or DocumentStore.DataFileName
                || path.EndsWith(".journal", StringComparison.Ordinal),
        };
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.FileSystem = files;
        options.CheckpointThreshold = 128 * 1024;
        var acknowledged = new Dictionary<string, long>();
        var refused = new HashSet<string>();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 50; i++)
            {
                acknowledged[$"before-{i}"] = await store.PutAsync("Doc", $"before-{i}", Json(i));
            }

            files.NoSpace = true;
            StoreFullException full =
                await PutUntilRefusedAsync<StoreFullException>(store, "filling", acknowledged, refused);
            Assert.IsType<IOException>(full.InnerException);
            Assert.Contains("disk is full", full.Message, StringComparison.Ordinal);
            Assert.False(store.IsFaulted);
            Assert.False(store.GetDiagnostics().IsFaulted);
            Assert.True(store.GetDiagnostics().IsDiskFull);

            // Concurrent commits and a session's save, none of which fits in what is left of the active segment, fail
            // the same way, and none faults the store.
            Task<long>[] concurrent = Enumerable.Range(0, 16)
                .Select(i => store.PutAsync("Doc", $"concurrent-{i}", Json(i)).AsTask()).ToArray();
            foreach (Task<long> put in concurrent)
            {
                await Assert.ThrowsAsync<StoreFullException>(() => put);
            }

            using DocumentSession session = store.OpenSession();
            session.Store(new Note { Text = new string('z', 1000) }, "session-doc");
            await Assert.ThrowsAsync<StoreFullException>(() => session.SaveChangesAsync());
            refused.UnionWith(Enumerable.Range(0, 16).Select(i => $"concurrent-{i}"));
            Assert.False(store.IsFaulted);
            AssertHolds(store, acknowledged, refused);
            Assert.Null(store.Get(nameof(Note), "session-doc"));

            // Space is freed: within the journal's retry interval commits are accepted again, and the session, which
            // still tracks its change, saves it.
            files.NoSpace = false;
            long version = await PutOnceAcceptedAgainAsync<StoreFullException>(store, "after-0");
            acknowledged["after-0"] = version;
            await session.SaveChangesAsync();
            Assert.NotNull(store.Get(nameof(Note), "session-doc"));
            for (int i = 1; i < 300; i++)
            {
                acknowledged[$"after-{i}"] = await store.PutAsync("Doc", $"after-{i}", Json(i));
            }

            Assert.False(store.GetDiagnostics().IsDiskFull);
            await store.CheckpointAsync();
            AssertHolds(store, acknowledged, refused);
        }

        await using (var reopened = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()))
        {
            AssertHolds(reopened, acknowledged, refused);
            Assert.Equal(acknowledged.Count, reopened.Scan("Doc").Count());
        }
    }

    /// <summary>
    /// The process runs out of file descriptors (its own sockets leaked, say) while the store runs: the commits that
    /// need the journal's next segment fail alone with <see cref="StoreUnavailableException"/>, the diagnostics say
    /// why, the store is not faulted, and once files can be created again commits succeed without a reopen.
    /// </summary>
    [Fact]
    public async Task A_next_segment_that_cannot_be_created_fails_commits_alone_until_it_can_without_a_reopen()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == "next-segment.tmp" };
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.FileSystem = files;
        var acknowledged = new Dictionary<string, long>();
        var refused = new HashSet<string>();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            files.CreateFailure = new IOException("Too many open files", 24);
            StoreUnavailableException unavailable =
                await PutUntilRefusedAsync<StoreUnavailableException>(store, "before", acknowledged, refused);
            Assert.IsNotType<StoreFullException>(unavailable);
            Assert.Contains("Too many open files", unavailable.Message, StringComparison.Ordinal);
            StoreDiagnostics diagnostics = store.GetDiagnostics();
            Assert.False(diagnostics.IsFaulted);
            Assert.False(diagnostics.IsDiskFull);
            Assert.Same(files.CreateFailure, diagnostics.SegmentUnavailable);

            using DocumentSession session = store.OpenSession();
            session.Store(new Note { Text = new string('z', 1000) }, "session-doc");
            await Assert.ThrowsAsync<StoreUnavailableException>(() => session.SaveChangesAsync());
            AssertHolds(store, acknowledged, refused);

            files.CreateFailure = null;
            acknowledged["after-0"] = await PutOnceAcceptedAgainAsync<StoreUnavailableException>(store, "after-0");

            await session.SaveChangesAsync();
            for (int i = 1; i < 100; i++)
            {
                acknowledged[$"after-{i}"] = await store.PutAsync("Doc", $"after-{i}", Json(i));
            }

            Assert.Null(store.GetDiagnostics().SegmentUnavailable);
            Assert.False(store.IsFaulted);
            AssertHolds(store, acknowledged, refused);
        }

        await using (var reopened = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments()))
        {
            AssertHolds(reopened, acknowledged, refused);
            Assert.NotNull(reopened.Get(nameof(Note), "session-doc"));
        }
    }

    /// <summary>Puts documents "<paramref name="prefix"/>-0", "-1", ... (each acknowledged one recorded) until one is
    /// refused with <typeparamref name="TRefusal"/> (within 2,000; any other exception fails the test), records it as
    /// refused and returns the refusal.</summary>
    private static async Task<TRefusal> PutUntilRefusedAsync<TRefusal>(DocumentStore store, string prefix,
        Dictionary<string, long> acknowledged, HashSet<string> refused)
        where TRefusal : Exception
    {
        for (int i = 0; i < 2000; i++)
        {
            string id = $"{prefix}-{i}";
            try
            {
                acknowledged[id] = await store.PutAsync("Doc", id, Json(i));
            }
            catch (TRefusal e)
            {
                refused.Add(id);
                return e;
            }
        }

        throw new Xunit.Sdk.XunitException($"no put was refused with {typeof(TRefusal).Name} in 2,000");
    }

    /// <summary>Puts <paramref name="id"/> until the store takes it, retrying while it is refused with
    /// <typeparamref name="TRefusal"/> (the journal tries again at most once a second), up to
    /// <see cref="TestDeadline.Hang"/>.</summary>
    private static async Task<long> PutOnceAcceptedAgainAsync<TRefusal>(DocumentStore store, string id)
        where TRefusal : Exception
    {
        DateTime deadline = DateTime.UtcNow + TestDeadline.Hang;
        while (true)
        {
            try
            {
                return await store.PutAsync("Doc", id, Json(0));
            }
            catch (TRefusal) when (DateTime.UtcNow < deadline)
            {
                await Task.Delay(50);
            }
        }
    }

    private static void AssertHolds(DocumentStore store, Dictionary<string, long> acknowledged,
        HashSet<string> refused)
    {
        foreach ((string id, long version) in acknowledged)
        {
            StoredDocument? document = store.Get("Doc", id);
            Assert.True(document is not null, $"acknowledged '{id}' is missing");
            Assert.Equal(version, document.Value.Version);
        }

        foreach (string id in refused)
        {
            Assert.Null(store.Get("Doc", id));
        }
    }

    private static byte[] Json(int i) =>
        Encoding.UTF8.GetBytes($"{{\"n\":{i},\"pad\":\"{new string('x', 400)}\"}}");

    private sealed class Note
    {
        public string? Text { get; set; }
    }
}
