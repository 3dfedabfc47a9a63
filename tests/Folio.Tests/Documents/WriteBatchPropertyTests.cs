using System.Text;
using FsCheck;
using FsCheck.Xunit;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Random programs of raw writes (<see cref="DocumentStore.WriteAsync"/> batches across two collections that put and
/// delete the same id several times, with expectations that hold or not, single puts and deletes), checkpoints and
/// reopens, against a dictionary model: after every step, each collection's reads by id, scans, range and prefix
/// queries and counts agree with it.
/// </summary>
public sealed class WriteBatchPropertyTests
{
    // ASCII ids and ids whose UTF-8 is longer than their UTF-16 (two, three and four bytes a character), which the
    // in-memory layer compares by encoding them; after "k4", ids whose order by UTF-8 bytes differs from the ordinal
    // order of their UTF-16 code units (a surrogate pair, D83D, sorts before E000 and FF21, whose UTF-8 sorts before
    // the pair's F0), so every layer must order ids the same way.
    private static readonly string[] s_ids =
        ["k0", "k1", "k2\u00e9", "k3\u6771\u4eac", "k4", "k4\U0001F600", "k4\uE000", "k4\uFF21", "k5"];
    private static readonly string[] s_collections = [nameof(RawDoc), nameof(OtherDoc)];

    [Property(MaxTest = 60, Arbitrary = [typeof(WriteBatchPropertyTests)])]
    public void Raw_batches_with_repeated_ids_checkpoints_and_reopens_agree_with_a_dictionary_model(int[] program)
    {
        using var dir = new TempDirectory();
        DocumentStore store = Open(dir.Path);
        var model = new Model();
        foreach (string collection in s_collections)
        {
            model[collection] = new SortedDictionary<string, (long Version, string Json)>(StringComparer.Ordinal);
        }

        int values = 0;
        try
        {
            foreach (int op in program)
            {
                int argument = op >>> 4;
                switch (op & 0xF)
                {
                    case <= 7:
                        WriteBatch(store, model, argument, ref values);
                        break;
                    case 8:
                        {
                            string id = s_ids[argument % s_ids.Length];
                            string collection = s_collections[(argument / s_ids.Length) % s_collections.Length];
                            string json = $"{{\"n\":{values++}}}";
                            long version = store.PutAsync(collection, id, Encoding.UTF8.GetBytes(json))
                                .AsTask().GetAwaiter().GetResult();
                            model[collection][id] = (version, json);
                            break;
                        }

                    case 9:
                        {
                            string id = s_ids[argument % s_ids.Length];
                            string collection = s_collections[(argument / s_ids.Length) % s_collections.Length];
                            store.DeleteAsync(collection, id).AsTask().GetAwaiter().GetResult();
                            model[collection].Remove(id);
                            break;
                        }

                    case 10 or 11:
                        store.CheckpointAsync().AsTask().GetAwaiter().GetResult();
                        break;
                    case 12:
                        store.Dispose();
                        store = Open(dir.Path);
                        break;
                    default:
                        break;
                }

                AssertAgrees(store, model);
            }
        }
        finally
        {
            store.Dispose();
        }
    }

    public static Arbitrary<int[]> Programs() => OperationPrograms.ShrinkingBySteps(60);

    private static DocumentStore Open(string path)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan; // checkpoints where the program says
        return DocumentStore.Open(path, options);
    }

    /// <summary>A batch of 1-4 commands over the ids, repeats included, and maybe an expectation on one of them (its
    /// version before the batch, or a wrong one). The values are slices of one buffer, scribbled over once the write
    /// completed, as a caller that reuses its memory does.</summary>
    private static void WriteBatch(DocumentStore store, Model model, int argument, ref int values)
    {
        var random = new Random(argument);
        var batch = new CommitBatch();
        var commands = new List<(string Collection, string Id, string? Json)>();
        byte[] buffer = new byte[256];
        int used = 0;
        int count = 1 + random.Next(4);
        for (int i = 0; i < count; i++)
        {
            string id = s_ids[random.Next(s_ids.Length)];
            string collection = s_collections[random.Next(s_collections.Length)];
            if (random.Next(3) == 0)
            {
                batch.Delete(collection, id);
                commands.Add((collection, id, null));
            }
            else
            {
                string json = $"{{\"n\":{values++}}}";
                int length = Encoding.UTF8.GetBytes(json, buffer.AsSpan(used));
                batch.Put(collection, id, buffer.AsMemory(used, length));
                used += length;
                commands.Add((collection, id, json));
            }
        }

        bool holds = true;
        if (random.Next(2) == 0)
        {
            string id = s_ids[random.Next(s_ids.Length)];
            string collection = s_collections[random.Next(s_collections.Length)];
            long current = model[collection].TryGetValue(id, out var present) ? present.Version : 0;
            long expected = random.Next(3) == 0 ? current + 1 : current;
            holds = expected == current;
            batch.Expect(collection, id, expected);
        }

        long before = store.LastCommittedSequence;
        Exception? error = Record.Exception(() => store.WriteAsync(batch).AsTask().GetAwaiter().GetResult());
        buffer.AsSpan().Fill((byte)'x');
        if (!holds)
        {
            Assert.IsType<ConcurrencyException>(error);
            Assert.Equal(before, store.LastCommittedSequence);
            return;
        }

        Assert.Null(error);
        long sequence = store.LastCommittedSequence;
        Assert.Equal(before + 1, sequence);
        foreach ((string collection, string id, string? json) in commands)
        {
            if (json is null)
            {
                model[collection].Remove(id);
            }
            else
            {
                model[collection][id] = (sequence, json);
            }
        }
    }

    private static void AssertAgrees(DocumentStore store, Model model)
    {
        AssertCollection<RawDoc>(store, model[nameof(RawDoc)]);
        AssertCollection<OtherDoc>(store, model[nameof(OtherDoc)]);
    }

    private static void AssertCollection<T>(DocumentStore store,
        SortedDictionary<string, (long Version, string Json)> model)
        where T : class, INumbered
    {
        string collection = typeof(T).Name;
        foreach (string id in s_ids)
        {
            StoredDocument? stored = store.Get(collection, id);
            Assert.Equal(model.ContainsKey(id), stored.HasValue);
            if (stored is { } document)
            {
                Assert.Equal(model[id].Version, document.Version);
                Assert.Equal(model[id].Json, Encoding.UTF8.GetString(document.Json.Span));
            }
        }

        Assert.Equal(
            model.Select(p => (p.Key, p.Value.Version, p.Value.Json)),
            store.Scan(collection).Select(d => (d.Id, d.Version, Encoding.UTF8.GetString(d.Json.Span))));

        using DocumentSession session = store.OpenSession();
        Assert.Equal(model.Count, session.CountAsync<T>().AsTask().GetAwaiter().GetResult());
        Assert.Equal(model.Values.Select(v => v.Json), Query(session.QueryByPrefixAsync<T>("k")));
        Assert.Equal(
            model.Where(p => string.CompareOrdinal(p.Key, "k1") >= 0 && string.CompareOrdinal(p.Key, "k4") < 0)
                .Select(p => p.Value.Json),
            Query(session.QueryByRangeAsync<T>("k1", "k4")));
        Assert.Equal(model.Values.Reverse().Select(v => v.Json),
            Query(session.QueryByPrefixAsync<T>("k", descending: true)));
        Assert.Equal(model.Where(p => p.Key.StartsWith("k4", StringComparison.Ordinal)).Select(p => p.Value.Json),
            Query(session.QueryByPrefixAsync<T>("k4")));
        Assert.Equal(
            model.Where(p => string.CompareOrdinal(p.Key, "k4\uE000") >= 0 && string.CompareOrdinal(p.Key, "k5") < 0)
                .Reverse().Select(p => p.Value.Json),
            Query(session.QueryByRangeAsync<T>("k4\uE000", "k5", descending: true)));
    }

    private static List<string> Query<T>(IAsyncEnumerable<T> results)
        where T : INumbered =>
        results.ToBlockingEnumerable().Select(d => $"{{\"n\":{d.N}}}").ToList();

    /// <summary>Per collection, its documents by id.</summary>
    private sealed class Model : Dictionary<string, SortedDictionary<string, (long Version, string Json)>>;

    /// <summary>What both collections' documents hold.</summary>
    public interface INumbered
    {
        int N { get; }
    }

    private sealed class RawDoc : INumbered
    {
        [System.Text.Json.Serialization.JsonPropertyName("n")]
        public int N { get; set; }
    }

    private sealed class OtherDoc : INumbered
    {
        [System.Text.Json.Serialization.JsonPropertyName("n")]
        public int N { get; set; }
    }
}
