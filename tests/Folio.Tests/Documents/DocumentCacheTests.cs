using System.Text;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The cache of checkpointed documents against a model: a hit is always the document added for that tree and id,
/// never another tree's or another id's; the bytes it counts stay within its budget and return to zero when it is
/// emptied, also when threads add and read at once.
/// </summary>
public sealed class DocumentCacheTests
{
    /// <summary>One step: add or read document <c>Id</c> of tree <c>Tree</c>.</summary>
    public sealed record CacheStep(bool Add, int Tree, int Id);

    public static Arbitrary<CacheStep[]> Steps() => Gen.Choose(0, 3).SelectMany(tree => Gen.Choose(0, 400)
            .SelectMany(id => Gen.Elements(true, false).Select(add => new CacheStep(add, tree, id))))
        .ArrayOf().ToArbitrary();

    [Property(MaxTest = 200, Arbitrary = [typeof(DocumentCacheTests)])]
    public void A_hit_is_the_document_added_for_its_tree_and_id_and_the_bytes_stay_within_the_budget(CacheStep[] steps)
    {
        var cache = Cache(96 << 10); // room for about 200 of these entries: adds evict
        var added = new HashSet<(int, int)>();
        foreach (CacheStep step in steps)
        {
            string id = Id(step.Id);
            if (step.Add)
            {
                cache.Add(step.Tree + 1, id, IdBytes.HashOf(id), Version(step.Tree, step.Id));
                added.Add((step.Tree, step.Id));
                Assert.InRange(cache.Bytes, 0, cache.Budget);
            }
            else if (cache.TryGet(step.Tree + 1, id, IdBytes.HashOf(id), out DocumentVersion found))
            {
                Assert.Contains((step.Tree, step.Id), added);
                AssertIs(step.Tree, step.Id, found);
            }
        }

        Assert.InRange(cache.Count, 0, added.Count);
        cache.Clear();
        Assert.Equal(0, cache.Bytes);
        Assert.Equal(0, cache.Count);
    }

    [Fact]
    public void A_document_read_again_is_found_and_one_of_another_tree_or_id_is_not()
    {
        var cache = Cache(1 << 20);
        string id = Id(7);
        int hash = IdBytes.HashOf(id);
        Assert.False(cache.TryGet(1, id, hash, out _));
        cache.Add(1, id, hash, Version(0, 7));
        Assert.True(cache.TryGet(1, id, hash, out DocumentVersion found));
        AssertIs(0, 7, found);
        Assert.False(cache.TryGet(2, id, hash, out _)); // a newer tree of the collection
        string other = Id(8);
        Assert.False(cache.TryGet(1, other, IdBytes.HashOf(other), out _));
        Assert.False(cache.TryGet(1, other, hash, out _)); // even with the same hash
        Assert.Equal(1, cache.Count);
    }

    [Fact]
    public void The_same_ids_in_many_trees_spread_over_the_table_and_are_all_cached()
    {
        // 300 collections (a tenant each) that number their documents alike: 6,000 documents with 20 ids.
        var cache = new DocumentCache(8 << 20, documents: 6000);
        for (int tree = 1; tree <= 300; tree++)
        {
            for (int n = 0; n < 20; n++)
            {
                string id = n.ToString(System.Globalization.CultureInfo.InvariantCulture);
                cache.Add(tree, id, IdBytes.HashOf(id), Version(tree, n));
            }
        }

        int found = 0;
        for (int tree = 1; tree <= 300; tree++)
        {
            for (int n = 0; n < 20; n++)
            {
                string id = n.ToString(System.Globalization.CultureInfo.InvariantCulture);
                if (cache.TryGet(tree, id, IdBytes.HashOf(id), out DocumentVersion version))
                {
                    AssertIs(tree, n, version);
                    found++;
                }
            }
        }

        Assert.True(found > 6000 * 97 / 100, $"{found} of 6000 cached"); // a few buckets get more than two
    }

    [Fact]
    public void Deletes_unreadable_versions_and_documents_over_a_sixty_fourth_of_the_budget_are_not_cached()
    {
        var cache = Cache(1 << 20);
        string id = Id(1);
        int hash = IdBytes.HashOf(id);
        cache.Add(1, id, hash, new DocumentVersion(5, 6, ReadOnlyMemory<byte>.Empty, isDeleted: true));
        cache.Add(1, id, hash, new DocumentVersion(5, 6, new byte[10], isDeleted: false, isUnreadable: true));
        cache.Add(1, id, hash, new DocumentVersion(5, 6, new byte[(int)(cache.Budget / 64)], isDeleted: false));
        Assert.Equal(0, cache.Count);
        Assert.False(cache.TryGet(1, id, hash, out _));

        cache.Add(1, id, hash, new DocumentVersion(5, 6, new byte[(int)(cache.Budget / 64) - 200], isDeleted: false));
        Assert.True(cache.TryGet(1, id, hash, out DocumentVersion found));
        Assert.Equal(5, found.Sequence);
        Assert.Equal(6, found.TimestampTicks);
    }

    [Fact]
    public void A_document_shares_the_array_it_was_read_into_and_copies_a_slice()
    {
        var cache = Cache(1 << 20);
        byte[] whole = Encoding.UTF8.GetBytes("{\"a\":1}");
        cache.Add(1, "whole", IdBytes.HashOf("whole"), new DocumentVersion(1, 1, whole, isDeleted: false));
        Assert.True(cache.TryGet(1, "whole", IdBytes.HashOf("whole"), out DocumentVersion found));
        Assert.True(System.Runtime.InteropServices.MemoryMarshal.TryGetArray(found.Json, out ArraySegment<byte> same));
        Assert.Same(whole, same.Array);

        byte[] larger = Encoding.UTF8.GetBytes("xx{\"a\":2}yy");
        cache.Add(1, "slice", IdBytes.HashOf("slice"),
            new DocumentVersion(1, 1, larger.AsMemory(2, larger.Length - 4), isDeleted: false));
        larger.AsSpan().Clear(); // the cache holds its own copy of a slice
        Assert.True(cache.TryGet(1, "slice", IdBytes.HashOf("slice"), out found));
        Assert.Equal("{\"a\":2}", Encoding.UTF8.GetString(found.Json.Span));
    }

    [Fact]
    public void Documents_read_since_they_were_last_aged_outlive_a_stream_of_documents_never_read_again()
    {
        var cache = Cache(256 << 10);

        // Fifty hot ids, no three in one bucket (ids hash differently in each process): three would take turns in
        // two slots whatever the policy.
        var perBucket = new Dictionary<int, int>();
        var hot = new List<string>();
        for (int i = 0; hot.Count < 50; i++)
        {
            string id = $"hot/{i}";
            int bucket = cache.BucketIndexOf(1, IdBytes.HashOf(id));
            if (perBucket.GetValueOrDefault(bucket) < 2)
            {
                perBucket[bucket] = perBucket.GetValueOrDefault(bucket) + 1;
                hot.Add(id);
            }
        }
        foreach (string id in hot)
        {
            cache.Add(1, id, IdBytes.HashOf(id), Version(0, 1));
        }

        int hits = 0;
        int reads = 0;
        for (int i = 0; i < 20_000; i++)
        {
            // Each missed twice in a row, so the full cache's doorkeeper lets it in.
            string cold = $"cold/{i}";
            cache.Add(1, cold, IdBytes.HashOf(cold), Version(0, 2));
            cache.Add(1, cold, IdBytes.HashOf(cold), Version(0, 2));
            string id = hot[i % hot.Count];
            reads++;
            if (cache.TryGet(1, id, IdBytes.HashOf(id), out _))
            {
                hits++;
            }
            else
            {
                cache.Add(1, id, IdBytes.HashOf(id), Version(0, 1));
            }

            Assert.InRange(cache.Bytes, 0, cache.Budget);
        }

        // The cold stream is 400 times the hot set and more than ten times what the cache holds. Without the
        // referenced bits the clock evicts the hot documents in turn with the cold ones (about 95% hits); with them,
        // only a bucket that two hot documents share loses one.
        Assert.True(hits > reads * 99 / 100, $"{hits} hits of {reads}");
    }

    [Fact]
    public void A_full_cache_admits_a_document_missed_twice_in_a_row_and_not_one_missed_once()
    {
        var cache = Cache(256 << 10);
        // Full of entries of about 170 bytes: one of the 260-byte entries below no longer fits beside them.
        for (int n = 0; cache.Bytes + 200 < cache.Budget; n++)
        {
            string id = $"fill/{n}";
            cache.Add(1, id, IdBytes.HashOf(id), Version(0, 0));
        }

        int once = 0;
        int twice = 0;
        for (int i = 0; i < 1000; i++)
        {
            string id = $"once/{i}";
            cache.Add(1, id, IdBytes.HashOf(id), Version(0, 89));
            once += cache.TryGet(1, id, IdBytes.HashOf(id), out _) ? 1 : 0;
        }

        for (int i = 0; i < 1000; i++)
        {
            string id = $"twice/{i}";
            cache.Add(1, id, IdBytes.HashOf(id), Version(0, 89));
            cache.Add(1, id, IdBytes.HashOf(id), Version(0, 89));
            twice += cache.TryGet(1, id, IdBytes.HashOf(id), out _) ? 1 : 0;
        }

        Assert.Equal(0, once);
        Assert.True(twice > 500, $"{twice} of 1000"); // not when both entries of its bucket were read since aged
        Assert.InRange(cache.Bytes, 0, cache.Budget); // each in place of another, and the clock took more
    }

    [Fact]
    public void Hits_misses_entries_and_bytes_are_published_on_the_folio_meter()
    {
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener = meters.ListenToTotals(
            out System.Collections.Concurrent.ConcurrentDictionary<string, long> recorded);
        DocumentCache? counted = null;
        using var metrics = new Folio.Diagnostics.DocumentCacheMetrics(meters, () => counted!.Count,
            () => counted!.Bytes);
        var cache = new DocumentCache(1 << 20, Documents, metrics);
        counted = cache;
        string id = Id(3);
        cache.Add(1, id, IdBytes.HashOf(id), Version(0, 3)); // a point read's miss
        Assert.True(cache.TryGet(1, id, IdBytes.HashOf(id), out _));
        Assert.True(cache.TryGet(1, id, IdBytes.HashOf(id), out _));
        Assert.False(cache.TryGet(2, id, IdBytes.HashOf(id), out _)); // counted by the Add that follows it
        listener.RecordObservableInstruments();

        Assert.Equal(2, recorded.GetValueOrDefault("folio.document_cache.hits"));
        Assert.Equal(1, recorded.GetValueOrDefault("folio.document_cache.misses"));
        Assert.Equal(1, recorded.GetValueOrDefault("folio.document_cache.entries"));
        Assert.Equal(cache.Bytes, recorded.GetValueOrDefault("folio.document_cache.bytes"));
        Assert.True(cache.Bytes > DocumentCache.EntryOverhead);
    }

    [Fact]
    public async Task Threads_adding_and_reading_at_once_only_ever_find_the_right_document_and_count_every_byte()
    {
        var cache = Cache(128 << 10);
        var ids = Enumerable.Range(0, 3000).Select(Id).ToArray();
        var start = new Barrier(4);
        long hits = 0;
        Task[] workers = Enumerable.Range(0, 4).Select(w => Task.Run(() =>
        {
            var random = new Random(w);
            start.SignalAndWait();
            for (int i = 0; i < 200_000; i++)
            {
                int tree = random.Next(3);
                int n = random.Next(ids.Length);
                string id = ids[n];
                if (cache.TryGet(tree + 1, id, IdBytes.HashOf(id), out DocumentVersion found))
                {
                    AssertIs(tree, n, found);
                    Interlocked.Increment(ref hits);
                }
                else
                {
                    cache.Add(tree + 1, id, IdBytes.HashOf(id), Version(tree, n));
                }
            }
        })).ToArray();
        await Task.WhenAll(workers);

        Assert.True(hits > 0);
        Assert.InRange(cache.Bytes, 0, cache.Budget);
        cache.Clear();
        Assert.Equal(0, cache.Bytes);
        Assert.Equal(0, cache.Count);
    }

    [Fact]
    public async Task A_cached_document_reads_its_new_value_after_a_write_and_after_the_checkpoint_that_rewrote_it()
    {
        using var dir = new TempDirectory();
        await FillAsync(dir.Path);
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints()))
        {
            DocumentCache cache = store.Index.DocumentCache!;
            Assert.Equal(5, JsonValue(store.Get("Item", "i5")));
            Assert.Equal(6, JsonValue(store.Get("Item", "i6")));
            Assert.Equal(2, cache.Count);
            Assert.Equal(5, JsonValue(store.Get("Item", "i5"))); // from the cache
            Assert.Equal(2, cache.Count);

            await using DocumentSession before = store.OpenSession();
            Assert.Equal(7, (await before.LoadAsync<Item>("i7"))!.Value); // its first read fixes its snapshot
            await store.PutAsync("Item", "i5", Json(-5));
            await store.DeleteAsync("Item", "i6");
            Assert.Equal(-5, JsonValue(store.Get("Item", "i5")));
            Assert.Null(store.Get("Item", "i6"));

            // The checkpoint rewrites the collection's tree and evicts the writes from memory: reads go to the new
            // tree, whose documents the cache has not seen.
            long itemTree = store.Index.TreeCacheKey("Item");
            await store.CheckpointAsync();
            Assert.NotEqual(itemTree, store.Index.TreeCacheKey("Item"));
            Assert.Equal(-5, JsonValue(store.Get("Item", "i5")));
            Assert.Null(store.Get("Item", "i6"));
            Assert.Equal(-5, JsonValue(store.Get("Item", "i5")));

            // A snapshot from before the writes still reads what it read then.
            Assert.Equal(5, (await before.LoadAsync<Item>("i5"))!.Value);
            Assert.Equal(6, (await before.LoadAsync<Item>("i6"))!.Value);
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints()))
        {
            Assert.Equal(-5, JsonValue(store.Get("Item", "i5")));
            Assert.Null(store.Get("Item", "i6"));
            Assert.Equal(7, JsonValue(store.Get("Item", "i7")));
        }
    }

    [Fact]
    public async Task A_checkpoint_that_leaves_a_collection_unchanged_keeps_its_cached_documents()
    {
        using var dir = new TempDirectory();
        await FillAsync(dir.Path);
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints());
        for (int i = 0; i < 50; i++)
        {
            Assert.Equal(i, JsonValue(store.Get("Other", $"o{i}")));
        }

        long otherTree = store.Index.TreeCacheKey("Other");
        long itemTree = store.Index.TreeCacheKey("Item");
        await store.PutAsync("Item", "i1", Json(-1));
        await store.CheckpointAsync();

        Assert.Equal(otherTree, store.Index.TreeCacheKey("Other"));
        Assert.NotEqual(itemTree, store.Index.TreeCacheKey("Item"));
        long cached = store.Index.DocumentCache!.Count;
        for (int i = 0; i < 50; i++)
        {
            Assert.Equal(i, JsonValue(store.Get("Other", $"o{i}")));
        }

        Assert.Equal(cached, store.Index.DocumentCache.Count); // every read found its document cached
        Assert.Equal(-1, JsonValue(store.Get("Item", "i1")));
    }

    [Fact]
    public async Task A_checkpoint_keeps_the_cached_documents_it_did_not_change_and_never_an_old_one_it_changed()
    {
        using var dir = new TempDirectory();
        await FillAsync(dir.Path);
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener = meters.ListenToTotals(
            out System.Collections.Concurrent.ConcurrentDictionary<string, long> recorded);
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.MeterFactory = meters;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 200; i++)
        {
            Assert.Equal(i, JsonValue(store.Get("Item", $"i{i}")));
        }

        // Two checkpoints: one that changes three documents, then one that changes another (and so moves the first
        // checkpoint's tree back a step), each a new tree of the collection; with no snapshot open, each evicts the
        // writes from memory, so every read after it goes to the cache or the tree.
        await store.PutAsync("Item", "i5", Json(-5));
        await store.DeleteAsync("Item", "i6");
        await store.PutAsync("Item", "i200", Json(200));
        long first = store.Index.TreeCacheKey("Item");
        await store.CheckpointAsync();
        long second = store.Index.TreeCacheKey("Item");
        Assert.NotEqual(first, second);
        long missesBefore = recorded.GetValueOrDefault("folio.document_cache.misses");
        long hitsBefore = recorded.GetValueOrDefault("folio.document_cache.hits");
        for (int i = 0; i <= 200; i++)
        {
            int? expected = i switch { 5 => -5, 6 => null, _ => i };
            Assert.Equal(expected, JsonValue(store.Get("Item", $"i{i}")));
        }

        // The 198 unchanged documents came from the cache (a hit each), but for the few a refiled one took the slot
        // of (two-way buckets), which the new tree gave (a miss each); the changed and the new one from the new tree
        // (a miss each, but the deleted one, which it does not hold). Without the carry-over, all 200 would miss.
        long hits = recorded.GetValueOrDefault("folio.document_cache.hits") - hitsBefore;
        long misses = recorded.GetValueOrDefault("folio.document_cache.misses") - missesBefore;
        Assert.Equal(200, hits + misses);
        Assert.InRange(hits, 180, 198);

        await store.PutAsync("Item", "i8", Json(-8));
        await store.CheckpointAsync();
        hitsBefore = recorded.GetValueOrDefault("folio.document_cache.hits");
        missesBefore = recorded.GetValueOrDefault("folio.document_cache.misses");
        for (int i = 0; i <= 200; i++)
        {
            int? expected = i switch { 5 => -5, 6 => null, 8 => -8, _ => i };
            Assert.Equal(expected, JsonValue(store.Get("Item", $"i{i}")));
        }

        hits = recorded.GetValueOrDefault("folio.document_cache.hits") - hitsBefore;
        misses = recorded.GetValueOrDefault("folio.document_cache.misses") - missesBefore;
        Assert.Equal(200, hits + misses);
        Assert.InRange(hits, 180, 199);

        // A checkpoint that changes a document nobody reads next, then one that leaves the collection alone (its
        // tree, and so what it shares with the tree before, carries over): the document still reads its new value.
        await store.PutAsync("Item", "i9", Json(-9));
        await store.CheckpointAsync();
        long third = store.Index.TreeCacheKey("Item");
        await store.PutAsync("Other", "o1", Json(-1));
        await store.CheckpointAsync();
        Assert.Equal(third, store.Index.TreeCacheKey("Item"));
        Assert.Equal(-9, JsonValue(store.Get("Item", "i9")));
        Assert.Equal(-8, JsonValue(store.Get("Item", "i8")));
        Assert.Equal(10, JsonValue(store.Get("Item", "i10")));
        Assert.Equal(-1, JsonValue(store.Get("Other", "o1")));
    }

    [Fact]
    public async Task Range_reads_and_writes_leave_the_cache_empty_and_a_store_without_one_reads_the_same()
    {
        using var dir = new TempDirectory();
        await FillAsync(dir.Path);
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints()))
        {
            await using (DocumentSession session = store.OpenSession())
            {
                int read = 0;
                await foreach (Item item in session.QueryByPrefixAsync<Item>("i"))
                {
                    read++;
                }

                Assert.Equal(200, read);
            }

            await store.PutAsync("Item", "i3", Json(-3));
            await store.WriteAsync(new CommitBatch().Put("Item", "i4", Json(-4)).Delete("Item", "i8"));
            Assert.Equal(0, store.Index.DocumentCache!.Count);
        }

        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.DocumentCacheSize = 0;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            Assert.Null(store.Index.DocumentCache);
            Assert.Equal(-3, JsonValue(store.Get("Item", "i3")));
            Assert.Equal(-4, JsonValue(store.Get("Item", "i4")));
            Assert.Null(store.Get("Item", "i8"));
            Assert.Equal(9, JsonValue(store.Get("Item", "i9")));
        }
    }

    [Fact]
    public async Task The_cache_takes_slots_for_the_documents_the_checkpoint_holds_and_more_as_they_grow()
    {
        using var dir = new TempDirectory();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints()))
        {
            Assert.Equal(64, store.Index.DocumentCache!.Slots); // a store of no documents takes 1 KiB
            for (int i = 0; i < 10_000; i += 1000)
            {
                var batch = new CommitBatch();
                for (int j = i; j < i + 1000; j++)
                {
                    batch.Put("Item", $"i{j}", Json(j));
                }

                await store.WriteAsync(batch);
            }

            await store.CheckpointAsync();
            Assert.InRange(store.Index.DocumentCache!.Slots, 40_000, 160_000); // 4 a document, room to double
            Assert.Equal(7, JsonValue(store.Get("Item", "i7")));
            Assert.Equal(1, store.Index.DocumentCache.Count);
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints()))
        {
            Assert.InRange(store.Index.DocumentCache!.Slots, 40_000, 160_000); // sized at the open
            Assert.Equal(9_999, JsonValue(store.Get("Item", "i9999")));
        }
    }

    [Fact]
    public async Task By_default_the_document_cache_takes_a_quarter_of_the_page_cache()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = 4L << 20;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        Assert.InRange(store.Index.DocumentCache!.Budget, (1L << 20) * 11 / 12, 1L << 20); // its arrays take the rest
    }

    [Theory]
    [InlineData(1L)]
    [InlineData(DocumentStoreOptions.MinDocumentCacheSize - 1)]
    [InlineData(-1L)]
    public void A_document_cache_below_64_KiB_but_not_0_is_refused_at_open(long size)
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { DocumentCacheSize = size };
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.DocumentCacheSize), error.ParamName);
        Assert.Empty(Directory.EnumerateFileSystemEntries(dir.Path));
    }

    /// <summary>Documents i0..i199 of Item and o0..o199 of Other, value n; closed, so the checkpoint holds
    /// them.</summary>
    private static async Task FillAsync(string folder)
    {
        await using DocumentStore store = DocumentStore.Open(folder, TestStoreOptions.ManualCheckpoints());
        var batch = new CommitBatch();
        for (int i = 0; i < 200; i++)
        {
            batch.Put("Item", $"i{i}", Json(i)).Put("Other", $"o{i}", Json(i));
        }

        await store.WriteAsync(batch);
    }

    private static byte[] Json(int value) => Encoding.UTF8.GetBytes($$"""{"Value":{{value}}}""");

    private static int? JsonValue(StoredDocument? document) => DamagedPageTests.JsonValue(document);

    private sealed class Item
    {
        public string Id { get; set; } = "";

        public int Value { get; set; }
    }

    private static string Id(int n) => $"documents/{n:D6}";

    /// <summary>Enough documents that a cache takes every slot its budget allows.</summary>
    private const long Documents = 1L << 30;

    private static DocumentCache Cache(long budget) => new(budget, Documents);

    /// <summary>Document <paramref name="id"/> as tree <paramref name="tree"/> holds it: its bytes, sequence and
    /// time all name both.</summary>
    private static DocumentVersion Version(int tree, int id) => new(tree * 1_000_000L + id, id * 7L,
        Encoding.UTF8.GetBytes($"{{\"tree\":{tree},\"id\":{id},\"pad\":\"{new string('p', id % 90)}\"}}"),
        isDeleted: false);

    private static void AssertIs(int tree, int id, DocumentVersion found)
    {
        DocumentVersion expected = Version(tree, id);
        Assert.Equal(expected.Sequence, found.Sequence);
        Assert.Equal(expected.TimestampTicks, found.TimestampTicks);
        Assert.Equal(Encoding.UTF8.GetString(expected.Json.Span), Encoding.UTF8.GetString(found.Json.Span));
        Assert.False(found.IsDeleted);
    }
}
