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
/// reads are in flight together, not one after another), then loads each into a frame on probation through
/// <see cref="BufferPool.Prefetch"/>, stopping when a checkpoint writes (<see cref="WritePriority"/>).
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

    private readonly DataFile _file;
    private readonly BufferPool _pool;
    private readonly PageLoader _loader;
    private readonly PagePrefetcher? _prefetcher;
    private long _oversizedReads;

    /// <summary>A cache of <paramref name="cacheBytes"/> (rounded down to whole frames, at least one) over
    /// <paramref name="file"/>, with a prefetch worker unless <paramref name="prefetch"/> is false.</summary>
    public PageCache(DataFile file, long cacheBytes, BufferPoolOptions? options = null, bool prefetch = true)
    {
        _file = file;
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

    public void Prefetch(PagePosition[] positions) => _prefetcher?.Request(positions);

    /// <summary>Stops the prefetch worker (waiting for its read in progress), then frees the frames.</summary>
    public void Dispose()
    {
        _prefetcher?.Dispose();
        _pool.Dispose();
    }

    /// <summary>The prefetch worker's read of one request: the pages not cached are located and advised together
    /// (neighbours on disk as one range, so the kernel can read them with one request), then loaded one by one while
    /// <paramref name="shouldStop"/> allows; returns the pages left unread.</summary>
    private int ReadAhead(PagePosition[] pages, Func<bool> shouldStop)
    {
        if (shouldStop())
        {
            return pages.Length;
        }

        Span<long> offsets = pages.Length <= 64 ? stackalloc long[pages.Length] : new long[pages.Length];
        long runStart = -1;
        long runEnd = -1;

        // Advise first: the kernel starts every read now, so they are in flight together.
        int unread = 0;
        for (int i = 0; i < pages.Length; i++)
        {
            offsets[i] = -1;
            if (_pool.IsCached(Key(pages[i])))
            {
                continue;
            }

            if (!TryLocate(pages[i], out long offset, out int length) || length > FrameSize)
            {
                unread++;
                continue;
            }

            offsets[i] = offset;
            if (offset != runEnd)
            {
                if (runStart >= 0)
                {
                    _file.AdviseWillNeed(runStart, runEnd - runStart);
                }

                runStart = offset;
            }

            runEnd = offset + length;
        }

        if (runStart >= 0)
        {
            _file.AdviseWillNeed(runStart, runEnd - runStart);
        }

        for (int i = 0; i < pages.Length; i++)
        {
            if (offsets[i] < 0)
            {
                continue;
            }

            if (shouldStop())
            {
                unread++;
                continue;
            }

            if (_pool.Prefetch(Key(pages[i]), _loader) is PrefetchOutcome.NoFrame or PrefetchOutcome.Failed)
            {
                unread++;
            }
        }

        return unread;
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
        _file.ReadPage(position, page, offset);
        _file.CheckStructure(position, page, offset);
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
