using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// The bytes of a chunk: up to <see cref="MaxPagesPerChunk"/> of the pages one checkpoint wrote, in one extent of the
/// data file aligned to <see cref="Alignment"/> (docs/formats/pages.md). Only a checkpoint's last chunk, the one its
/// header names, has a catalog root and a chunk table:
/// <code>
/// [chunk header, 64 bytes][pages, in page-number order][table of contents][chunk table]
/// header:  0 u32 magic "FCHK"   4 u32 chunk id        8 u64 checkpoint sequence   16 u32 page count
///         20 u32 chunk-table entries                 24 u64 length (header to end of chunk table)
///         32 u64 catalog root position (0: no collections)   40 u64 table of contents offset (from chunk start)
///         48 u32 CRC-32C of header bytes [0, 48), the table of contents and the chunk table    52..64 zero
/// table of contents: per page, u32 offset from the chunk start, u32 length
/// chunk table: per live chunk (this one included), u32 id, u32 page count, u64 file offset, u64 length,
///         u32 live pages, u32 0
/// </code>
/// Pages carry their own checksums, checked when read; the metadata checksum is checked when the chunk is mounted
/// or its table of contents first read.
/// </summary>
internal static class ChunkFormat
{
    public const uint Magic = 0x4B48_4346; // "FCHK"
    public const int HeaderSize = 64;
    public const int TocEntrySize = 8;
    public const int TableEntrySize = 32;
    public const int Alignment = 4096;
    private const int ChecksumOffset = 48;

    /// <summary>
    /// The most pages one chunk holds: a checkpoint numbers its pages 0, 1, 2, ... and page <c>n</c> goes into its
    /// <c>n / MaxPagesPerChunk</c>-th chunk, so a checkpoint of many pages is several chunks of about 4 MiB (16 KiB
    /// pages), each placed in a free extent of its own: the space a freed chunk leaves is reused piece by piece even
    /// when the next checkpoint is a little larger, and compaction moves the file's tail a few chunks at a time.
    /// </summary>
    public const int MaxPagesPerChunk = 256;

    /// <summary>The position of the checkpoint's page <paramref name="page"/> when its chunks start at
    /// <paramref name="firstChunkId"/> and hold <paramref name="pagesPerChunk"/> pages each (the last fewer).</summary>
    public static PagePosition PositionOf(uint firstChunkId, uint page, int pagesPerChunk) =>
        new(checked(firstChunkId + (page / (uint)pagesPerChunk)), page % (uint)pagesPerChunk);

    /// <summary>The chunks a checkpoint of <paramref name="pageCount"/> pages writes (one when it has none: the
    /// chunk table and the catalog root still need a chunk).</summary>
    public static int ChunksFor(int pageCount, int pagesPerChunk) =>
        Math.Max(1, (pageCount + pagesPerChunk - 1) / pagesPerChunk);

    /// <summary>The checkpoint's pages [First, First + Count) that its chunk <paramref name="index"/> holds.</summary>
    public static (int First, int Count) PagesOf(int index, int pageCount, int pagesPerChunk)
    {
        int first = index * pagesPerChunk;
        return (first, Math.Clamp(pageCount - first, 0, pagesPerChunk));
    }

    public static long Align(long length) => (length + Alignment - 1) & ~(long)(Alignment - 1);

    public static void WriteHeader(Span<byte> header, uint chunkId, long sequence, int pageCount, int tableEntries,
        long length, PagePosition catalogRoot, long tocOffset)
    {
        header[..HeaderSize].Clear();
        BinaryPrimitives.WriteUInt32LittleEndian(header, Magic);
        BinaryPrimitives.WriteUInt32LittleEndian(header[4..], chunkId);
        BinaryPrimitives.WriteInt64LittleEndian(header[8..], sequence);
        BinaryPrimitives.WriteInt32LittleEndian(header[16..], pageCount);
        BinaryPrimitives.WriteInt32LittleEndian(header[20..], tableEntries);
        BinaryPrimitives.WriteInt64LittleEndian(header[24..], length);
        BinaryPrimitives.WriteUInt64LittleEndian(header[32..], catalogRoot.Value);
        BinaryPrimitives.WriteInt64LittleEndian(header[40..], tocOffset);
    }

    /// <summary>The metadata checksum over the header's first 48 bytes and the metadata that follows the
    /// pages.</summary>
    public static uint Checksum(ReadOnlySpan<byte> header, ReadOnlySpan<byte> metadata) =>
        Crc32C.Finish(Crc32C.Append(Crc32C.Append(Crc32C.Seed, header[..ChecksumOffset]), metadata));

    public static void Seal(Span<byte> header, ReadOnlySpan<byte> metadata) =>
        BinaryPrimitives.WriteUInt32LittleEndian(header[ChecksumOffset..], Checksum(header, metadata));

    public static uint StoredChecksum(ReadOnlySpan<byte> header) =>
        BinaryPrimitives.ReadUInt32LittleEndian(header[ChecksumOffset..]);

    public static void WriteTableEntry(Span<byte> entry, ChunkInfo chunk)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(entry, chunk.Id);
        BinaryPrimitives.WriteInt32LittleEndian(entry[4..], chunk.PageCount);
        BinaryPrimitives.WriteInt64LittleEndian(entry[8..], chunk.FileOffset);
        BinaryPrimitives.WriteInt64LittleEndian(entry[16..], chunk.Length);
        BinaryPrimitives.WriteInt32LittleEndian(entry[24..], chunk.LivePages);
        BinaryPrimitives.WriteInt32LittleEndian(entry[28..], 0);
    }

    public static ChunkInfo ReadTableEntry(ReadOnlySpan<byte> entry) => new(
        BinaryPrimitives.ReadUInt32LittleEndian(entry),
        BinaryPrimitives.ReadInt64LittleEndian(entry[8..]),
        BinaryPrimitives.ReadInt64LittleEndian(entry[16..]),
        BinaryPrimitives.ReadInt32LittleEndian(entry[4..]),
        BinaryPrimitives.ReadInt32LittleEndian(entry[24..]));

    /// <summary>A decoded chunk header.</summary>
    internal readonly record struct Header(uint ChunkId, long Sequence, int PageCount, int TableEntries, long Length,
        PagePosition CatalogRoot, long TocOffset, uint Checksum)
    {
        public static Header? TryRead(ReadOnlySpan<byte> bytes)
        {
            if (BinaryPrimitives.ReadUInt32LittleEndian(bytes) != Magic)
            {
                return null;
            }

            return new Header(
                BinaryPrimitives.ReadUInt32LittleEndian(bytes[4..]),
                BinaryPrimitives.ReadInt64LittleEndian(bytes[8..]),
                BinaryPrimitives.ReadInt32LittleEndian(bytes[16..]),
                BinaryPrimitives.ReadInt32LittleEndian(bytes[20..]),
                BinaryPrimitives.ReadInt64LittleEndian(bytes[24..]),
                new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(bytes[32..])),
                BinaryPrimitives.ReadInt64LittleEndian(bytes[40..]),
                StoredChecksum(bytes));
        }

        public long MetadataLength => (PageCount * (long)TocEntrySize) + (TableEntries * (long)TableEntrySize);
    }
}
