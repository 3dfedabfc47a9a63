using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Checkpoints in slices against a model, through the public API: several collections of very different sizes (one
/// large enough to be cut, small ones a slice takes whole, some emptied, some new), random puts and deletes between
/// checkpoints, a failure injected between slices now and then, and closes without a checkpoint followed by opens.
/// After every checkpoint the versions it covers leave memory, so reads, scans and counts come from its trees; each
/// is compared with the model, and so is every reopened store, whose journal replay meets trees ahead of their
/// checkpoint for some ids.
/// </summary>
public sealed class CheckpointSliceModelTests
{
    private static readonly string[] s_collections = ["alpha", "big", "empty-later", "zeta"];

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    public async Task Slices_over_collections_of_every_size_keep_what_the_model_keeps_through_failures_and_reopens(
        int seed)
    {
        var random = new Random(seed);
        using var dir = new TempDirectory();
        int failAt = -1;
        int slicedPasses = 0;
        DocumentStoreOptions options = TestStoreOptions.KeepingJournal(TestStoreOptions.ManualCheckpoints());
        options.CacheSize = 2 << 20;
        options.CompactionFillRate = 0;
        options.MinCheckpointSliceBytes = 1; // slices of a quarter of the live pages (the default share)
        options.TestBeforeSlice = (slice, count) =>
        {
            slicedPasses += slice == count - 1 ? 1 : 0;
            if (slice == Volatile.Read(ref failAt))
            {
                throw new IOException("injected: the disk failed between slices");
            }
        };
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
                Volatile.Write(ref failAt, random.Next(4) == 0 ? 1 + random.Next(3) : -1);
                try
                {
                    await store.CheckpointAsync();
                }
                catch (IOException) when (Volatile.Read(ref failAt) > 0)
                {
                    // The slices before the failed one are durable; the next checkpoint writes the rest whole.
                }

                Volatile.Write(ref failAt, -1);
                store.Index.EvictCheckpointed();
                AssertAgrees(store, model, $"round {round}");
                if (random.Next(3) == 0)
                {
                    await store.DisposeAsync(); // no checkpoint at the close: the open replays the journal
                    store = DocumentStore.Open(dir.Path, options);
                    AssertAgrees(store, model, $"round {round}, reopened");
                }
            }

            Assert.True(slicedPasses >= 5, $"{slicedPasses} passes in slices");
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }
        finally
        {
            await store.DisposeAsync();
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
