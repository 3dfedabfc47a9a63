using System.Text;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>Reopening a store replays its journal as a bulk load (see
/// <see cref="VersionedIndex.BeginBulkLoad"/>).</summary>
public sealed class RecoveryReplayTests
{
    /// <summary>
    /// Ids put in random order across two collections, overwritten, deleted, and deleted then put again: after a
    /// reopen every collection lists exactly the live ids in ordinal order with their last value and version, deleted
    /// ids read as absent, and ids added after the reopen take their place in the order.
    /// </summary>
    [Theory]
    [InlineData(1, 0, 60, 400, 6000)]
    [InlineData(2, 0, 60, 400, 6000)]
    [InlineData(3, 1024 * 1024, 60, 400, 6000)] // values spread over several segments
    [InlineData(4, 1024 * 1024, 800, 12_000, 300)] // enough puts for the parallel end of the bulk load, over segments
    public async Task Replay_rebuilds_overwrites_deletes_and_puts_after_deletes_in_id_order(int seed, long segmentSize,
        int batches, int ids, int maxPad)
    {
        using var dir = new TempDirectory();
        var random = new Random(seed);
        var options = new DocumentStoreOptions();
        if (segmentSize > 0)
        {
            options.SegmentSize = segmentSize;
            options.MaxDocumentSize = 16 * 1024;
            options.MaxGroupBytes = 512 * 1024;
        }

        string[] collections = ["Orders", "Users"];
        var model = new Dictionary<(string Collection, string Id), (long Version, string Json)>();
        int puts = 0;
        await using (var store = await DocumentStore.OpenAsync(dir.Path, options))
        {
            for (int b = 0; b < batches; b++)
            {
                var batch = new CommitBatch();
                var changes = new Dictionary<(string, string), string?>();
                int commands = 1 + random.Next(80);
                for (int c = 0; c < commands; c++)
                {
                    string collection = collections[random.Next(collections.Length)];
                    string id = $"k/{random.Next(ids)}"; // unsorted order, with repeats
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
                        // now and then one over the slabbed size
                        int pad = random.Next(100) == 0 ? 5000 : random.Next(maxPad);
                        string json = $"{{\"n\":{random.Next()},\"pad\":\"{new string('x', pad)}\"}}";
                        batch.Put(collection, id, Encoding.UTF8.GetBytes(json));
                        changes[(collection, id)] = json;
                        puts++;
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

        if (batches > 60)
        {
            Assert.True(puts >= VersionedIndex.MinPutsForParallelEnd,
                $"{puts} puts: the replay must take the parallel end");
        }

        await using (var store = await DocumentStore.OpenAsync(dir.Path, options))
        {
            if (segmentSize > 0)
            {
                Assert.True(store.Journal.SegmentCount > 3, $"{store.Journal.SegmentCount} segments");
            }

            AssertAgrees(store, collections, model);
            for (int i = 0; i < ids; i++)
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
    /// A journal where later batches overwrite most documents of an early batch of large ones: after a reopen the
    /// documents' values sit in slabs that hold about the live bytes only, not every version the journal holds.
    /// </summary>
    [Fact]
    public async Task Replay_keeps_only_the_live_values_not_every_version_in_the_journal()
    {
        using var dir = new TempDirectory();
        var expected = new Dictionary<string, byte[]>();
        await using (var store = await DocumentStore.OpenAsync(dir.Path))
        {
            var first = new CommitBatch();
            for (int i = 0; i < 1000; i++)
            {
                expected[$"d/{i:D4}"] = Encoding.UTF8.GetBytes(
                    $"{{\"first\":{i},\"pad\":\"{new string('p', 1500)}\"}}");
                first.Put("c", $"d/{i:D4}", expected[$"d/{i:D4}"]);
            }

            await store.Merger.CommitAsync(first);
            for (int i = 0; i < 1000; i += 10)
            {
                var overwrite = new CommitBatch();
                for (int j = i; j < i + 10; j++)
                {
                    expected[$"d/{j:D4}"] = Encoding.UTF8.GetBytes($"{{\"second\":{j}}}");
                    overwrite.Put("c", $"d/{j:D4}", expected[$"d/{j:D4}"]);
                }

                await store.Merger.CommitAsync(overwrite);
            }
        }

        await using (var reopened = await DocumentStore.OpenAsync(dir.Path))
        {
            var arrays = new HashSet<byte[]>(ReferenceEqualityComparer.Instance);
            foreach ((string id, byte[] json) in expected)
            {
                ReadOnlyMemory<byte> value = reopened.Get("c", id)!.Value.Json;
                Assert.Equal(json, value.ToArray());
                System.Runtime.InteropServices.MemoryMarshal.TryGetArray(value, out ArraySegment<byte> segment);
                arrays.Add(segment.Array!);
            }

            long live = expected.Values.Sum(v => (long)v.Length);
            long held = arrays.Sum(a => (long)a.Length);
            Assert.True(held <= Math.Max(live, ValueSlabs.MinSlabSize), $"{held} bytes held for {live} live bytes");
        }
    }

    /// <summary>
    /// A bulk load told to expect one document (the sizing pass caps its hint, and a hint can be low) grows its arrays
    /// many times over: every document, overwritten, deleted and put again among them, reads back with its value and
    /// version, and the ids list in order.
    /// </summary>
    [Fact]
    public void A_bulk_load_grows_past_its_size_hint()
    {
        using var dir = new TempDirectory();
        var model = new SortedDictionary<string, (long Version, string Json)>(StringComparer.Ordinal);
        var index = new VersionedIndex();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(256 * 1024)))
        {
            var random = new Random(5);
            for (int b = 0; b < 60; b++)
            {
                var batch = new CommitBatch();
                var changes = new Dictionary<string, string?>();
                for (int c = 0; c < 100; c++)
                {
                    string id = $"id/{random.Next(5000)}";
                    if (!changes.TryAdd(id, null))
                    {
                        continue;
                    }

                    if (random.Next(5) == 0)
                    {
                        batch.Delete("x", id);
                    }
                    else
                    {
                        changes[id] = $"{{\"b\":{b},\"c\":{c}}}";
                        batch.Put("x", id, Encoding.UTF8.GetBytes(changes[id]!));
                    }
                }

                long sequence = journal.AppendBatch(batch);
                foreach ((string id, string? json) in changes)
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

            journal.Sync();
            var names = new CollectionNameCache();
            var commands = new List<ReplayedCommand>();
            index.BeginBulkLoad(new Dictionary<string, int> { ["x"] = 1 });
            using JournalReader reader = journal.OpenReader(1);
            while (reader.TryRead(out JournalEntry entry))
            {
                JournalReplay.DecodeLocations(entry.Data, names, commands);
                index.ApplyReplayed(commands, reader.LastEntryLocation, entry.Sequence, entry.TimestampTicks);
            }

            index.EndBulkLoad();
        }

        Assert.True(model.Count > 2000, $"{model.Count} live documents");
        Assert.Equal(model.Keys,
            index.Range("x", null, null, descending: false, index.VisibleSequence).Select(e => e.Id));
        foreach ((string id, (long version, string json)) in model)
        {
            DocumentVersion read = index.Get(new DocumentKey("x", id), index.VisibleSequence)!.Value;
            Assert.Equal(version, read.Sequence);
            Assert.Equal(json, Encoding.UTF8.GetString(read.Json.Span));
        }

        Assert.Equal(model.Count, index.LiveDocuments());
    }

    [Fact]
    public void A_malformed_entry_fails_the_sizing_pass_with_a_format_error()
    {
        var names = new CollectionNameCache();
        var counts = new Dictionary<string, int>();
        byte[] entry = BatchEncoding.Encode(new CommitBatch().Put("c", "id", "{}"u8.ToArray())).ToArray();
        Assert.Throws<FormatException>(() => JournalReplay.CountPuts(entry.AsSpan(0, entry.Length - 1), names, counts));
        Assert.Throws<FormatException>(() => JournalReplay.CountPuts([2, 0, 0, 0, 0], names, counts));
        entry[1] = 0xFF; // command count far beyond the entry
        Assert.Throws<FormatException>(() => JournalReplay.CountPuts(entry, names, counts));
    }

    [Fact]
    public void The_sizing_pass_counts_puts_per_collection()
    {
        var names = new CollectionNameCache();
        var counts = new Dictionary<string, int>();
        var batch = new CommitBatch()
            .Put("a", "1", new byte[10]).Put("a", "2", new byte[20]).Delete("a", "3")
            .Put("b", "1", new byte[ValueSlabs.MaxSlabbedValue + 1]).Put("a", "4", new byte[30]);
        byte[] entry = BatchEncoding.Encode(batch).ToArray();
        JournalReplay.CountPuts(entry, names, counts);
        JournalReplay.CountPuts(entry, names, counts);
        Assert.Equal(6, counts["a"]);
        Assert.Equal(2, counts["b"]);
    }

    private static void AssertAgrees(DocumentStore store, string[] collections,
        Dictionary<(string Collection, string Id), (long Version, string Json)> model)
    {
        long snapshot = store.Index.VisibleSequence;
        foreach (string collection in collections)
        {
            var expected = model.Where(p => p.Key.Collection == collection)
                .OrderBy(p => p.Key.Id, StringComparer.Ordinal).ToList();
            var actual = store.Index.Range(collection, null, null, descending: false, snapshot).ToList();
            Assert.Equal(expected.Select(p => p.Key.Id), actual.Select(a => a.Id));
            for (int i = 0; i < expected.Count; i++)
            {
                Assert.Equal(expected[i].Value.Version, actual[i].Version.Sequence);
                Assert.Equal(expected[i].Value.Json, Encoding.UTF8.GetString(actual[i].Version.Json.Span));
            }

            Assert.Equal(expected.Select(p => p.Key.Id).Reverse(),
                store.Index.Range(collection, null, null, descending: true, snapshot).Select(a => a.Id));
        }
    }
}
