using System.Text;
using FsCheck;
using FsCheck.Xunit;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Random programs of raw writes (<see cref="DocumentStore.WriteAsync"/> batches that put and delete the same id
/// several times, with expectations that hold or not, single puts and deletes), checkpoints and reopens, against a
/// dictionary model: after every step, reads by id, scans, range and prefix queries and counts agree with it.
/// </summary>
public sealed class WriteBatchPropertyTests
{
    private static readonly string[] s_ids = ["k0", "k1", "k2", "k3", "k4", "k5"];

    [Property(MaxTest = 60, Arbitrary = [typeof(WriteBatchPropertyTests)])]
    public void Raw_batches_with_repeated_ids_checkpoints_and_reopens_agree_with_a_dictionary_model(int[] program)
    {
        using var dir = new TempDirectory();
        DocumentStore store = Open(dir.Path);
        var model = new SortedDictionary<string, (long Version, string Json)>(StringComparer.Ordinal);
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
                            string json = $"{{\"n\":{values++}}}";
                            long version = store.PutAsync(nameof(RawDoc), id, Encoding.UTF8.GetBytes(json))
                                .AsTask().GetAwaiter().GetResult();
                            model[id] = (version, json);
                            break;
                        }

                    case 9:
                        {
                            string id = s_ids[argument % s_ids.Length];
                            store.DeleteAsync(nameof(RawDoc), id).AsTask().GetAwaiter().GetResult();
                            model.Remove(id);
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
    private static void WriteBatch(DocumentStore store, SortedDictionary<string, (long Version, string Json)> model,
        int argument, ref int values)
    {
        var random = new Random(argument);
        var batch = new CommitBatch();
        var commands = new List<(string Id, string? Json)>();
        byte[] buffer = new byte[256];
        int used = 0;
        int count = 1 + random.Next(4);
        for (int i = 0; i < count; i++)
        {
            string id = s_ids[random.Next(s_ids.Length)];
            if (random.Next(3) == 0)
            {
                batch.Delete(nameof(RawDoc), id);
                commands.Add((id, null));
            }
            else
            {
                string json = $"{{\"n\":{values++}}}";
                int length = Encoding.UTF8.GetBytes(json, buffer.AsSpan(used));
                batch.Put(nameof(RawDoc), id, buffer.AsMemory(used, length));
                used += length;
                commands.Add((id, json));
            }
        }

        bool holds = true;
        if (random.Next(2) == 0)
        {
            string id = s_ids[random.Next(s_ids.Length)];
            long current = model.TryGetValue(id, out var present) ? present.Version : 0;
            long expected = random.Next(3) == 0 ? current + 1 : current;
            holds = expected == current;
            batch.Expect(nameof(RawDoc), id, expected);
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
        foreach ((string id, string? json) in commands)
        {
            if (json is null)
            {
                model.Remove(id);
            }
            else
            {
                model[id] = (sequence, json);
            }
        }
    }

    private static void AssertAgrees(DocumentStore store, SortedDictionary<string, (long Version, string Json)> model)
    {
        foreach (string id in s_ids)
        {
            StoredDocument? stored = store.Get(nameof(RawDoc), id);
            Assert.Equal(model.ContainsKey(id), stored.HasValue);
            if (stored is { } document)
            {
                Assert.Equal(model[id].Version, document.Version);
                Assert.Equal(model[id].Json, Encoding.UTF8.GetString(document.Json.Span));
            }
        }

        Assert.Equal(
            model.Select(p => (p.Key, p.Value.Version, p.Value.Json)),
            store.Scan(nameof(RawDoc)).Select(d => (d.Id, d.Version, Encoding.UTF8.GetString(d.Json.Span))));

        using DocumentSession session = store.OpenSession();
        Assert.Equal(model.Count, session.CountAsync<RawDoc>().AsTask().GetAwaiter().GetResult());
        Assert.Equal(model.Values.Select(v => v.Json), Query(session.QueryByPrefixAsync<RawDoc>("k")));
        Assert.Equal(
            model.Where(p => string.CompareOrdinal(p.Key, "k1") >= 0 && string.CompareOrdinal(p.Key, "k4") < 0)
                .Select(p => p.Value.Json),
            Query(session.QueryByRangeAsync<RawDoc>("k1", "k4")));
        Assert.Equal(model.Values.Reverse().Select(v => v.Json),
            Query(session.QueryByPrefixAsync<RawDoc>("k", descending: true)));
    }

    private static List<string> Query(IAsyncEnumerable<RawDoc> results) =>
        results.ToBlockingEnumerable().Select(d => $"{{\"n\":{d.N}}}").ToList();

    private sealed class RawDoc
    {
        [System.Text.Json.Serialization.JsonPropertyName("n")]
        public int N { get; set; }
    }
}
