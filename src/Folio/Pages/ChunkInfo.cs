using System.Buffers.Binary;

namespace Folio.Pages;

/// <summary>
/// What the store knows about one chunk: where it lies, how many pages it holds and how many are still live, and
/// its table of contents (read on the first page read from the chunk).
/// <para>
/// Protocol. Id, place and page count never change. <see cref="LivePages"/> and <see cref="DeadAt"/> are written by
/// the checkpoint's thread only (under the page store's checkpoint lock) and read by it and by diagnostics. The table
/// of contents is loaded by whichever reader needs it first and published with a compare-exchange; it is immutable.
/// </para>
/// </summary>
internal sealed class ChunkInfo
{
    private long[]? _toc;

    public ChunkInfo(uint id, long fileOffset, long length, int pageCount, int livePages)
    {
        Id = id;
        FileOffset = fileOffset;
        Length = length;
        PageCount = pageCount;
        LivePages = livePages;
    }

    public uint Id { get; }

    /// <summary>Where the chunk starts in the data file (a multiple of <see cref="ChunkFormat.Alignment"/>).</summary>
    public long FileOffset { get; }

    /// <summary>The chunk's bytes, header to the end of its chunk table (its extent is this, aligned up).</summary>
    public long Length { get; }

    /// <summary>The extent the chunk occupies in the file.</summary>
    public long Extent => ChunkFormat.Align(Length);

    public int PageCount { get; }

    /// <summary>Pages still reachable from the newest checkpoint's roots.</summary>
    public int LivePages { get; set; }

    /// <summary>The share of the chunk's pages still live (0 for a chunk without pages).</summary>
    public double Fill => PageCount == 0 ? 0 : (double)LivePages / PageCount;

    /// <summary>The chunk's live bytes, estimated from its length and <see cref="Fill"/> (pages differ in
    /// size).</summary>
    public long LiveBytes => (long)(Length * Fill);

    /// <summary>The generation of the checkpoint that wrote the chunk (0 for a chunk found at the open: older than
    /// any checkpoint a reader can still pin).</summary>
    public long BornAt { get; init; }

    /// <summary>The generation of the checkpoint after which no current root reaches the chunk; 0 while live.</summary>
    public long DeadAt { get; set; }

    /// <summary>The table of contents if it is loaded: per page, offset (high 32 bits) and length (low 32).</summary>
    public long[]? Toc => Volatile.Read(ref _toc);

    /// <summary>Publishes the table of contents (a chunk just written, or one read from disk).</summary>
    public long[] PublishToc(long[] toc) => Interlocked.CompareExchange(ref _toc, toc, null) ?? toc;

    /// <summary>Decodes a table of contents.</summary>
    public static long[] DecodeToc(ReadOnlySpan<byte> bytes, int pageCount)
    {
        var toc = new long[pageCount];
        for (int i = 0; i < pageCount; i++)
        {
            uint offset = BinaryPrimitives.ReadUInt32LittleEndian(bytes[(i * ChunkFormat.TocEntrySize)..]);
            uint length = BinaryPrimitives.ReadUInt32LittleEndian(bytes[((i * ChunkFormat.TocEntrySize) + 4)..]);
            toc[i] = ((long)offset << 32) | length;
        }

        return toc;
    }
}
