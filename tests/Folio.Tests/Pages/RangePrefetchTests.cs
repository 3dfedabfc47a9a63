using System.Collections.Concurrent;
using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// Range cursors' prefetch (seed 004): what a walk asks for (only leaves it will read, up to the far bound or the
/// entries it expects, within a window; nothing for unbounded or hot scans), and the worker that reads them (a
/// bounded queue that drops the oldest request, a stop while a checkpoint writes, reads that fill the cache).
/// </summary>
public sealed class RangePrefetchTests
{
    private const int Documents = 20_000;

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void A_bounded_walk_asks_only_for_leaves_it_then_reads_and_never_past_its_bound(bool descending)
    {
        using var dir = new TempDirectory();
        using PageStore store = Build(dir);
        PageReference root = store.Current.Collections["c"].Root!;
        var random = new Random(5);
        for (int trial = 0; trial < 40; trial++)
        {
            int from = random.Next(Documents - 2_000);
            int length = 1 + random.Next(trial % 2 == 0 ? 300 : 2_000);
            var reader = new RecordingReader(store.Cache);
            List<string> ids = BTree.Range(root, Id(from), Id(from + length), descending, reader)
                .Select(entry => entry.Key).ToList();

            Assert.Equal(length, ids.Count);
            var read = new HashSet<PagePosition>(reader.Read);
            foreach (PagePosition[] request in reader.Requests)
            {
                Assert.InRange(request.Length, BTree.PrefetchMinimum, BTree.PrefetchWindow);
                foreach (PagePosition asked in request)
                {
                    Assert.True(read.Contains(asked), $"{asked} was asked for but the walk never read it");
                    TreeNode leaf = store.Cache.ReadNode(asked);
                    Assert.True(leaf.IsLeaf);
                    Assert.True(string.CompareOrdinal(leaf.KeyAt(0), Id(from + length)) < 0
                        && string.CompareOrdinal(leaf.KeyAt(leaf.Count - 1), Id(from)) >= 0,
                        $"{asked} holds {leaf.KeyAt(0)}..{leaf.KeyAt(leaf.Count - 1)}, outside the range");
                }
            }

            Assert.Equal(reader.Asked.Count, reader.Asked.Distinct().Count());
            if (length > 1_000)
            {
                Assert.True(reader.Asked.Count > 0, "a walk over many leaves asked for none");
            }
        }
    }

    [Fact]
    public void A_walk_bounded_by_its_expected_entries_asks_for_about_the_leaves_they_need()
    {
        using var dir = new TempDirectory();
        using PageStore store = Build(dir);
        PageReference root = store.Current.Collections["c"].Root!;
        var reader = new RecordingReader(store.Cache);
        int taken = BTree.Range(root, Id(5_000), null, false, reader, expectedEntries: 300).Take(300).Count();

        Assert.Equal(300, taken);
        List<PagePosition> asked = reader.Asked;
        Assert.NotEmpty(asked);
        var read = new HashSet<PagePosition>(reader.Read);
        Assert.All(asked, position => Assert.Contains(position, read));

        // Later walks know the leaves' depth and size from the root, and ask for the leaves after their first one
        // before reading it; the estimate of the first leaf's share may ask for one leaf more than they read.
        Assert.True(root.LeafDepthHint > 0 && root.EntriesPerLeafHint > 0);
        var random = new Random(9);
        for (int walk = 0; walk < 20; walk++)
        {
            var later = new RecordingReader(store.Cache);
            int from = random.Next(Documents - 1_000);
            Assert.Equal(300, BTree.Range(root, Id(from), null, false, later, expectedEntries: 300).Take(300)
                .Count());
            int leavesRead = later.Read.Count(position => store.Cache.ReadNode(position).IsLeaf);
            Assert.True(later.Requests.Count > 0 && later.Read.IndexOf(later.Requests[0][0]) > 0);
            Assert.InRange(later.Asked.Count(position => !later.Read.Contains(position)), 0, 1);
            Assert.InRange(later.Asked.Count, leavesRead - 2, leavesRead);
            Assert.True(later.AskedBeforeFirstLeaf, "the walk read its first leaf before asking for the next ones");
        }
    }

    [Fact]
    public void An_unbounded_walk_a_hot_walk_and_a_short_walk_ask_for_nothing()
    {
        using var dir = new TempDirectory();
        using PageStore store = Build(dir);
        PageReference root = store.Current.Collections["c"].Root!;

        var unbounded = new RecordingReader(store.Cache);
        Assert.Equal(Documents - 100, BTree.Range(root, Id(100), null, false, unbounded).Count());
        Assert.Empty(unbounded.Requests);

        var hot = new RecordingReader(store.Cache, everythingCached: true);
        Assert.Equal(3_000, BTree.Range(root, Id(100), Id(3_100), false, hot).Count());
        Assert.Empty(hot.Requests);

        var single = new RecordingReader(store.Cache);
        Assert.Equal(3, BTree.Range(root, Id(100), Id(103), false, single).Count());
        Assert.Empty(single.Requests);

        var off = new RecordingReader(store.Cache, enabled: false);
        Assert.Equal(3_000, BTree.Range(root, Id(100), Id(3_100), false, off).Count());
        Assert.Empty(off.Requests);
    }

    [Fact]
    public void The_worker_reads_asked_for_leaves_into_the_cache_so_the_walk_finds_them_there()
    {
        using var dir = new TempDirectory();
        RecordingReader recorder;
        using (PageStore built = Build(dir))
        {
            recorder = new RecordingReader(built.Cache);
            Assert.Equal(4_000, BTree.Range(built.Current.Collections["c"].Root, Id(2_000), Id(6_000), false,
                recorder).Count());
        }

        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        PageReference root = store.Current.Collections["c"].Root!;
        List<PagePosition> asked = recorder.Asked;
        Assert.True(asked.Count > 10, $"{asked.Count} leaves asked for");
        Assert.DoesNotContain(asked, store.Cache.IsCached); // a new pool

        foreach (PagePosition[] request in recorder.Requests)
        {
            store.Cache.Prefetch(request);
            Assert.True(store.Cache.Prefetcher!.WaitIdle(TimeSpan.FromSeconds(30)));
        }

        Assert.All(asked, position => Assert.True(store.Cache.IsCached(position), $"{position} not prefetched"));
        Assert.Equal(asked.Count, store.Cache.Pool.Prefetched);
        long misses = store.Cache.Pool.Misses;
        List<string> ids = BTree.Range(root, Id(2_000), Id(6_000), false, new RecordingReader(store.Cache,
            enabled: false)).Select(e => e.Key).ToList();
        Assert.Equal(Enumerable.Range(2_000, 4_000).Select(Id), ids);
        Assert.Equal(asked.Count, store.Cache.Pool.PrefetchUsed);
        Assert.True(store.Cache.Pool.Misses - misses <= recorder.Read.Count - asked.Count + BTree.ResidentLevels,
            $"{store.Cache.Pool.Misses - misses} misses, {recorder.Read.Count} read, {asked.Count} asked");
    }

    [Fact]
    public void A_full_queue_drops_its_oldest_request_and_counts_its_pages()
    {
        using var gate = new ManualResetEventSlim();
        var read = new ConcurrentQueue<int>();
        var dropped = 0;
        using var prefetcher = new PagePrefetcher((pages, _) =>
        {
            gate.Wait();
            read.Enqueue(pages.Length);
            return 0;
        }, count => Interlocked.Add(ref dropped, count));

        prefetcher.Request(Positions(1)); // taken by the worker, which then blocks
        Assert.True(SpinWait.SpinUntil(() => prefetcher.Queued == 0, TimeSpan.FromSeconds(10)));
        for (int request = 2; request <= 2 + PagePrefetcher.QueueCapacity; request++)
        {
            prefetcher.Request(Positions(request));
        }

        gate.Set();
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(2, dropped); // the oldest queued request (2 pages) was pushed out by the fifth
        Assert.Equal(2, prefetcher.DroppedPages);
        Assert.Equal([1, 3, 4, 5, 6], read.ToArray());
    }

    [Fact]
    public void A_checkpoint_writing_stops_a_started_request_before_its_next_read()
    {
        using var started = new ManualResetEventSlim();
        using var resume = new ManualResetEventSlim();
        int readPages = 0;
        using var prefetcher = new PagePrefetcher((pages, shouldStop) =>
        {
            int unread = 0;
            for (int i = 0; i < pages.Length; i++)
            {
                if (shouldStop())
                {
                    unread++;
                    continue;
                }

                readPages++;
                started.Set();
                resume.Wait();
            }

            return unread;
        }, _ => { });

        prefetcher.Request(Positions(6));
        Assert.True(started.Wait(TimeSpan.FromSeconds(10)));
        prefetcher.WritePriority = true; // a checkpoint starts writing while the first page is being read
        resume.Set();
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(1, readPages);
        Assert.Equal(5, prefetcher.DroppedPages);

        prefetcher.Request(Positions(3)); // still writing: dropped without a read
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(1, readPages);
        Assert.Equal(8, prefetcher.DroppedPages);

        prefetcher.WritePriority = false;
        prefetcher.Request(Positions(2));
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(3, readPages);
    }

    [Fact]
    public void Requests_are_dropped_unread_while_commits_are_in_flight()
    {
        int readPages = 0;
        bool committing = true;
        using var prefetcher = new PagePrefetcher((pages, shouldStop) =>
        {
            int unread = 0;
            foreach (PagePosition _ in pages)
            {
                if (shouldStop())
                {
                    unread++;
                }
                else
                {
                    readPages++;
                }
            }

            return unread;
        }, _ => { });
        prefetcher.YieldToCommits(() => Volatile.Read(ref committing));

        prefetcher.Request(Positions(4));
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(0, readPages);
        Assert.Equal(4, prefetcher.DroppedPages);

        Volatile.Write(ref committing, false);
        prefetcher.Request(Positions(3));
        Assert.True(prefetcher.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(3, readPages);
    }

    [Fact]
    public async Task A_store_drops_prefetch_while_its_writers_commit_and_reads_stay_correct()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = DocumentStoreOptions.MinCacheSize;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 4_000; i += 200)
        {
            var batch = new CommitBatch();
            for (int j = i; j < i + 200; j++)
            {
                batch.Put("Doc", Id(j), System.Text.Encoding.UTF8.GetBytes(
                    $$"""{"N":{{j}},"Pad":"{{new string('x', 900)}}"}"""));
            }

            await store.WriteAsync(batch);
        }

        await store.CheckpointAsync();
        using var stop = new CancellationTokenSource();
        Task writers = Task.WhenAll(Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                await store.PutAsync("w", $"w{w}/{n:D6}", "{}"u8.ToArray());
            }
        })));
        var random = new Random(3);
        for (int scan = 0; scan < 40; scan++)
        {
            int from = random.Next(3_800);
            await using DocumentSession session = store.OpenSession();
            int count = 0;
            await foreach (Doc document in session.QueryByRangeAsync<Doc>(Id(from), Id(from + 150)))
            {
                Assert.Equal(from + count, document.N);
                count++;
            }

            Assert.Equal(150, count);
        }

        stop.Cancel();
        await writers;
        Assert.True(store.Pages.Cache.Prefetcher!.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(0, store.Pages.Cache.Pool.PinnedFrames);
    }

    [Fact]
    public void Disposing_waits_for_the_read_in_progress_and_later_requests_are_ignored()
    {
        using var reading = new ManualResetEventSlim();
        int finished = 0;
        var prefetcher = new PagePrefetcher((pages, shouldStop) =>
        {
            reading.Set();
            Thread.Sleep(200);
            Volatile.Write(ref finished, 1);
            return 0;
        }, _ => { });
        prefetcher.Request(Positions(1));
        Assert.True(reading.Wait(TimeSpan.FromSeconds(10)));
        prefetcher.Dispose();
        Assert.Equal(1, Volatile.Read(ref finished));
        prefetcher.Request(Positions(1));
        prefetcher.Dispose();
        Assert.Equal(1, prefetcher.Requests);
    }

    [Fact]
    public void Prefetch_reads_of_a_chunk_freed_after_the_request_are_dropped_not_reported()
    {
        using var dir = new TempDirectory();
        using PageStore store = Build(dir);
        var missing = new[] { new PagePosition(9_999, 0), new PagePosition(9_999, 1) };
        store.Cache.Prefetch(missing);
        Assert.True(store.Cache.Prefetcher!.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(0, store.Cache.Pool.Prefetched);
        Assert.Equal(2, store.Cache.Prefetcher.DroppedPages);
        Assert.Equal(Documents, BTree.Range(store.Current.Collections["c"].Root, null, null, false, store.Reader)
            .Count());
    }

    private static PagePosition[] Positions(int count) =>
        Enumerable.Range(0, count).Select(i => new PagePosition(1, (uint)i)).ToArray();

    private static string Id(int number) => $"doc/{number:D6}";

    private sealed class Doc
    {
        public int N { get; set; }
    }

    private static PageStoreModel Model()
    {
        var model = new PageStoreModel();
        for (int i = 0; i < Documents; i++)
        {
            model.Put("c", Id(i), PageStoreModel.Value(i, 300));
        }

        return model;
    }

    /// <summary>A store of <see cref="Documents"/> entries of about 300 bytes in one collection (about 20 a leaf),
    /// checkpointed, with its leaves dropped from memory and a cache that holds all of them.</summary>
    private static PageStore Build(TempDirectory dir)
    {
        PageStoreModel model = Model();
        PageStore store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        store.Checkpoint(model.Sequence, model.Changes());
        model.Checkpointed();
        return store;
    }

    /// <summary>Reads through a cache, recording the pages the walk reads and the requests it makes (not passed
    /// on).</summary>
    private sealed class RecordingReader(PageCache cache, bool everythingCached = false, bool enabled = true)
        : IPageReader
    {
        public List<PagePosition> Read { get; } = [];

        public List<PagePosition[]> Requests { get; } = [];

        /// <summary>Every page of every request, in order.</summary>
        public List<PagePosition> Asked => Requests.SelectMany(request => request).ToList();

        public bool PrefetchEnabled => enabled;

        /// <summary>Whether the first request came before the first leaf was read.</summary>
        public bool AskedBeforeFirstLeaf { get; private set; }

        public PinnedPage Pin(PagePosition position)
        {
            Read.Add(position);
            return cache.Pin(position);
        }

        public TreeNode ReadNode(PagePosition position)
        {
            Read.Add(position);
            return cache.ReadNode(position);
        }

        public ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length) =>
            cache.ReadOverflow(position, length);

        public bool IsCached(PagePosition position) => everythingCached;

        public void Prefetch(PagePosition[] positions)
        {
            if (Requests.Count == 0)
            {
                AskedBeforeFirstLeaf = !Read.Any(position => cache.ReadNode(position).IsLeaf);
            }

            Requests.Add(positions);
        }
    }
}
