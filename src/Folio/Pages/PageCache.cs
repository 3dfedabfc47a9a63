using System.Buffers;
using Folio.Buffers;

namespace Folio.Pages;

/// <summary>
/// The data file's pages as readers see them (<see cref="IPageReader"/>): tree pages are read into the frames of a
/// <see cref="BufferPool"/> of <see cref="FrameSize"/> bytes each, keyed by their position, and checked once when they
/// are read from disk (length, CRC-32C with the position, then <see cref="PageFormat.Check"/>), so a page in a frame
/// is read in place without further checks. A page longer than a frame (none this version writes: pages split
/// before they pass <see cref="PageFormat.TargetPageSize"/>) is read into a rented array for each use instead.
/// Overflow values are read straight from the file: they are copied out by every reader anyway.
/// <para>
/// Range cursors ask for the leaves they will read next (<see cref="Prefetch"/>); one <see cref="PagePrefetcher"/>
/// worker reads them: it skips pages already cached, advises the kernel of all the request's pages at once (so their
/// reads are in flight together, not one after another), then loads them into frames on probation through
/// <see cref="BufferPool.Prefetch"/>, stopping when a checkpoint writes (<see cref="WritePriority"/>).
/// </para>
/// <para>
/// Runs (<see cref="ReadRun"/>): a checkpoint writes a tree's leaves in key order, back to back (a branch page between
/// the leaves of two parents), so the leaves a range cursor reads next mostly follow the one it needs now in the
/// file. A cursor about to read a leaf that is not cached reads it and those neighbours with one read of at most
/// <see cref="MaxRunBytes"/> and <see cref="MaxRunPages"/> (on a disk, one read of a few pages costs about what a
/// read of one does), then each page is copied from that buffer into a frame and checked as a page read alone is;
/// the worker reads its requests' pages the same way. A page that fails its checks in a run is left out of the
/// cache: the pin that needs it reads it again and reports the failure.
/// </para>
/// <para>
/// Direct reads: while the data file is longer than the bound the store sets (<see cref="NoteFileLength"/>, from
/// <see cref="DocumentStoreOptions.DataFileReads"/>), pages are read around the operating system's page cache
/// (<see cref="DataFile.TryReadUncached"/>), in blocks of the file's alignment that hold them, into pinned run
/// buffers (<see cref="RunBuffers"/>) and copied to their frames from there: the frames are the cache, and a second
/// copy in the page cache costs the kernel an insertion and, once memory is full, a reclaim for every page read. The
/// choice is one field, written by the checkpoint's thread (an interlocked exchange) and read plainly by each read:
/// a read that sees the old choice reads the same bytes (the page is immutable, and a direct read writes back dirty
/// cached bytes of its range first), so no read needs the newest.
/// </para>
/// <para>
/// A frame is never stale: pages are immutable once written, and a position names one page for the life of the
/// process (chunk ids are not reused while it runs), so a position read through an old tree whose chunk was freed
/// meanwhile finds either the page it named, still cached, or fails the checksum on disk (the caller then retries
/// through the newer tree).
/// </para>
/// </summary>
internal sealed class PageCache : IPageReader, IDisposable
{
    /// <summary>The bytes of one frame: a page of the target size fits.</summary>
    public const int FrameSize = PageFormat.TargetPageSize;

    /// <summary>The most bytes one read of a run of neighbouring pages takes (<see cref="ReadRun"/>): 256
    /// KiB.</summary>
    public const int MaxRunBytes = 16 * FrameSize;

    /// <summary>The most pages one run loads.</summary>
    public const int MaxRunPages = 32;

    /// <summary>The widest gap between two pages that a run reads through (a branch page between two parents' leaves):
    /// one frame.</summary>
    public const int MaxRunGap = FrameSize;

    private readonly DataFile _file;
    private readonly BufferPool _pool;
    private readonly PageLoader _loader;
    private readonly PagePrefetcher? _prefetcher;
    private readonly RunBuffers _runBuffers = new(MaxRunBytes);
    private readonly long _directReadsAbove;
    private long _oversizedReads;
    private int _directAlignment; // 0: reads through the page cache; else direct reads, aligned to it

    /// <summary>A cache of <paramref name="cacheBytes"/> (rounded down to whole frames, at least one) over
    /// <paramref name="file"/>, with a prefetch worker unless <paramref name="prefetch"/> is false, that reads around
    /// the operating system's page cache while the file is longer than <paramref name="directReadsAbove"/> bytes
    /// (<see cref="NoteFileLength"/>; a negative bound: always, <see cref="long.MaxValue"/>: never).</summary>
    public PageCache(DataFile file, long cacheBytes, BufferPoolOptions? options = null, bool prefetch = true,
        long directReadsAbove = long.MaxValue)
    {
        _file = file;
        _directReadsAbove = directReadsAbove;
        _pool = new BufferPool((int)Math.Clamp(cacheBytes / FrameSize, 1, int.MaxValue), FrameSize, options);
        _loader = Load;
        if (prefetch)
        {
            _prefetcher = new PagePrefetcher(ReadAhead, _pool.Metrics.PrefetchDropped);
        }
    }

    /// <summary>The prefetch worker, or null when prefetch is off (metrics and tests).</summary>
    public PagePrefetcher? Prefetcher => _prefetcher;

    public bool PrefetchEnabled => _prefetcher is not null;

    /// <summary>Set by the checkpoint's thread while it writes and syncs a chunk: prefetch reads stop
    /// meanwhile.</summary>
    public bool WritePriority
    {
        set
        {
            if (_prefetcher is not null)
            {
                _prefetcher.WritePriority = value;
            }
        }
    }

    /// <summary>Whether pages are read around the operating system's page cache now (<see cref="NoteFileLength"/>).
    /// </summary>
    public bool ReadsDirect => Volatile.Read(ref _directAlignment) > 0;

    /// <summary>Chooses how the next reads go for a data file of <paramref name="length"/> bytes: around the page cache
    /// when it is longer than the constructor's bound and the file can (<see cref="DataFile.UncachedAlignment"/>), else
    /// through it. Called when the store mounts and after each checkpoint; a read that started under the other choice
    /// finishes under it (both read what the file holds: a direct read writes back dirty cached bytes of its range
    /// first).</summary>
    /// <returns>Whether the choice changed (from buffered, the choice before the first call).</returns>
    public bool NoteFileLength(long length)
    {
        int alignment = length > _directReadsAbove ? _file.UncachedAlignment : 0;
        return Interlocked.Exchange(ref _directAlignment, alignment) != alignment;
    }

    /// <summary>The pool the frames live in (metrics and tests).</summary>
    public BufferPool Pool => _pool;

    /// <summary>Reads of pages longer than a frame, which bypass the pool (tests: none for pages this version
    /// writes).</summary>
    public long OversizedReads => Interlocked.Read(ref _oversizedReads);

    public PinnedPage Pin(PagePosition position)
    {
        long key = Key(position);
        if (_pool.TryPin(key, out PageHandle cached))
        {
            return new PinnedPage(cached, PageLength(cached.Bytes));
        }

        int length = _file.Locate(position, out long offset);
        if (length > FrameSize)
        {
            return ReadOversized(position, length, offset);
        }

        PageHandle loaded = _pool.Pin(key, _loader);
        return new PinnedPage(loaded, PageLength(loaded.Bytes));
    }

    public PinnedPage Pin(PagePosition position, ref int frameHint)
    {
        int hint = frameHint;
        if (hint >= 0 && _pool.TryPinAt(hint, Key(position), out PageHandle cached))
        {
            return new PinnedPage(cached, PageLength(cached.Bytes));
        }

        PinnedPage pinned = Pin(position);
        if (pinned.Frame != hint)
        {
            frameHint = pinned.Frame;
        }

        return pinned;
    }

    public TreeNode ReadNode(PagePosition position)
    {
        byte[] copy;
        using (PinnedPage page = Pin(position))
        {
            copy = page.Bytes.ToArray();
        }

        return PageFormat.DecodeChecked(copy, position);
    }

    public ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length) =>
        _file.ReadOverflow(position, length);

    public bool IsCached(PagePosition position) => _pool.IsCached(Key(position));

    /// <summary>The length of the page at <paramref name="position"/> and its offset in the data file.</summary>
    public int Locate(PagePosition position, out long offset) => _file.Locate(position, out offset);

    public void Prefetch(PagePosition[] positions) => _prefetcher?.Request(positions);

    /// <summary>Stops the prefetch worker (waiting for its read in progress), then frees the frames.</summary>
    public void Dispose()
    {
        _prefetcher?.Dispose();
        _pool.Dispose();
    }

    public int ReadRun(ReadOnlySpan<PagePosition> pages)
    {
        if (pages.IsEmpty || _pool.IsCached(Key(pages[0])))
        {
            return 0;
        }

        try
        {
            return ReadRunAt(pages);
        }
        catch (IOException)
        {
            return 0; // the pin reads the page again and reports the failure
        }
    }

    /// <summary>The prefetch worker's read of one request: the pages not cached are located and advised together
    /// (neighbours on disk as one range, so the kernel can read them with one request), then read in runs
    /// (<see cref="ReadRun"/>) while <paramref name="shouldStop"/> allows; returns the pages left unread.</summary>
    private int ReadAhead(PagePosition[] pages, Func<bool> shouldStop)
    {
        if (shouldStop())
        {
            return pages.Length;
        }

        long runStart = -1;
        long runEnd = -1;
        var missing = new List<PagePosition>(pages.Length);

        // Advise first: the kernel starts every read now, so they are in flight together (reads that go around the
        // page cache take no advice: it would fill the cache they avoid).
        bool advise = !ReadsDirect;
        int unread = 0;
        for (int i = 0; i < pages.Length; i++)
        {
            if (_pool.IsCached(Key(pages[i])))
            {
                continue;
            }

            if (!TryLocate(pages[i], out long offset, out int length) || length > FrameSize)
            {
                unread++;
                continue;
            }

            missing.Add(pages[i]);
            if (offset != runEnd)
            {
                if (runStart >= 0 && advise)
                {
                    _file.AdviseWillNeed(runStart, runEnd - runStart);
                }

                runStart = offset;
            }

            runEnd = offset + length;
        }

        if (runStart >= 0 && advise)
        {
            _file.AdviseWillNeed(runStart, runEnd - runStart);
        }

        for (int i = 0; i < missing.Count;)
        {
            if (shouldStop())
            {
                return unread + missing.Count - i;
            }

            int covered = ReadRun(System.Runtime.InteropServices.CollectionsMarshal.AsSpan(missing)[i..]);
            if (covered == 0 && !_pool.IsCached(Key(missing[i])))
            {
                unread++;
            }

            i += Math.Max(1, covered);
        }

        return unread;
    }

    /// <summary><see cref="ReadRun"/> once the first page is known not to be cached: the pages from the first on
    /// that lie within <see cref="MaxRunGap"/> of the run so far, on the side the second one chose (ascending or
    /// descending offsets), up to <see cref="MaxRunBytes"/>, read with one read and loaded one by one.</summary>
    private int ReadRunAt(ReadOnlySpan<PagePosition> pages)
    {
        if (!TryLocate(pages[0], out long first, out int firstLength) || firstLength > FrameSize)
        {
            return 0;
        }

        int limit = Math.Min(pages.Length, MaxRunPages);
        Span<long> offsets = stackalloc long[limit];
        Span<int> lengths = stackalloc int[limit];
        offsets[0] = first;
        lengths[0] = firstLength;
        long low = first;
        long high = first + firstLength;
        int direction = 0;
        int covered = 1;
        for (; covered < limit; covered++)
        {
            if (!TryLocate(pages[covered], out long offset, out int length) || length > FrameSize)
            {
                break;
            }

            long end = offset + length;
            if (direction >= 0 && offset >= high && offset - high <= MaxRunGap && end - low <= MaxRunBytes)
            {
                high = end;
                direction = 1;
            }
            else if (direction <= 0 && end <= low && low - end <= MaxRunGap && high - offset <= MaxRunBytes)
            {
                low = offset;
                direction = -1;
            }
            else
            {
                break;
            }

            offsets[covered] = offset;
            lengths[covered] = length;
        }

        // Around the page cache where the file can (the pages go to frames, so a cached copy would only be a second
        // one, and the kernel's work to insert it and reclaim another costs more than the read), widened to the
        // alignment that needs; else through it.
        int alignment = _directAlignment;
        byte[] buffer = alignment > 0 ? _runBuffers.Rent() : ArrayPool<byte>.Shared.Rent((int)(high - low));
        try
        {
            Memory<byte> bytes = buffer.AsMemory(0, (int)(high - low));
            long start = low;
            if (alignment > 0
                ? !TryReadDirect(buffer, low, high, alignment, out bytes, out start)
                : !_file.TryReadExactly(bytes.Span, low))
            {
                return 0; // the file ends first: the pin reports it
            }

            var copy = new RunCopy(_file, bytes, start);
            for (int i = 0; i < covered; i++)
            {
                copy.Next(offsets[i], lengths[i]);
                _pool.Prefetch(Key(pages[i]), copy.Loader);
            }
        }
        finally
        {
            if (alignment > 0)
            {
                _runBuffers.Return(buffer);
            }
            else
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }

        return covered;
    }

    /// <summary>Locates a page for prefetch; false when its chunk is gone (freed after the cursor asked) or its entry
    /// is damaged: a pin that needs the page reports that.</summary>
    private bool TryLocate(PagePosition position, out long offset, out int length)
    {
        try
        {
            length = _file.Locate(position, out offset);
            return true;
        }
        catch (StoreCorruptedException)
        {
            offset = 0;
            length = 0;
            return false;
        }
    }

    private static long Key(PagePosition position) => (long)position.Value;

    private static int PageLength(ReadOnlySpan<byte> frame) =>
        System.Buffers.Binary.BinaryPrimitives.ReadInt32LittleEndian(frame);

    /// <summary>The pool's loader: reads the page into its frame and checks it.</summary>
    private void Load(long key, Span<byte> frame)
    {
        var position = new PagePosition((ulong)key);
        int length = _file.Locate(position, out long offset);
        if (length > frame.Length)
        {
            // Located once by the pin before it chose the pool; the table of contents does not change.
            ThrowHelper.ThrowInvalidOperation($"{position} of {length} bytes does not fit a frame.");
        }

        Span<byte> page = frame[..length];
        int alignment = _directAlignment;
        if (alignment > 0)
        {
            ReadPageDirect(position, page, offset, alignment);
        }
        else
        {
            _file.ReadPage(position, page, offset);
        }

        _file.CheckStructure(position, page, offset);
    }

    /// <summary><see cref="DataFile.ReadPage"/> around the page cache: the blocks of <paramref name="alignment"/>
    /// bytes that hold the page are read into a run buffer, and the page copied from there and checked.</summary>
    private void ReadPageDirect(PagePosition position, Span<byte> page, long offset, int alignment)
    {
        byte[] buffer = _runBuffers.Rent();
        try
        {
            if (!TryReadDirect(buffer, offset, offset + page.Length, alignment, out Memory<byte> bytes,
                out long start))
            {
                ThrowHelper.ThrowStoreCorrupted(_file.Path, offset,
                    $"{position} ({page.Length} bytes) runs past the end of the file");
            }

            bytes.Span.Slice((int)(offset - start), page.Length).CopyTo(page);
        }
        finally
        {
            _runBuffers.Return(buffer);
        }

        _file.CheckPage(position, page, offset);
    }

    /// <summary>Reads the file's bytes from <paramref name="low"/> to <paramref name="high"/> around the page cache
    /// into <paramref name="buffer"/> (a run buffer), widened on both ends to <paramref name="alignment"/>:
    /// <paramref name="bytes"/> then holds the file's bytes from <paramref name="start"/> on. False when the file
    /// ends first.</summary>
    private bool TryReadDirect(byte[] buffer, long low, long high, int alignment, out Memory<byte> bytes,
        out long start)
    {
        start = low & -alignment;
        int length = (int)(((high + alignment - 1) & -alignment) - start);
        bytes = buffer.AsMemory(RunBuffers.AlignedIndex(buffer, alignment), length);
        return _file.TryReadUncached(bytes.Span, start, (int)(high - start));
    }

    /// <summary>The loader of one run's pages (<see cref="ReadRunAt"/>): copies the page <see cref="Next"/> named from
    /// the run's buffer into its frame and checks it there. Used by one thread, for one run.</summary>
    private sealed class RunCopy
    {
        private readonly DataFile _file;
        private readonly Memory<byte> _buffer;
        private readonly long _bufferOffset;
        private long _offset;
        private int _length;

        /// <summary>The loader of pages from <paramref name="buffer"/>, which holds the file's bytes from
        /// <paramref name="bufferOffset"/> on.</summary>
        public RunCopy(DataFile file, Memory<byte> buffer, long bufferOffset)
        {
            _file = file;
            _buffer = buffer;
            _bufferOffset = bufferOffset;
            Loader = Load;
        }

        public PageLoader Loader { get; }

        /// <summary>Names the page the next load copies: at <paramref name="offset"/> in the file, of
        /// <paramref name="length"/> bytes.</summary>
        public void Next(long offset, int length)
        {
            _offset = offset;
            _length = length;
        }

        private void Load(long key, Span<byte> frame)
        {
            var position = new PagePosition((ulong)key);
            Span<byte> page = frame[.._length];
            _buffer.Span.Slice((int)(_offset - _bufferOffset), _length).CopyTo(page);
            _file.CheckPage(position, page, _offset);
            _file.CheckStructure(position, page, _offset);
        }
    }

    private PinnedPage ReadOversized(PagePosition position, int length, long offset)
    {
        Interlocked.Increment(ref _oversizedReads);
        byte[] rented = ArrayPool<byte>.Shared.Rent(length);
        try
        {
            Span<byte> page = rented.AsSpan(0, length);
            _file.ReadPage(position, page, offset);
            _file.CheckStructure(position, page, offset);
            return new PinnedPage(rented, length);
        }
        catch
        {
            ArrayPool<byte>.Shared.Return(rented);
            throw;
        }
    }
}
