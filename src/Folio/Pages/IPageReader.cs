namespace Folio.Pages;

/// <summary>
/// The one way pages come back from the data file (<see cref="PageCache"/>: tree pages through the buffer pool, each
/// checked when it is read from disk). Safe to call from any thread.
/// </summary>
internal interface IPageReader
{
    /// <summary>Pins the tree page at <paramref name="position"/> for reading in place; dispose the result once.
    /// Throws <see cref="StoreCorruptedException"/> when the page fails its checks.</summary>
    PinnedPage Pin(PagePosition position);

    /// <summary><see cref="Pin(PagePosition)"/> trying the frame <paramref name="frameHint"/> names first, and
    /// leaving in it the frame the page was pinned in (a hint kept by the caller: see
    /// <see cref="PageReference.FrameHint"/>).</summary>
    PinnedPage Pin(PagePosition position, ref int frameHint) => Pin(position);

    /// <summary>Reads and decodes the tree page at <paramref name="position"/> into a node of its own (not cached:
    /// the caller keeps it as long as it needs it); throws <see cref="StoreCorruptedException"/> when it fails its
    /// checks.</summary>
    TreeNode ReadNode(PagePosition position);

    /// <summary>Whether range cursors should ask for pages ahead (<see cref="Prefetch"/>); false spares them choosing
    /// pages.</summary>
    bool PrefetchEnabled { get; }

    /// <summary>Whether the page at <paramref name="position"/> is in the cache now (a racy hint).</summary>
    bool IsCached(PagePosition position);

    /// <summary>Asks for the tree pages at <paramref name="positions"/> (saved pages, in the order a cursor will read
    /// them) to be read into the cache in the background; returns at once, and may drop the request.</summary>
    void Prefetch(PagePosition[] positions);

    /// <summary>Reads the page at <paramref name="pages"/>[0], which a reader is about to pin, together with the pages
    /// after it in <paramref name="pages"/> that lie next to it in the file, in one read, and leaves them in the cache;
    /// returns how many of <paramref name="pages"/> that read covered (0 when the first is cached already or was not
    /// read: its pin then reads it, and reports a failure, itself).</summary>
    int ReadRun(ReadOnlySpan<PagePosition> pages) => 0;

    /// <summary>Reads the value of <paramref name="length"/> bytes held by the overflow page at
    /// <paramref name="position"/>.</summary>
    ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length);
}
