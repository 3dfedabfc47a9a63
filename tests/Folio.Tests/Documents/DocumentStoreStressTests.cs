using System.Collections.Concurrent;
using System.Text;
using Folio.Tests.Infrastructure;
using Folio.Tests.Pages;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// Writers (raw puts and load-modify-save sessions with retries on conflict) and readers (sessions) on the same few
/// ids for a few seconds: readers only ever see committed versions, with the bytes committed at that version, in
/// increasing order per id across their successive snapshots.
/// </summary>
public sealed class DocumentStoreStressTests
{
    [Theory]
    [InlineData(DurabilityMode.Buffered, 1)]
    [InlineData(DurabilityMode.Durable, 2)] // the pipeline: conflicts are found against groups still in their fsync
    public async Task Readers_see_only_committed_versions_in_increasing_order_while_writers_conflict_and_retry(
        DurabilityMode durability, int maxGroupsInFlight)
    {
        double seconds = StressDuration.Seconds(3);
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { Durability = durability, MaxGroupsInFlight = maxGroupsInFlight });
        string[] ids = Enumerable.Range(0, 8).Select(i => $"k/{i}").ToArray();
        var committed = new ConcurrentDictionary<(string Id, long Version), string>();
        var observed = new ConcurrentQueue<(string Id, long Version, string Name)>();
        var failures = new ConcurrentQueue<string>();
        long conflicts = 0;

        // Run for the set time, and on a starved machine a while longer until the writers have conflicted at least
        // once.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(
            TimeSpan.FromSeconds(seconds), () => Interlocked.Read(ref conflicts) == 0, TimeSpan.FromSeconds(30));

        // Every id exists before the readers start, so a reader that gets null has read a wrong answer.
        foreach (string id in ids)
        {
            long version = await store.PutAsync("User", id, Encoding.UTF8.GetBytes("{\"Name\":\"initial\"}"));
            committed[(id, version)] = "initial";
        }

        var rawWriters = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                string id = ids[(n * 3 + w) % ids.Length];
                string name = $"raw{w}-{n}";
                long version = await store.PutAsync("User", id, Encoding.UTF8.GetBytes($"{{\"Name\":\"{name}\"}}"));
                committed[(id, version)] = name;
            }
        })).ToList();

        var sessionWriters = Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                await using var session = store.OpenSession();
                string id = ids[(n + w) % ids.Length];
                User user = await session.LoadAsync<User>(id) ?? new User();
                string name = $"s{w}-{n}";
                user.Name = name;
                session.Store(user, id);
                if (n % 8 == 0)
                {
                    await Task.Delay(1); // widen the load-to-save window now and then: raw writers commit meanwhile
                }

                try
                {
                    await session.SaveChangesAsync();
                    committed[(id, session.GetVersion(user))] = name;
                }
                catch (ConcurrencyException)
                {
                    Interlocked.Increment(ref conflicts);
                }
            }
        })).ToList();

        var readers = Enumerable.Range(0, 3).Select(r => Task.Run(async () =>
        {
            var last = new Dictionary<string, long>();
            while (!stop.IsCancellationRequested)
            {
                await using var session = store.OpenSession();
                foreach (string id in ids)
                {
                    User? user = await session.LoadAsync<User>(id);
                    if (user is null)
                    {
                        failures.Enqueue(
                            $"{id} read as absent at snapshot {session.SnapshotSequence}, but it exists at every " +
                            $"snapshot");
                        continue;
                    }

                    long version = session.GetVersion(user);
                    if (version > session.SnapshotSequence || version < last.GetValueOrDefault(id))
                    {
                        failures.Enqueue(
                            $"{id}: version {version} after {last.GetValueOrDefault(id)} (snapshot " +
                            $"{session.SnapshotSequence})");
                    }

                    last[id] = version;
                    observed.Enqueue((id, version, user.Name));
                }
            }
        })).ToList();

        await Task.WhenAll(rawWriters.Concat(sessionWriters).Concat(readers));
        Assert.Empty(failures);
        foreach (var (id, version, name) in observed)
        {
            Assert.True(committed.TryGetValue((id, version), out string? expected),
                $"{id}@{version} was seen but never acknowledged");
            Assert.Equal(expected, name);
        }

        Assert.True(observed.Count > 100, $"readers made {observed.Count} observations");
        Assert.True(Interlocked.Read(ref conflicts) > 0,
            "load-modify-save writers conflicted with the raw writers at least once");
    }

    /// <summary>
    /// Checkpoints back to back while two writers overwrite stable documents and toggle others, and a dropper
    /// throws the current trees' pages out of memory: every checkpoint moves reads to its trees and evicts what it
    /// covers, older trees' chunks are freed and reused under readers still walking them, so point reads retry and
    /// range reads pin. Every value a reader sees is checked: <c>Get</c> never misses a stable document nor goes back
    /// a version; a session's prefix query lists each stable id once, in order, at a version no newer than its
    /// snapshot, agreeing with its point loads, and the same query later in the session (after more checkpoints)
    /// returns the same versions; every version seen was acknowledged with the bytes seen. With
    /// <paramref name="writersRead"/>, the store is told it has seen damage, so every write reads the version it
    /// replaces (or a new id's leaf) on the writer's thread before it submits, racing the checkpoints that replace the
    /// trees it reads (<c>VersionedIndex.ReadWrittenOver</c>).
    /// </summary>
    [Theory]
    [InlineData(false, false)]
    [InlineData(true, false)]
    [InlineData(false, true)] // checkpoints in slices: each slice frees what the one before it replaced
    public async Task Readers_check_every_value_while_checkpoints_evict_and_old_trees_chunks_are_reused(
        bool writersRead, bool sliced)
    {
        double seconds = StressDuration.Seconds(3);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.AddedIdsTrimMinimum = 4; // the toggled ids' list is rebuilt at almost every checkpoint
        options.CacheSize = DocumentStoreOptions.MinCacheSize; // 64 frames: every checkpoint's new pages evict
        options.PagesPerChunk = 4; // checkpoints of several chunks, freed and reused one by one
        SlicedPasses? slices = sliced ? SlicedPasses.Of(options) : null;

        await using var store = DocumentStore.Open(dir.Path, options);
        if (writersRead)
        {
            store.Index.NoteDamage();
        }

        string[] stable = Enumerable.Range(0, 48).Select(i => $"k/{i:D3}").ToArray();
        string[] toggled = Enumerable.Range(0, 16).Select(i => $"t/{i:D3}").ToArray();
        var committed = new ConcurrentDictionary<(string Id, long Version), int>();
        var observed = new ConcurrentQueue<(string Id, long Version, int N, string Key)>();
        var failures = new ConcurrentQueue<string>();
        foreach (string id in stable)
        {
            committed[(id, await store.PutAsync("Item", id, ItemJson(id, 0)))] = 0;
        }

        await store.CheckpointAsync();
        long checkpoints = 0;
        long dropped = 0;

        // Run for the set time, and on a starved machine a while longer until every count asserted below is reached.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Interlocked.Read(ref checkpoints) <= 5 || observed.Count <= 100
                || store.Pages.Cache.Pool.Evictions == 0 || (slices is not null && slices.Count <= 5),
            TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            for (int n = 1; !stop.IsCancellationRequested; n++)
            {
                string id = stable[((n * 7) + w) % stable.Length];
                int value = (n * 2) + w;
                committed[(id, await store.PutAsync("Item", id, ItemJson(id, value)))] = value;
                string other = toggled[(n + (w * 5)) % toggled.Length];
                if (n % 3 == 0)
                {
                    await store.DeleteAsync("Item", other);
                }
                else
                {
                    committed[(other, await store.PutAsync("Item", other, ItemJson(other, value)))] = value;
                }
            }
        })).ToList();

        var checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync();
                Interlocked.Increment(ref checkpoints);
                if (Interlocked.Read(ref checkpoints) % 2 == 0)
                {
                    Interlocked.Add(ref dropped, PageStoreModel.DropCachedPages(store.Pages.Current));
                }
            }
        });

        var getReader = Task.Factory.StartNew(() =>
        {
            var last = new Dictionary<string, long>();
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                string id = stable[n % stable.Length];
                if (store.Get("Item", id) is not { } document)
                {
                    failures.Enqueue($"Get missed {id}");
                    continue;
                }

                Item item = System.Text.Json.JsonSerializer.Deserialize<Item>(document.Json.Span)!;
                if (document.Version < last.GetValueOrDefault(id) || item.Key != id)
                {
                    failures.Enqueue($"Get {id}: version {document.Version} after {last.GetValueOrDefault(id)}, " +
                        $"key {item.Key}");
                }

                last[id] = document.Version;
                if (n % 8 == 0)
                {
                    observed.Enqueue((id, document.Version, item.N, item.Key));
                }
            }
        }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default); // a thread of its own

        var sessionReaders = Enumerable.Range(0, 2).Select(r => Task.Run(async () =>
        {
            for (int round = 0; !stop.IsCancellationRequested; round++)
            {
                await using DocumentSession session = store.OpenSession();
                Dictionary<string, long> first = await CheckQueryAsync(session, failures, observed);
                if (round % 4 == r)
                {
                    await Task.Delay(5); // a few checkpoints run meanwhile
                    Dictionary<string, long> again = await CheckQueryAsync(session, failures, observed);
                    if (!first.OrderBy(p => p.Key).SequenceEqual(again.OrderBy(p => p.Key)))
                    {
                        string Describe(Dictionary<string, long> a, Dictionary<string, long> b) => string.Join(", ",
                            a.Where(p => !b.TryGetValue(p.Key, out long v) || v != p.Value)
                                .Select(p => $"{p.Key}@{p.Value}"));
                        failures.Enqueue($"the same query at snapshot {session.SnapshotSequence} changed: first only " +
                            $"[{Describe(first, again)}], again only [{Describe(again, first)}]");
                    }
                }

            }
        })).ToList();

        await Task.WhenAll(writers.Concat(sessionReaders).Append(getReader).Append(checkpointer));
        Assert.True(failures.IsEmpty, string.Join("\n", failures.Take(10)));
        foreach ((string id, long version, int n, string key) in observed)
        {
            Assert.True(committed.TryGetValue((id, version), out int expected), $"{id}@{version} never acknowledged");
            Assert.Equal(expected, n);
            Assert.Equal(id, key);
        }

        Assert.True(Interlocked.Read(ref checkpoints) > 5, $"{checkpoints} checkpoints ran");
        Assert.True(observed.Count > 100, $"readers made {observed.Count} observations");
        Assert.True(store.Pages.Cache.Pool.Evictions > 0, "pages were evicted from the buffer pool");
        Assert.True(slices is null || slices.Count > 5, $"{slices?.Count} passes in slices");

        static async Task<Dictionary<string, long>> CheckQueryAsync(DocumentSession session,
            ConcurrentQueue<string> failures, ConcurrentQueue<(string, long, int, string)> observed)
        {
            var versions = new Dictionary<string, long>();
            string? previous = null;
            var items = new List<Item>();
            await foreach (Item item in session.QueryByPrefixAsync<Item>(""))
            {
                items.Add(item);
            }

            // The count (the trees' counts corrected by the ids that changed) agrees with the walk at the snapshot.
            int counted = await session.CountAsync<Item>();
            if (counted != items.Count)
            {
                failures.Enqueue($"count {counted}, query {items.Count} at snapshot {session.SnapshotSequence}");
            }

            foreach (Item item in items)
            {
                // A load at the same snapshot gives the version (query results are not tracked) and must agree.
                Item? loaded = await session.LoadAsync<Item>(item.Key);
                long version = loaded is null ? -1 : session.GetVersion(loaded);
                if (loaded is null || loaded.N != item.N)
                {
                    failures.Enqueue($"{item.Key}: the query read {item.N}, a load {loaded?.N} at snapshot " +
                        $"{session.SnapshotSequence}");
                }

                if (previous is not null && string.CompareOrdinal(previous, item.Key) >= 0)
                {
                    failures.Enqueue($"query order: {item.Key} after {previous}");
                }

                if (version > session.SnapshotSequence)
                {
                    failures.Enqueue($"{item.Key}@{version} above snapshot {session.SnapshotSequence}");
                }

                previous = item.Key;
                versions[item.Key] = version;
                observed.Enqueue((item.Key, version, item.N, item.Key));
            }

            int stableSeen = versions.Keys.Count(k => k.StartsWith("k/", StringComparison.Ordinal));
            if (stableSeen != 48)
            {
                failures.Enqueue($"query at snapshot {session.SnapshotSequence} listed {stableSeen} stable ids");
            }

            return versions;
        }
    }

    private static byte[] ItemJson(string id, int n) => Encoding.UTF8.GetBytes($"{{\"Key\":\"{id}\",\"N\":{n}}}");

    public sealed class Item
    {
        public string Key { get; set; } = "";

        public int N { get; set; }
    }

    /// <summary>
    /// <see cref="DocumentStore.Get"/> reads the latest version without registering a snapshot: two writers overwrite
    /// one document as fast as they can while a reader loops <c>Get</c>. Every read must find the document (it always
    /// exists), at a version no older than the one the reader saw before. Pruning by the two writes that follow a
    /// read's visible sequence once cut the chain under the reader (about 1 null per 100,000 gets).
    /// </summary>
    [Theory]
    [InlineData(DurabilityMode.Buffered, 1)]
    [InlineData(DurabilityMode.Durable, 1)]
    [InlineData(DurabilityMode.Durable, 2)]
    public async Task Get_always_finds_a_document_that_other_threads_keep_overwriting(DurabilityMode durability,
        int maxGroupsInFlight)
    {
        double seconds = StressDuration.Seconds(3);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = durability;
        options.MaxGroupsInFlight = maxGroupsInFlight;
        await using var store = DocumentStore.Open(dir.Path, options);
        await store.PutAsync("C", "k", "{\"n\":0}"u8.ToArray());
        long gets = 0;
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Volatile.Read(ref gets) <= 1000, TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            byte[] json = Encoding.UTF8.GetBytes($"{{\"writer\":{w}}}");
            while (!stop.IsCancellationRequested)
            {
                await store.PutAsync("C", "k", json);
            }
        })).ToList();

        long nulls = 0;
        string? regression = null;
        var reader = Task.Factory.StartNew(() =>
        {
            long last = 0;
            while (!stop.IsCancellationRequested)
            {
                StoredDocument? document = store.Get("C", "k");
                Volatile.Write(ref gets, gets + 1);
                if (document is not { } found)
                {
                    nulls++;
                    continue;
                }

                if (found.Version < last)
                {
                    regression ??= $"version {found.Version} after {last}";
                }

                last = found.Version;
            }
        }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default); // a thread of its own

        await Task.WhenAll(writers.Append(reader));
        Assert.True(nulls == 0, $"{nulls} of {gets} gets returned null for a document that exists");
        Assert.Null(regression);
        Assert.True(gets > 1000, $"the reader made {gets} gets");
    }
}
