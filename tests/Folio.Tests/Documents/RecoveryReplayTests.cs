using System.Text;
using Folio.Documents;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>Reopening a store replays its journal as a bulk load (see <see cref="VersionedIndex.BeginBulkLoad"/>).</summary>
public sealed class RecoveryReplayTests
{
    /// <summary>
    /// Ids put in random order across two collections, overwritten, deleted, and deleted then put again: after a
    /// reopen every collection lists exactly the live ids in ordinal order with their last value and version, deleted
    /// ids read as absent, and ids added after the reopen take their place in the order.
    /// </summary>
    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public async Task Replay_rebuilds_overwrites_deletes_and_puts_after_deletes_in_id_order(int seed)
    {
        using var dir = new TempDirectory();
        var random = new Random(seed);
        string[] collections = ["Orders", "Users"];
        var model = new Dictionary<(string Collection, string Id), (long Version, string Json)>();
        await using (var store = await DocumentStore.OpenAsync(dir.Path))
        {
            for (int b = 0; b < 60; b++)
            {
                var batch = new CommitBatch();
                var changes = new Dictionary<(string, string), string?>();
                int commands = 1 + random.Next(80);
                for (int c = 0; c < commands; c++)
                {
                    string collection = collections[random.Next(collections.Length)];
                    string id = $"k/{random.Next(400)}"; // unsorted order, with repeats
                    if (changes.ContainsKey((collection, id)))
                    {
                        continue;
                    }

                    if (random.Next(4) == 0)
                    {
                        batch.Delete(collection, id);
                        changes[(collection, id)] = null;
                    }
                    else
                    {
                        string json = $"{{\"n\":{random.Next()},\"pad\":\"{new string('x', random.Next(6000))}\"}}";
                        batch.Put(collection, id, Encoding.UTF8.GetBytes(json));
                        changes[(collection, id)] = json;
                    }
                }

                long sequence = (await store.Merger.CommitAsync(batch)).Sequence;
                foreach (((string collection, string id), string? json) in changes)
                {
                    if (json is null)
                    {
                        model.Remove((collection, id));
                    }
                    else
                    {
                        model[(collection, id)] = (sequence, json);
                    }
                }
            }
        }

        await using (var store = await DocumentStore.OpenAsync(dir.Path))
        {
            AssertAgrees(store, collections, model);
            for (int i = 0; i < 400; i++)
            {
                StoredDocument? read = store.Get("Users", $"k/{i}");
                Assert.Equal(model.ContainsKey(("Users", $"k/{i}")), read is not null);
            }

            // Ids added after the reopen go to their place in the sorted list.
            foreach (string id in new[] { "a", "k/2000", "k/0x", "zzz" })
            {
                long version = await store.PutAsync("Users", id, "{}"u8.ToArray());
                model[("Users", id)] = (version, "{}");
            }

            await store.DeleteAsync("Orders", model.Keys.First(k => k.Collection == "Orders").Id);
            model.Remove(model.Keys.First(k => k.Collection == "Orders"));
            AssertAgrees(store, collections, model);
        }
    }

    /// <summary>
    /// A replay where later batches overwrite most documents of an early, full slab: at the end no document still
    /// points into a slab that is less than half live (they were copied out), and every value is intact.
    /// </summary>
    [Fact]
    public void Replay_copies_the_survivors_of_mostly_overwritten_slabs_out()
    {
        var slabs = new ValueSlabs();
        var names = new BatchEncoding.NameCache();
        var commands = new List<BatchCommand>();
        var index = new VersionedIndex();
        index.BeginBulkLoad(slabs, new Dictionary<string, int> { ["c"] = 2000 });
        var expected = new Dictionary<string, byte[]>();
        long sequence = 0;

        void Replay(CommitBatch batch)
        {
            byte[] entry = BatchEncoding.Encode(batch, out int length);
            BatchEncoding.Decode(entry.AsSpan(0, length), names, slabs, commands);
            index.ApplyReplayed(commands, ++sequence, sequence * 10);
            foreach (BatchCommand command in batch.Commands)
            {
                expected[command.Key.Id] = command.Value.ToArray();
            }
        }

        var first = new CommitBatch();
        for (int i = 0; i < 1000; i++)
        {
            first.Put("c", $"d/{i:D4}", Encoding.UTF8.GetBytes($"{{\"first\":{i},\"pad\":\"{new string('p', 150)}\"}}"));
        }

        Replay(first);
        for (int i = 0; i < 1000; i++)
        {
            if (i % 10 != 0)
            {
                Replay(new CommitBatch().Put("c", $"d/{i:D4}", Encoding.UTF8.GetBytes($"{{\"second\":{i}}}")));
            }
        }

        Assert.True(slabs.AnySparse);
        index.EndBulkLoad();

        Assert.Equal(1000, index.LiveDocuments());
        foreach ((string id, byte[] json) in expected)
        {
            DocumentVersion version = index.Get(new DocumentKey("c", id), index.VisibleSequence)!;
            Assert.Equal(json, version.Json.ToArray());
            Assert.False(slabs.IsSparse(version.Json), id);
        }
    }

    [Fact]
    public void A_malformed_entry_fails_the_sizing_pass_with_a_format_error()
    {
        var names = new BatchEncoding.NameCache();
        var counts = new Dictionary<string, int>();
        long bytes = 0;
        byte[] entry = BatchEncoding.Encode(new CommitBatch().Put("c", "id", "{}"u8.ToArray()), out int length);
        Assert.Throws<FormatException>(() => BatchEncoding.CountPuts(entry.AsSpan(0, length - 1), names, counts, ref bytes));
        Assert.Throws<FormatException>(() => BatchEncoding.CountPuts([2, 0, 0, 0, 0], names, counts, ref bytes));
        entry[1] = 0xFF; // command count far beyond the entry
        Assert.Throws<FormatException>(() => BatchEncoding.CountPuts(entry.AsSpan(0, length), names, counts, ref bytes));
        ArrayPoolReturn(entry);
    }

    [Fact]
    public void The_sizing_pass_counts_puts_per_collection_and_slabbed_value_bytes()
    {
        var names = new BatchEncoding.NameCache();
        var counts = new Dictionary<string, int>();
        long bytes = 0;
        var batch = new CommitBatch()
            .Put("a", "1", new byte[10]).Put("a", "2", new byte[20]).Delete("a", "3")
            .Put("b", "1", new byte[ValueSlabs.MaxSlabbedValue + 1]).Put("a", "4", new byte[30]);
        byte[] entry = BatchEncoding.Encode(batch, out int length);
        BatchEncoding.CountPuts(entry.AsSpan(0, length), names, counts, ref bytes);
        BatchEncoding.CountPuts(entry.AsSpan(0, length), names, counts, ref bytes);
        Assert.Equal(6, counts["a"]);
        Assert.Equal(2, counts["b"]);
        Assert.Equal(2 * 60, bytes); // the large value gets its own array, not slab space
        ArrayPoolReturn(entry);
    }

    private static void ArrayPoolReturn(byte[] buffer) => System.Buffers.ArrayPool<byte>.Shared.Return(buffer);

    private static void AssertAgrees(DocumentStore store, string[] collections, Dictionary<(string Collection, string Id), (long Version, string Json)> model)
    {
        long snapshot = store.Index.VisibleSequence;
        foreach (string collection in collections)
        {
            var expected = model.Where(p => p.Key.Collection == collection).OrderBy(p => p.Key.Id, StringComparer.Ordinal).ToList();
            var actual = store.Index.Range(collection, null, null, descending: false, snapshot).ToList();
            Assert.Equal(expected.Select(p => p.Key.Id), actual.Select(a => a.Id));
            for (int i = 0; i < expected.Count; i++)
            {
                Assert.Equal(expected[i].Value.Version, actual[i].Version.Sequence);
                Assert.Equal(expected[i].Value.Json, Encoding.UTF8.GetString(actual[i].Version.Json.Span));
            }

            Assert.Equal(expected.Select(p => p.Key.Id).Reverse(), store.Index.Range(collection, null, null, descending: true, snapshot).Select(a => a.Id));
        }
    }
}
