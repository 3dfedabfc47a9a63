using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// <see cref="DocumentStoreOptions.CacheSize"/> through the public API: a store many times larger than its cache
/// reads every document back, by id and by range, before and after a reopen, while pages are evicted, read through
/// the page cache or around it; reads around it beside a writer, its checkpoints and compaction see every version
/// acknowledged before they start; the read mode follows the data file's size; bounded
/// queries read ahead and return the same documents as without; and a cache below the minimum is refused at open.
/// </summary>
public sealed class StoreCacheTests
{
    private static readonly System.Text.Json.JsonSerializerOptions s_json = new()
    {
        PropertyNameCaseInsensitive = true,
    };

    [Theory]
    [InlineData(DataFileReadMode.Buffered)]
    [InlineData(DataFileReadMode.Direct)]
    public async Task A_store_twenty_times_larger_than_its_cache_reads_every_document_back_by_id_and_by_range(
        DataFileReadMode reads)
    {
        using var dir = new TempDirectory();
        const int Documents = 14_000;
        DocumentStoreOptions Options()
        {
            DocumentStoreOptions options = SmallCacheOptions();
            options.DataFileReads = reads;
            return options;
        }

        await using (var store = DocumentStore.Open(dir.Path, Options()))
        {
            // Direct reads from the start: the pages the checkpoints write are read back around the page cache.
            Assert.Equal(reads == DataFileReadMode.Direct, store.Pages.Cache.ReadsDirect);
            await StoreAndCheckpoint(store, Documents);
            Assert.True(store.Pages.UsedBytes > 20 * DocumentStoreOptions.MinCacheSize,
                $"the data file holds {store.Pages.UsedBytes} bytes");
            await AssertEveryDocument(store);
            Assert.True(store.Pages.Cache.Pool.Evictions > 1_000, "pages were evicted and read again");
        }

        await using (var reopened = DocumentStore.Open(dir.Path, Options()))
        {
            Assert.Equal(reads == DataFileReadMode.Direct, reopened.Pages.Cache.ReadsDirect);
            await AssertEveryDocument(reopened);
            Assert.Equal(0, reopened.Pages.Cache.Pool.PinnedFrames);
        }

        static async Task AssertEveryDocument(DocumentStore store)
        {
            // Point reads in an order that defeats any locality, then one range in id order.
            for (int n = 0; n < Documents; n++)
            {
                int i = (int)((n * 7919L) % Documents);
                StoredDocument document = store.Get("Item", Id(i)) ?? throw new Xunit.Sdk.XunitException($"{Id(i)}");
                Assert.Contains(Body(i), Encoding.UTF8.GetString(document.Json.Span), StringComparison.Ordinal);
            }

            await using DocumentSession session = store.OpenSession();
            int next = 0;
            await foreach (Item item in session.QueryByRangeAsync<Item>(Id(0), null))
            {
                Assert.Equal(Id(next), item.Key);
                Assert.Equal(Body(next), item.Body);
                next++;
            }

            Assert.Equal(Documents, next);
            Assert.Equal(0, store.Pages.Cache.Pool.PinnedFrames);
        }
    }

    [Fact]
    public async Task Direct_reads_beside_a_writer_checkpoints_and_compaction_see_every_acknowledged_version()
    {
        using var dir = new TempDirectory();
        const int Documents = 3_000;
        DocumentStoreOptions options = SmallCacheOptions();
        options.DataFileReads = DataFileReadMode.Direct;
        options.Durability = DurabilityMode.Buffered;
        options.CompactionFillRate = 0.9; // checkpoints move the leaves they rewrite, and compaction the rest
        await using var store = DocumentStore.Open(dir.Path, options);
        await StoreAndCheckpoint(store, Documents);
        long firstGeneration = store.Pages.Current.Generation;
        long evictionsBefore = store.Pages.Cache.Pool.Evictions;

        // Each document's newest acknowledged version: written by the writer after its commit returns (release),
        // read by a reader before its read starts (acquire), so every read must return that version or a newer one.
        long[] acknowledged = new long[Documents];
        using var stop = new CancellationTokenSource(TimeSpan.FromMinutes(2)); // the writer stops it far sooner
        const int Rounds = 200;
        int written = 0;
        long reads = 0;
        long scanned = 0;

        async Task Write()
        {
            var random = new Random(1);
            for (int round = 1; round <= Rounds && !stop.IsCancellationRequested; round++)
            {
                if (round % 20 == 0)
                {
                    await store.CheckpointAsync();
                }

                await using DocumentSession session = store.OpenSession();
                var batch = new HashSet<int>();
                while (batch.Count < 8)
                {
                    batch.Add(random.Next(Documents));
                }

                foreach (int i in batch)
                {
                    session.Store(new Item { Key = Id(i), Body = Versioned(i, acknowledged[i] + 1) }, Id(i));
                }

                await session.SaveChangesAsync();
                foreach (int i in batch)
                {
                    Volatile.Write(ref acknowledged[i], acknowledged[i] + 1); // only this task writes the array
                }

                written = round;
            }

            await stop.CancelAsync();
        }

        void Read(int seed)
        {
            var random = new Random(seed);
            while (!stop.IsCancellationRequested)
            {
                int i = random.Next(Documents);
                long floor = Volatile.Read(ref acknowledged[i]);
                StoredDocument document = store.Get("Item", Id(i)) ?? throw new Xunit.Sdk.XunitException(Id(i));
                Item item = System.Text.Json.JsonSerializer.Deserialize<Item>(document.Json.Span, s_json)!;
                Assert.Equal(Id(i), item.Key);
                AssertVersion(i, floor, item.Body);
                Interlocked.Increment(ref reads);
            }
        }

        async Task Scan(int seed)
        {
            var random = new Random(seed);
            long[] floors = new long[60];
            while (!stop.IsCancellationRequested)
            {
                int from = random.Next(Documents - floors.Length);
                for (int k = 0; k < floors.Length; k++)
                {
                    floors[k] = Volatile.Read(ref acknowledged[from + k]);
                }

                await using DocumentSession session = store.OpenSession();
                int next = from;
                await foreach (Item item in session.QueryByRangeAsync<Item>(Id(from), Id(from + floors.Length)))
                {
                    Assert.Equal(Id(next), item.Key);
                    AssertVersion(next, floors[next - from], item.Body);
                    next++;
                }

                Assert.Equal(from + floors.Length, next);
                Interlocked.Add(ref scanned, floors.Length);
            }
        }

        await Task.WhenAll(Task.Run(Write), Task.Run(() => Read(2)), Task.Run(() => Read(3)), Task.Run(() => Scan(4)));

        Assert.Equal(Rounds, written);
        Assert.True(store.Pages.Cache.ReadsDirect);
        Assert.True(store.Pages.Current.Generation > firstGeneration + 5,
            $"checkpoints {firstGeneration} to {store.Pages.Current.Generation}");
        Assert.True(store.Pages.Cache.Pool.Evictions > evictionsBefore + 500, "pages were evicted and read again");
        Assert.True(reads > 1_000 && scanned > 1_000, $"{reads} reads, {scanned} documents scanned");

        // Background compaction's checkpoints may still hold a page for a moment; a pin leaked stays for good.
        var settle = System.Diagnostics.Stopwatch.StartNew();
        while (store.Pages.Cache.Pool.PinnedFrames != 0 && settle.Elapsed < TimeSpan.FromSeconds(10))
        {
            await Task.Delay(10);
        }

        Assert.Equal(0, store.Pages.Cache.Pool.PinnedFrames);

        // Version 0 is Body(i), "{i}:" and letters; version v is "{i}:#v#" and padding.
        static string Versioned(int i, long version) => $"{i}:#{version}#" + new string('x', 1_200);

        static void AssertVersion(int i, long floor, string body)
        {
            string prefix = $"{i}:";
            Assert.True(body.StartsWith(prefix, StringComparison.Ordinal), $"document {i} holds {body[..20]}");
            long version = 0;
            if (body[prefix.Length] == '#')
            {
                int end = body.IndexOf('#', prefix.Length + 1);
                version = long.Parse(body.AsSpan(prefix.Length + 1, end - prefix.Length - 1),
                    System.Globalization.CultureInfo.InvariantCulture);
                Assert.Equal(Versioned(i, version), body);
            }
            else
            {
                Assert.Equal(Body(i), body);
            }

            Assert.True(version >= floor, $"document {i} read at version {version}, {floor} acknowledged before");
        }
    }

    [Fact]
    public async Task Bounded_queries_read_ahead_and_return_exactly_what_they_return_without_prefetch()
    {
        using var dir = new TempDirectory();
        using var meters = new TestMeterFactory();
        DocumentStoreOptions Options(bool prefetch)
        {
            DocumentStoreOptions options = SmallCacheOptions();
            options.RangePrefetch = prefetch;
            options.MeterFactory = meters;
            return options;
        }

        const int Documents = 8_000;
        await using (var store = DocumentStore.Open(dir.Path, Options(prefetch: true)))
        {
            await StoreAndCheckpoint(store, Documents);
            for (int j = 0; j < Documents; j += 7)
            {
                await store.DeleteAsync("Item", Id(j)); // holes, in memory, that the walks skip
            }
        }

        using System.Diagnostics.Metrics.MeterListener listener = meters.ListenToTotals(
            out System.Collections.Concurrent.ConcurrentDictionary<string, long> recorded);
        List<string> with = await Queries(prefetch: true);
        List<string> without = await Queries(prefetch: false);
        Assert.Equal(without, with);
        // The cursors asked for pages ahead; how many the worker read before its small queue dropped them depends on
        // how much of the machine its lowest-priority thread gets (under a loaded test run, few), so the pages asked
        // for are counted whether read or dropped.
        long issued = recorded.GetValueOrDefault("folio.cache.prefetch.issued");
        long dropped = recorded.GetValueOrDefault("folio.cache.prefetch.dropped");
        long used = recorded.GetValueOrDefault("folio.cache.prefetch.used");
        Assert.True(issued + dropped > 50, $"{issued} pages prefetched and {dropped} dropped");
        Assert.True(used <= issued, $"{used} prefetched pages used of {issued}");

        async Task<List<string>> Queries(bool prefetch)
        {
            var seen = new List<string>();
            await using var store = DocumentStore.Open(dir.Path, Options(prefetch));
            var random = new Random(11);
            for (int query = 0; query < 150; query++)
            {
                int from = random.Next(Documents);
                int length = 1 + random.Next(400);
                bool descending = random.Next(2) == 0;
                await using DocumentSession session = store.OpenSession();
                IAsyncEnumerable<Item> items = (query % 3) switch
                {
                    0 => session.QueryByRangeAsync<Item>(Id(from), Id(from + length), descending),
                    1 => session.QueryByRangeAsync<Item>(Id(from), null, descending, skip: random.Next(20),
                        take: length),
                    _ => session.QueryByPrefixAsync<Item>(Id(from)[..^2], descending),
                };
                seen.Add($"query {query}");
                await foreach (Item item in items)
                {
                    Assert.Equal(Body(int.Parse(item.Key[6..], System.Globalization.CultureInfo.InvariantCulture)),
                        item.Body);
                    seen.Add(item.Key);
                }
            }

            if (store.Pages.Cache.Prefetcher is { } prefetcher)
            {
                Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
            }

            Assert.Equal(0, store.Pages.Cache.Pool.PinnedFrames);
            return seen;
        }
    }

    [Fact]
    public async Task Automatic_reads_go_around_the_page_cache_once_the_data_file_outgrows_the_memory_beyond_the_cache()
    {
        using var dir = new TempDirectory();
        using var logs = new CapturingLoggerFactory();
        const long Beyond = 3L << 20; // the memory the process may use beyond its cache
        DocumentStoreOptions Options(DataFileReadMode reads)
        {
            DocumentStoreOptions options = SmallCacheOptions();
            options.DataFileReads = reads;
            options.FixedAvailableMemory = options.CacheSize + Beyond;
            options.LoggerFactory = logs;
            return options;
        }

        await using (var store = DocumentStore.Open(dir.Path, Options(DataFileReadMode.Automatic)))
        {
            Assert.False(store.Pages.Cache.ReadsDirect);
            int stored = 0;
            while (store.Pages.FileLength <= Beyond)
            {
                Assert.False(store.Pages.Cache.ReadsDirect, $"direct at {store.Pages.FileLength} bytes");
                await StoreAndCheckpoint(store, 500, stored);
                stored += 500;
            }

            // The checkpoint that took the file past the bound switched the reads, said so once, and they read right.
            Assert.True(store.Pages.Cache.ReadsDirect, $"buffered at {store.Pages.FileLength} bytes");
            Assert.Single(logs.Lines, line => line.Id.Id == 5007 && line.Message.Contains("is now read around",
                StringComparison.Ordinal));
            for (int i = 0; i < stored; i += 37)
            {
                Assert.Contains(Body(i), Encoding.UTF8.GetString(store.Get("Item", Id(i))!.Value.Json.Span),
                    StringComparison.Ordinal);
            }
        }

        await using (var reopened = DocumentStore.Open(dir.Path, Options(DataFileReadMode.Automatic)))
        {
            Assert.True(reopened.Pages.Cache.ReadsDirect, "decided at the open too");
            Assert.Equal(2, logs.Lines.Count(line => line.Id.Id == 5007));
        }

        await using (var buffered = DocumentStore.Open(dir.Path, Options(DataFileReadMode.Buffered)))
        {
            Assert.False(buffered.Pages.Cache.ReadsDirect, "Buffered never reads around the page cache");
        }
    }

    [Fact]
    public void A_read_mode_that_is_not_one_of_the_three_is_refused_at_open()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { DataFileReads = (DataFileReadMode)3 };
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.DataFileReads), error.ParamName);
        Assert.Empty(Directory.EnumerateFileSystemEntries(dir.Path));
    }

    [Fact]
    public void A_cache_below_one_mebibyte_is_refused_at_open()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { CacheSize = DocumentStoreOptions.MinCacheSize - 1 };
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.CacheSize), error.ParamName);
        Assert.Empty(Directory.EnumerateFileSystemEntries(dir.Path));
    }

    [Fact]
    public async Task A_cache_the_operating_system_cannot_reserve_fails_the_open_by_its_option_and_frees_the_store()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { CacheSize = long.MaxValue / 2 };
        var error = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.CacheSize), error.ParamName);
        Assert.Contains("more than this process can have", error.Message, StringComparison.Ordinal);

        // The failed open released the folder's lock and files.
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        Assert.Equal(1, await store.PutAsync("c", "a", "{}"u8.ToArray()));
    }

    /// <summary>The smallest cache, and no background checkpoint or compaction: the tests assert that no frame stays
    /// pinned once their reads are done, and a compaction pass the checkpoint thread started at the open (the close's
    /// checkpoint of deletes left a quarter of the file free) pins the pages it copies meanwhile.</summary>
    private static DocumentStoreOptions SmallCacheOptions()
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = DocumentStoreOptions.MinCacheSize;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CompactionFillRate = 0;
        return options;
    }

    /// <summary>Stores items <paramref name="first"/> to <paramref name="first"/> + <paramref name="count"/> - 1,
    /// 500 a session, then checkpoints.</summary>
    private static async Task StoreAndCheckpoint(DocumentStore store, int count, int first = 0)
    {
        for (int i = first; i < first + count; i += 500)
        {
            await using DocumentSession session = store.OpenSession();
            for (int j = i; j < i + 500; j++)
            {
                session.Store(new Item { Key = Id(j), Body = Body(j) }, Id(j));
            }

            await session.SaveChangesAsync();
        }

        await store.CheckpointAsync();
    }

    private static string Id(int i) => $"items/{i:D6}";

    private static string Body(int i) => $"{i}:" + new string((char)('a' + (i % 26)), 1_600);

    private sealed class Item
    {
        public string Key { get; set; } = "";

        public string Body { get; set; } = "";
    }
}
