using System.Collections.Concurrent;
using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// Runs of neighbouring pages read together (<see cref="PageCache.ReadRun"/>): a range walk that needs a leaf the
/// cache does not hold reads it with the leaves after it that lie next to it in the file in one read; each page of a
/// run is checked on its own, a damaged one is left to the pin that needs it, and a run that cannot be read leaves
/// its pages to their pins. Each test runs with reads through the operating system's page cache and around it
/// (<see cref="PageCache.NoteFileLength"/>: direct reads, widened to <see cref="Alignment"/> on both ends).
/// </summary>
public sealed class RunReadTests
{
    private const int Documents = 20_000;

    /// <summary>What a direct read of the physical file system widens to.</summary>
    private const int Alignment = 4096;

    [Theory]
    [InlineData(false, false)]
    [InlineData(true, false)]
    [InlineData(false, true)]
    [InlineData(true, true)]
    public void A_cold_walk_reads_the_leaves_it_needs_next_to_its_first_one_with_one_read(bool descending,
        bool direct)
    {
        using var dir = new TempDirectory();
        string path = Build(dir);
        var files = new ReadRecordingFileSystem();
        using PageStore store = Open(files, path, direct);
        PageReference root = store.Current.Collections["c"].Root!;
        Assert.Equal(Ids(100, 200, descending), Walk(store, root, 100, 200, descending)); // learns the leaves' depth

        var random = new Random(descending ? 11 : 7);
        int whole = 0; // walks whose leaves all came in one read
        for (int trial = 0; trial < 12; trial++)
        {
            int from = 1_000 + (trial * 1_500) + random.Next(500); // ranges no earlier walk came near
            var walked = new LeafRecordingReader(store.Cache);
            files.Reads.Clear();
            long misses = store.Cache.Pool.Misses;

            Assert.Equal(Ids(from, 150, descending), BTree.Range(root, Id(from), Id(from + 150), descending, walked,
                expectedEntries: 150).Select(entry => entry.Key).ToList());
            Assert.True(store.Cache.Prefetcher!.WaitIdle(TimeSpan.FromSeconds(30)));

            int leaves = walked.Leaves.Count;
            Assert.InRange(leaves, 3, BTree.PrefetchWindow + 1);
            List<(long Offset, int Length)> reads = files.Reads.ToList();
            long leafBytes = walked.Leaves.Sum(leaf => (long)store.Cache.Locate(leaf, out _));

            // The range's leaves were written back to back, so a run holds all of them under one parent: the walk
            // reads them with one read, or two when the range crosses to the next parent, besides the branch above
            // them (when no earlier walk read it). Every leaf it pinned was in the cache; no leaf was read twice.
            string seen = $"reads {string.Join(", ", reads)}; {leaves} leaves of {leafBytes} bytes";
            Assert.True(reads.Count >= 1 && reads.Count <= 3 && reads.Count < leaves, seen);
            int widened = direct ? 2 * Alignment : 0;
            Assert.True(reads.Sum(read => (long)read.Length - widened) <= leafBytes + (2 * PageCache.MaxRunGap), seen);
            Assert.All(reads, read => Assert.InRange(read.Length, 1, PageCache.MaxRunBytes + widened));
            Assert.All(reads, read => Assert.True(!direct || (read.Offset % Alignment == 0
                && read.Length % Alignment == 0), seen));
            Assert.InRange(store.Cache.Pool.Misses - misses, 0, 1);
            whole += reads.Any(read => read.Length >= leafBytes) ? 1 : 0;
        }

        Assert.True(whole >= 6, $"{whole} of 12 walks read their leaves with one read");
        Assert.Equal(0, store.Cache.Pool.PinnedFrames);
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void A_run_takes_the_pages_next_to_the_first_in_the_order_given_and_stops_at_the_first_that_is_not(
        bool direct)
    {
        using var dir = new TempDirectory();
        string path = Build(dir);
        List<PagePosition> leaves = LeavesOf(path, 0, Documents);
        var files = new ReadRecordingFileSystem();
        using PageStore store = Open(files, path, direct);
        Assert.Equal(direct, store.Cache.ReadsDirect);
        PageReference root = store.Current.Collections["c"].Root!;
        Assert.True(leaves.Count > 2 * PageCache.MaxRunPages);

        store.Cache.Locate(leaves[0], out _); // reads the chunk's table of contents
        PagePosition far = leaves[^3];

        // Ascending: the first three neighbours, then a leaf far away.
        files.Reads.Clear();
        Assert.Equal(3, store.Cache.ReadRun([leaves[10], leaves[11], leaves[12], far]));
        Assert.Single(files.Reads);
        Assert.True(store.Cache.IsCached(leaves[10]) && store.Cache.IsCached(leaves[12]));
        Assert.False(store.Cache.IsCached(far));

        // Descending offsets read as one run too.
        files.Reads.Clear();
        Assert.Equal(3, store.Cache.ReadRun([leaves[30], leaves[29], leaves[28]]));
        Assert.Single(files.Reads);

        // A first page already cached, or in no chunk, reads nothing.
        files.Reads.Clear();
        Assert.Equal(0, store.Cache.ReadRun([leaves[10], leaves[13]]));
        Assert.Equal(0, store.Cache.ReadRun([new PagePosition(9_999, 0), leaves[50]]));
        Assert.Empty(files.Reads);

        // A run never takes more than its byte and page bounds.
        PagePosition[] many = leaves.Skip(100).Take(3 * PageCache.MaxRunPages).ToArray();
        int covered = store.Cache.ReadRun(many);
        (long offset, int length) = Assert.Single(files.Reads);
        Assert.InRange(covered, 2, PageCache.MaxRunPages);
        Assert.InRange(length, 1, PageCache.MaxRunBytes + (direct ? 2 * Alignment : 0));
        Assert.Equal(direct, files.Direct > 0);
        Assert.All(many.Take(covered), position => Assert.True(store.Cache.IsCached(position)));
        Assert.False(store.Cache.IsCached(many[covered]));

        // Every page of a run reads back as the model wrote it.
        Assert.Equal(Enumerable.Range(0, Documents).Select(Id), BTree.Range(root, null, null, false, store.Reader)
            .Select(entry => entry.Key));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void A_damaged_leaf_inside_a_run_is_reported_by_the_walk_that_reaches_it_and_its_neighbours_still_load(
        bool direct)
    {
        using var dir = new TempDirectory();
        string path = Build(dir);
        List<PagePosition> leaves = LeavesOf(path, 6_000, 300);
        long damagedOffset;
        using (PageStore built = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            built.Cache.Locate(leaves[2], out damagedOffset);
        }

        Assert.True(leaves.Count >= 5);
        FileDamage.FlipByte(path, damagedOffset + 100, 0x10);

        using PageStore store = Open(PhysicalFileSystem.Instance, path, direct);
        PageReference root = store.Current.Collections["c"].Root!;
        Assert.Equal(Ids(100, 200, false), Walk(store, root, 100, 200, false)); // learns the leaves' depth

        var seen = new List<string>();
        var damage = Assert.Throws<StoreCorruptedException>(() =>
        {
            foreach (KeyValuePair<string, StoredValue> entry in BTree.Range(root, Id(6_000), Id(6_300), false,
                store.Reader, expectedEntries: 300))
            {
                seen.Add(entry.Key);
            }
        });

        Assert.Contains(path, damage.Message);
        Assert.Contains(damagedOffset.ToString(System.Globalization.CultureInfo.InvariantCulture), damage.Message);
        Assert.Equal(Ids(6_000, seen.Count, false), seen); // what came before the damage is right
        Assert.False(store.Cache.IsCached(leaves[2]));
        Assert.True(store.Cache.IsCached(leaves[3]), "the run left out the pages after the damaged one");
        Assert.Equal(0, store.Cache.Pool.PinnedFrames);

        // The leaves after the damaged one read right, from the cache.
        string after = store.Cache.ReadNode(leaves[3]).KeyAt(0);
        int start = int.Parse(after.AsSpan(4), System.Globalization.CultureInfo.InvariantCulture);
        Assert.Equal(Ids(start, 6_300 - start, false), Walk(store, root, start, 6_300 - start, false));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void A_run_whose_read_fails_leaves_its_pages_to_their_pins(bool direct)
    {
        using var dir = new TempDirectory();
        string path = Build(dir);
        List<PagePosition> leaves = LeavesOf(path, 9_000, 200);
        // Longer than any page read alone (widened to the alignment when direct), shorter than two leaves.
        var files = new ReadRecordingFileSystem
        {
            FailReadsLongerThan = PageCache.FrameSize + (direct ? 2 * Alignment : 0),
        };
        using PageStore store = Open(files, path, direct);
        PageReference root = store.Current.Collections["c"].Root!;
        Assert.Equal(Ids(100, 200, false), Walk(store, root, 100, 200, false));

        Assert.Equal(0, store.Cache.ReadRun(leaves.ToArray()));
        Assert.DoesNotContain(leaves, store.Cache.IsCached);
        Assert.True(files.Failed > 0);

        // A walk whose runs all fail reads each leaf alone, and right.
        Assert.Equal(Ids(9_000, 200, true), Walk(store, root, 9_000, 200, true));
        Assert.Equal(Ids(12_000, 150, false), Walk(store, root, 12_000, 150, false));
        Assert.True(store.Cache.Prefetcher!.WaitIdle(TimeSpan.FromSeconds(30)));
        Assert.Equal(0, store.Cache.Pool.PinnedFrames);
    }

    private static PageStore Open(IFileSystem files, string path, bool direct) =>
        PageStore.Open(files, path, prefetch: true, directReadsAbove: direct ? -1 : long.MaxValue);

    private static List<string> Walk(PageStore store, PageReference root, int from, int count, bool descending) =>
        BTree.Range(root, Id(from), Id(from + count), descending, store.Reader, expectedEntries: count)
            .Select(entry => entry.Key).ToList();

    /// <summary>The leaves holding ids <paramref name="from"/> to <paramref name="from"/> + <paramref name="count"/>
    /// - 1 in the data file at <paramref name="path"/>, in id order, found through a store of their own (so no cache
    /// of the caller's holds them).</summary>
    private static List<PagePosition> LeavesOf(string path, int from, int count)
    {
        using PageStore store = PageStore.Open(PhysicalFileSystem.Instance, path);
        var reader = new LeafRecordingReader(store.Cache, prefetch: false);
        Assert.Equal(count, BTree.Range(store.Current.Collections["c"].Root, Id(from), Id(from + count), false,
            reader).Count());
        return reader.Leaves;
    }

    private static List<string> Ids(int from, int count, bool descending)
    {
        IEnumerable<string> ids = Enumerable.Range(from, count).Select(Id);
        return (descending ? ids.Reverse() : ids).ToList();
    }

    private static string Id(int number) => $"doc/{number:D6}";

    /// <summary>A data file of <see cref="Documents"/> entries of about 300 bytes in one collection, written by one
    /// checkpoint (its leaves back to back in key order); returns its path.</summary>
    private static string Build(TempDirectory dir)
    {
        var model = new PageStoreModel();
        for (int i = 0; i < Documents; i++)
        {
            model.Put("c", Id(i), PageStoreModel.Value(i, 300));
        }

        string path = Path.Combine(dir.Path, "data.folio");
        using PageStore store = PageStore.Open(PhysicalFileSystem.Instance, path);
        store.Checkpoint(model.Sequence, model.Changes());
        return path;
    }

    /// <summary>Reads through a cache (runs included), recording the leaves a walk reads.</summary>
    private sealed class LeafRecordingReader(PageCache cache, bool prefetch = true) : IPageReader
    {
        public List<PagePosition> Leaves { get; } = [];

        public bool PrefetchEnabled => prefetch && cache.PrefetchEnabled;

        public PinnedPage Pin(PagePosition position) => cache.Pin(position);

        public TreeNode ReadNode(PagePosition position)
        {
            TreeNode node = cache.ReadNode(position);
            if (node.IsLeaf)
            {
                Leaves.Add(position);
            }

            return node;
        }

        public ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length) =>
            cache.ReadOverflow(position, length);

        public bool IsCached(PagePosition position) => cache.IsCached(position);

        public void Prefetch(PagePosition[] positions) => cache.Prefetch(positions);

        public int ReadRun(ReadOnlySpan<PagePosition> pages) => cache.ReadRun(pages);
    }

    /// <summary>The physical file system, recording the data file's reads (offset and length) and failing those longer
    /// than <see cref="FailReadsLongerThan"/> with an <see cref="IOException"/>.</summary>
    private sealed class ReadRecordingFileSystem : IFileSystem
    {
        private readonly IFileSystem _inner = PhysicalFileSystem.Instance;

        public ConcurrentQueue<(long Offset, int Length)> Reads { get; } = new();

        public int FailReadsLongerThan { get; init; } = int.MaxValue;

        public int Failed;

        /// <summary>Reads of the data file made around the page cache.</summary>
        public int Direct;

        public IStorageFile OpenFile(string path, FileMode mode) => Wrap(_inner.OpenFile(path, mode));

        public IStorageFile OpenFileForReading(string path) => Wrap(_inner.OpenFileForReading(path));

        public void DeleteFile(string path) => _inner.DeleteFile(path);

        public void MoveFile(string sourcePath, string destinationPath, bool overwrite) =>
            _inner.MoveFile(sourcePath, destinationPath, overwrite);

        public bool FileExists(string path) => _inner.FileExists(path);

        public string[] GetFiles(string directory, string searchPattern) => _inner.GetFiles(directory, searchPattern);

        public void CreateDirectory(string path) => _inner.CreateDirectory(path);

        public void SyncDirectory(string path) => _inner.SyncDirectory(path);

        public IDisposable AcquireExclusiveLock(string lockFilePath) => _inner.AcquireExclusiveLock(lockFilePath);

        private IStorageFile Wrap(IStorageFile file) =>
            file.Path.EndsWith(".folio", StringComparison.Ordinal) ? new RecordingFile(this, file) : file;

        private sealed class RecordingFile(ReadRecordingFileSystem owner, IStorageFile inner) : IStorageFile
        {
            public string Path => inner.Path;

            public long Length => inner.Length;

            public int Read(Span<byte> destination, long offset)
            {
                if (destination.Length > owner.FailReadsLongerThan)
                {
                    Interlocked.Increment(ref owner.Failed);
                    throw new IOException("injected read failure");
                }

                owner.Reads.Enqueue((offset, destination.Length));
                return inner.Read(destination, offset);
            }

            public int UncachedAlignment => inner.UncachedAlignment;

            public int ReadUncached(Span<byte> destination, long offset)
            {
                if (destination.Length > owner.FailReadsLongerThan)
                {
                    Interlocked.Increment(ref owner.Failed);
                    throw new IOException("injected read failure");
                }

                Interlocked.Increment(ref owner.Direct);
                owner.Reads.Enqueue((offset, destination.Length));
                return inner.ReadUncached(destination, offset);
            }

            public void Write(ReadOnlySpan<byte> source, long offset) => inner.Write(source, offset);

            public void Sync() => inner.Sync();

            public void AdviseWillNeed(long offset, long length) => inner.AdviseWillNeed(offset, length);

            public void WriteBack(long offset, long length, bool wait) => inner.WriteBack(offset, length, wait);

            public void Truncate(long length) => inner.Truncate(length);

            public void SetLength(long length) => inner.SetLength(length);

            public StorageMapping MapReadOnly(long length) => inner.MapReadOnly(length);

            public void Dispose() => inner.Dispose();
        }
    }
}
