using System.Text;
using Folio.Documents;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// Checkpoints in slices against a model, through the public API: several collections of very different sizes (one
/// large enough to be cut, small ones a slice takes whole, some emptied, some new), random puts and deletes between
/// checkpoints, a failure injected between slices now and then, and closes without a checkpoint followed by opens.
/// After every checkpoint the versions it covers leave memory, so reads, scans and counts come from its trees; each
/// is compared with the model, and so is every reopened store, whose journal replay meets trees ahead of their
/// checkpoint for some ids, and the closed store's files as the tool's export and info read them. A second history
/// adds what runs beside checkpoints in a service: a writer during the slices, snapshots read across passes,
/// compaction, and backup chains restored to points in time. CI runs a few seeds of each; <c>FOLIO_SLICE_SEEDS</c>
/// runs more.
/// </summary>
public sealed class CheckpointSliceModelTests(ITestOutputHelper output)
{
    private static readonly string[] s_collections = ["alpha", "big", "empty-later", "zeta"];

    /// <summary>Seeds 1 to 4 of the first history (CI), or as many as <c>FOLIO_SLICE_SEEDS</c> says.</summary>
    public static TheoryData<int> HistorySeeds() => Seeds(first: 1, count: 4);

    /// <summary>Seeds 11 to 13 of the history with company (CI), or as many as <c>FOLIO_SLICE_SEEDS</c> says.</summary>
    public static TheoryData<int> CompanySeeds() => Seeds(first: 11, count: 3);

    private static TheoryData<int> Seeds(int first, int count)
    {
        var seeds = new TheoryData<int>();
        int wanted = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_SLICE_SEEDS"), out int n) && n > 0
            ? n
            : count;
        for (int i = 0; i < wanted; i++)
        {
            seeds.Add(i < count ? first + i : 1000 * first + i); // CI's seeds first, then others
        }

        return seeds;
    }

    [Theory]
    [MemberData(nameof(HistorySeeds))]
    public async Task Slices_over_collections_of_every_size_keep_what_the_model_keeps_through_failures_and_reopens(
        int seed)
    {
        var random = new Random(seed);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.KeepingJournal(TestStoreOptions.ManualCheckpoints());
        options.CacheSize = 2 << 20;
        options.CompactionFillRate = 0;
        SlicedPasses slices = SlicedPasses.Of(options); // slices of a quarter of the live pages (the default share)
        var model = new Dictionary<string, SortedDictionary<string, string>>(StringComparer.Ordinal);
        foreach (string collection in s_collections)
        {
            model[collection] = new SortedDictionary<string, string>(StringComparer.Ordinal);
        }

        DocumentStore store = DocumentStore.Open(dir.Path, options);
        try
        {
            for (int round = 0; round < 24; round++)
            {
                await ChangeAsync(store, model, random, round);
                slices.FailBefore = random.Next(4) == 0 ? 1 + random.Next(3) : -1;
                try
                {
                    await store.CheckpointAsync();
                }
                catch (IOException) when (slices.FailBefore > 0)
                {
                    // The slices before the failed one are durable; the next checkpoint writes the rest whole.
                }

                slices.FailBefore = -1;
                await store.EvictCheckpointedAsync();
                AssertAgrees(store, model, $"round {round}");
                if (random.Next(3) == 0)
                {
                    await store.DisposeAsync(); // no checkpoint at the close: the open replays the journal
                    await AssertFilesAgreeAsync(dir.Path, model, $"round {round}, closed");
                    store = DocumentStore.Open(dir.Path, options);
                    AssertAgrees(store, model, $"round {round}, reopened");
                }
            }

            Assert.True(slices.Count >= 5, $"{slices.Count} passes in slices");
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }
        finally
        {
            await store.DisposeAsync();
        }
    }

    /// <summary>
    /// The same history with what runs beside a checkpoint in a service: a writer committing to the sliced collection
    /// and a fifth one while the slices are written, snapshots opened before a pass and read after it (every id, a
    /// range, the count), background compaction and <see cref="DocumentStore.CompactAsync"/>, and full and incremental
    /// backups, each chain restored to a point in time between its first restorable sequence and its last commit and
    /// compared with the model as it was then.
    /// </summary>
    [Theory]
    [MemberData(nameof(CompanySeeds))]
    public async Task Slices_keep_what_the_model_keeps_beside_writers_snapshots_compaction_and_backups(int seed)
    {
        var random = new Random(seed);
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        DocumentStoreOptions options = TestStoreOptions.KeepingJournal(TestStoreOptions.ManualCheckpoints());
        options.CacheSize = 2 << 20;
        options.CompactionFillRate = 0.9;
        options.CompactionBytesPerSecond = 1 << 20;
        SlicedPasses slices = SlicedPasses.Of(options); // slices of a quarter of the live pages (the default share)
        var model = new Dictionary<string, SortedDictionary<string, string>>(StringComparer.Ordinal);
        foreach (string collection in s_collections.Append(LiveCollection))
        {
            model[collection] = new SortedDictionary<string, string>(StringComparer.Ordinal);
        }

        var history = new Dictionary<long, Dictionary<string, SortedDictionary<string, string>>>();
        var held = new List<(IndexSnapshot Snapshot, Dictionary<string, SortedDictionary<string, string>> Model,
            int Until)>();
        var chains = new List<List<(string File, BackupResult Result)>>();
        int failed = 0, besides = 0, snapshotReads = 0, compactions = 0, reopens = 0;
        DocumentStore store = DocumentStore.Open(folder, options);
        try
        {
            for (int round = 0; round < 20; round++)
            {
                await ChangeAsync(store, model, random, round);
                history[store.LastCommittedSequence] = Copy(model);
                if (random.Next(3) == 0)
                {
                    held.Add((store.Index.OpenSnapshot(), Copy(model), round + 1 + random.Next(3)));
                }

                slices.FailBefore = random.Next(4) == 0 ? 1 + random.Next(3) : -1;
                Task<long> checkpoint = store.CheckpointAsync().AsTask();
                bool beside = random.Next(2) == 0;
                Task writer = beside
                    ? WriteBesideAsync(store, model, new Random(random.Next()), round, checkpoint)
                    : Task.CompletedTask;
                try
                {
                    await checkpoint;
                }
                catch (IOException) when (slices.FailBefore > 0)
                {
                    // The slices before the failed one are durable; the next checkpoint writes the rest whole.
                    failed++;
                }

                await writer;
                besides += beside ? 1 : 0;
                slices.FailBefore = -1;
                history[store.LastCommittedSequence] = Copy(model);
                if (random.Next(5) == 0)
                {
                    await store.CompactAsync();
                    compactions++;
                }

                await store.EvictCheckpointedAsync();
                AssertAgrees(store, model, $"round {round}");
                foreach ((IndexSnapshot snapshot, var then, int _) in held)
                {
                    AssertSnapshotAgrees(store, snapshot, then, random, $"round {round}, snapshot {snapshot.Sequence}");
                    snapshotReads++;
                }

                ReleaseHeld(held, round);
                if (random.Next(4) == 0)
                {
                    await BackUpAsync(store, chains, random, Path.Combine(dir.Path, $"backup-{round}"));
                }

                if (random.Next(4) == 0)
                {
                    ReleaseHeld(held, int.MaxValue);
                    await store.DisposeAsync(); // no checkpoint at the close: the open replays the journal
                    store = DocumentStore.Open(folder, options);
                    AssertAgrees(store, model, $"round {round}, reopened");
                    reopens++;
                }
            }

            Assert.True(slices.Count >= 4, $"{slices.Count} passes in slices");
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }
        finally
        {
            ReleaseHeld(held, int.MaxValue);
            await store.DisposeAsync();
        }

        int restores = 0;
        foreach (List<(string File, BackupResult Result)> chain in chains)
        {
            long first = chain[0].Result.CheckpointSequence;
            long last = chain[^1].Result.Sequence;
            long[] points = history.Keys.Where(s => s >= first && s <= last).Order().ToArray();
            Assert.NotEmpty(points); // every backup is taken at a sequence the history holds
            foreach (long to in new[] { points[random.Next(points.Length)], points[^1] }.Distinct())
            {
                string restored = Path.Combine(dir.Path, $"restored-{restores++}");
                await DocumentStore.RestoreAsync(chain.Select(b => b.File).ToList(), restored,
                    new RestoreOptions { ToSequence = to });
                await using DocumentStore opened = DocumentStore.Open(restored, TestStoreOptions.SmallSegments());
                AssertAgrees(opened, history[to], $"restored to {to} from {chain.Count} backups");
            }
        }

        output.WriteLine($"seed {seed}: {slices.Count} passes in slices, {failed} failed between slices, {besides} "
            + $"with a writer beside, {snapshotReads} snapshot reads, {compactions} compactions, {reopens} reopens, "
            + $"{chains.Count} backup chains of {chains.Sum(c => c.Count)} backups, {restores} restores");
    }

    private const string LiveCollection = "live";

    /// <summary>Commits to "big" and <see cref="LiveCollection"/> until <paramref name="checkpoint"/> ends (at least
    /// three batches), updating the model after each.</summary>
    private static async Task WriteBesideAsync(DocumentStore store,
        Dictionary<string, SortedDictionary<string, string>> model, Random random, int round, Task checkpoint)
    {
        for (int n = 0; n < 3 || !checkpoint.IsCompleted; n++)
        {
            string collection = random.Next(2) == 0 ? "big" : LiveCollection;
            string id = $"{collection[0]}{random.Next(collection == "big" ? 3000 : 200):D5}";
            if (random.Next(6) == 0)
            {
                await store.DeleteAsync(collection, id);
                model[collection].Remove(id);
            }
            else
            {
                string json = $"{{\"beside\":{round},\"n\":{n}}}";
                await store.PutAsync(collection, id, Encoding.UTF8.GetBytes(json));
                model[collection][id] = json;
            }
        }
    }

    /// <summary>A full backup, or an increment on the last chain (a full one when the journal after that chain was
    /// purged); the store is idle, so the backup's sequence is one the history holds.</summary>
    private static async Task BackUpAsync(DocumentStore store, List<List<(string File, BackupResult Result)>> chains,
        Random random, string file)
    {
        if (chains.Count == 0 || random.Next(2) == 0)
        {
            chains.Add([(file, await store.BackupAsync(file))]);
            return;
        }

        List<(string File, BackupResult Result)> chain = chains[^1];
        try
        {
            chain.Add((file, await store.BackupAsync(file, chain[^1].Result.Sequence + 1)));
        }
        catch (JournalPositionPurgedException)
        {
            // A checkpoint purged the journal after the chain's last backup: the increment is refused, leaves no
            // file, and the chain starts again from a full backup.
            Assert.False(File.Exists(file));
            chains.Add([(file, await store.BackupAsync(file))]);
        }
    }

    private static void ReleaseHeld(
        List<(IndexSnapshot Snapshot, Dictionary<string, SortedDictionary<string, string>> Model, int Until)> held,
        int round)
    {
        for (int i = held.Count - 1; i >= 0; i--)
        {
            if (held[i].Until <= round)
            {
                held[i].Snapshot.Dispose();
                held.RemoveAt(i);
            }
        }
    }

    private static Dictionary<string, SortedDictionary<string, string>> Copy(
        Dictionary<string, SortedDictionary<string, string>> model) =>
        model.ToDictionary(p => p.Key, p => new SortedDictionary<string, string>(p.Value, StringComparer.Ordinal),
            StringComparer.Ordinal);

    /// <summary>Reads at <paramref name="snapshot"/>: every id the model held then, the whole collection, a random
    /// range in both directions, and the count.</summary>
    private static void AssertSnapshotAgrees(DocumentStore store, IndexSnapshot snapshot,
        Dictionary<string, SortedDictionary<string, string>> then, Random random, string when)
    {
        foreach ((string collection, SortedDictionary<string, string> documents) in then)
        {
            var ranged = new Dictionary<string, string>(StringComparer.Ordinal);
            foreach ((string id, DocumentVersion version) in store.Index.Range(collection, null, null, false,
                snapshot.Sequence))
            {
                ranged.Add(id, Encoding.UTF8.GetString(version.Json.Span));
            }

            Assert.True(documents.Count == ranged.Count && documents.All(p => ranged.GetValueOrDefault(p.Key) ==
                p.Value), $"{when}, {collection}: the range holds {ranged.Count} documents, the model "
                + $"{documents.Count}; first difference: {FirstDifference(documents, ranged)}");
            foreach ((string id, string json) in documents)
            {
                DocumentVersion? version = store.Index.Get(new DocumentKey(collection, id), snapshot);
                Assert.True(version is { } found && Encoding.UTF8.GetString(found.Json.Span) == json,
                    $"{when}, {collection}/{id}: expected {json}");
            }

            string from = $"{collection[0]}{random.Next(3000):D5}";
            string to = $"{collection[0]}{random.Next(3000):D5}";
            (from, to) = string.CompareOrdinal(from, to) <= 0 ? (from, to) : (to, from);
            string[] expected = documents.Keys.Where(id => string.CompareOrdinal(id, from) >= 0
                && string.CompareOrdinal(id, to) < 0).ToArray();
            Assert.Equal(expected, store.Index.Range(collection, from, to, false, snapshot.Sequence)
                .Select(p => p.Id).ToArray());
            Assert.Equal(expected.Reverse(), store.Index.Range(collection, from, to, true, snapshot.Sequence)
                .Select(p => p.Id).ToArray());
            Assert.Equal(documents.Count, store.Index.Count(collection, snapshot.Sequence));
            snapshot.ThrowIfExpired();
        }
    }

    /// <summary>Puts and deletes in every collection: "big" overwrites a random share of up to 3,000 ids, the small
    /// ones up to 30 ids; "empty-later" is emptied from round 12 on, and "zeta" starts at round 6.</summary>
    private static async Task ChangeAsync(DocumentStore store,
        Dictionary<string, SortedDictionary<string, string>> model, Random random, int round)
    {
        foreach (string collection in s_collections)
        {
            if (collection == "zeta" && round < 6)
            {
                continue;
            }

            SortedDictionary<string, string> documents = model[collection];
            int ids = collection == "big" ? 3000 : 30;
            int changes = collection == "big" ? random.Next(200, 2000) : random.Next(1, 30);
            var batch = new CommitBatch();
            for (int n = 0; n < changes; n++)
            {
                string id = $"{collection[0]}{random.Next(ids):D5}";
                if ((collection == "empty-later" && round >= 12) || random.Next(5) == 0)
                {
                    batch.Delete(collection, id);
                    documents.Remove(id);
                }
                else
                {
                    string pad = new('p', collection == "big" ? 300 : 10);
                    string json = $"{{\"round\":{round},\"n\":{n},\"pad\":\"{pad}\"}}";
                    batch.Put(collection, id, Encoding.UTF8.GetBytes(json));
                    documents[id] = json;
                }

                if (batch.Count == 200)
                {
                    await store.WriteAsync(batch);
                    batch = new CommitBatch();
                }
            }

            if (batch.Count > 0)
            {
                await store.WriteAsync(batch);
            }

            if (collection == "empty-later" && round >= 12)
            {
                foreach (string id in documents.Keys.ToList())
                {
                    await store.DeleteAsync(collection, id);
                    documents.Remove(id);
                }
            }
        }
    }

    /// <summary>The closed store's files as <c>folio export</c> and <c>folio info</c> read them (the checkpoint, ahead
    /// for some ids after a failure between slices, and the journal after it): every document and every
    /// count.</summary>
    private static async Task AssertFilesAgreeAsync(string folder,
        Dictionary<string, SortedDictionary<string, string>> model, string when)
    {
        var scanned = new Dictionary<string, Dictionary<string, string>>(StringComparer.Ordinal);
        await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(folder))
        {
            if (!scanned.TryGetValue(document.Collection, out Dictionary<string, string>? documents))
            {
                scanned[document.Collection] = documents = new Dictionary<string, string>(StringComparer.Ordinal);
            }

            documents.Add(document.Id, Encoding.UTF8.GetString(document.Json.Span));
        }

        StoreInfo info = await DocumentStore.ReadInfoAsync(folder);
        foreach ((string collection, SortedDictionary<string, string> documents) in model)
        {
            Dictionary<string, string> found = scanned.GetValueOrDefault(collection) ?? [];
            Assert.True(documents.Count == found.Count && documents.All(p => found.GetValueOrDefault(p.Key) == p.Value),
                $"{when}, {collection}: the files' scan holds {found.Count} documents, the model {documents.Count}; "
                + $"first difference: {FirstDifference(documents, found)}");
            long counted = info.Collections.FirstOrDefault(c => c.Name == collection)?.Documents ?? 0;
            Assert.True(documents.Count == counted, $"{when}, {collection}: the files' info counts {counted} "
                + $"documents, the model {documents.Count}");
        }

        Assert.DoesNotContain(scanned.Keys, c => !model.ContainsKey(c));
    }

    private static void AssertAgrees(DocumentStore store, Dictionary<string, SortedDictionary<string, string>> model,
        string when)
    {
        long sequence = store.LastCommittedSequence;
        foreach ((string collection, SortedDictionary<string, string> documents) in model)
        {
            var scanned = store.Scan(collection).ToDictionary(d => d.Id, d => Encoding.UTF8.GetString(d.Json.Span));
            Assert.True(documents.Count == scanned.Count && documents.All(p => scanned.GetValueOrDefault(p.Key) ==
                p.Value), $"{when}, {collection}: the scan holds {scanned.Count} documents, the model "
                + $"{documents.Count}; first difference: {FirstDifference(documents, scanned)}");
            foreach ((string id, string json) in documents)
            {
                Assert.Equal(json, store.Get(collection, id) is { } found
                    ? Encoding.UTF8.GetString(found.Json.Span)
                    : null);
            }

            Assert.Equal(documents.Count, store.Index.Count(collection, sequence));
        }
    }

    private static string FirstDifference(SortedDictionary<string, string> model, Dictionary<string, string> scanned)
    {
        foreach ((string id, string json) in model)
        {
            if (scanned.GetValueOrDefault(id) != json)
            {
                return $"{id}: model {json}, store {scanned.GetValueOrDefault(id) ?? "none"}";
            }
        }

        return scanned.Keys.FirstOrDefault(id => !model.ContainsKey(id)) is { } extra ? $"{extra}: not in the model"
            : "none";
    }
}
