using System.Buffers.Binary;
using System.Runtime.CompilerServices;

namespace Folio.Journal;

/// <summary>
/// The on-disk layout of journal segments and records (docs/formats/journal.md). All integers are little-endian.
/// <code>
/// Segment file "{firstSequence:D20}.journal", preallocated and zero-filled to the segment size:
///   0  u64 magic "FOLIOJNL"      8 u32 format version (1)   12 u32 header size (64)
///  16  u64 first sequence       24 i64 created (UTC ticks)   32 u64 segment size
///  40  20 reserved zero bytes   60 u32 CRC-32C of bytes [0, 60)
///  64  records, back to back; the first all-zero header ends the segment's data
///
/// Record (a group of entries appended and made durable together):
///   0  u32 magic "FJR1", or "FJRO" when the record was written while an earlier record of its segment was not yet
///      known durable (an overlapped sync, or buffered commits): recovery may treat a damaged record followed only by
///      such records as a torn tail
///   4  u32 CRC-32C of bytes [8, length)
///   8  u32 length (header + payload)  12 u32 entry count (>= 1)
///  16  u64 first sequence       24 i64 timestamp (UTC ticks, never decreasing)
///  32  payload: entry count times { u32 entry length, entry bytes }
/// </code>
/// Entry i of a record has sequence number <c>first sequence + i</c>; sequence numbers are gap-free across records
/// and segments, starting at 1.
/// </summary>
internal static class JournalFormat
{
    public const ulong SegmentMagic = 0x4C4E_4A4F_494C_4F46; // "FOLIOJNL"
    public const uint FormatVersion = 2;

    /// <summary>The oldest segment format version this build reads (version 1 has no overlapped records).</summary>
    public const uint OldestReadableFormatVersion = 1;
    public const int SegmentHeaderSize = 64;
    public const int SegmentHeaderCrcOffset = 60;

    public const uint RecordMagic = 0x3152_4A46; // "FJR1"
    public const uint OverlappedRecordMagic = 0x4F52_4A46; // "FJRO"
    public const int RecordHeaderSize = 32;
    public const int EntryHeaderSize = 4;

    public const string SegmentExtension = ".journal";
    public const string SegmentSearchPattern = "*.journal";
    public const string TemporarySearchPattern = "*.tmp";
    public const string LockFileName = "journal.lock";
    public const string PurgeWatermarkFileName = "journal.purged";

    public static string SegmentFileName(long firstSequence) => firstSequence.ToString("D20", System.Globalization.CultureInfo.InvariantCulture) + SegmentExtension;

    public static bool TryParseSegmentFileName(string fileName, out long firstSequence)
    {
        firstSequence = 0;
        return fileName.Length == 20 + SegmentExtension.Length
            && fileName.EndsWith(SegmentExtension, StringComparison.Ordinal)
            && long.TryParse(fileName.AsSpan(0, 20), System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out firstSequence)
            && firstSequence > 0;
    }

    public static void WriteSegmentHeader(Span<byte> destination, long firstSequence, long createdTicks, long segmentSize)
    {
        destination = destination[..SegmentHeaderSize];
        destination.Clear();
        BinaryPrimitives.WriteUInt64LittleEndian(destination, SegmentMagic);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[8..], FormatVersion);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[12..], SegmentHeaderSize);
        BinaryPrimitives.WriteInt64LittleEndian(destination[16..], firstSequence);
        BinaryPrimitives.WriteInt64LittleEndian(destination[24..], createdTicks);
        BinaryPrimitives.WriteInt64LittleEndian(destination[32..], segmentSize);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[SegmentHeaderCrcOffset..], Crc32C.Compute(destination[..SegmentHeaderCrcOffset]));
    }

    /// <summary>Checks a segment header; returns null when valid, else why not.</summary>
    public static string? ValidateSegmentHeader(ReadOnlySpan<byte> header, long expectedFirstSequence)
    {
        if (header.Length < SegmentHeaderSize)
        {
            return "the segment is shorter than its header";
        }

        if (BinaryPrimitives.ReadUInt64LittleEndian(header) != SegmentMagic)
        {
            return "the segment header has a wrong magic number";
        }

        if (BinaryPrimitives.ReadUInt32LittleEndian(header[SegmentHeaderCrcOffset..]) != Crc32C.Compute(header[..SegmentHeaderCrcOffset]))
        {
            return "the segment header checksum does not match";
        }

        uint version = BinaryPrimitives.ReadUInt32LittleEndian(header[8..]);
        if (version < OldestReadableFormatVersion || version > FormatVersion)
        {
            return $"the segment format version {version} is not supported (this build reads versions {OldestReadableFormatVersion} to {FormatVersion})";
        }

        long first = BinaryPrimitives.ReadInt64LittleEndian(header[16..]);
        return first != expectedFirstSequence ? $"the segment header says it starts at sequence {first}, its file name says {expectedFirstSequence}" : null;
    }

    /// <summary>The size of a record holding entries of the given total size.</summary>
    public static long RecordSize(int entryCount, long totalEntryBytes) => RecordHeaderSize + ((long)entryCount * EntryHeaderSize) + totalEntryBytes;

    /// <summary>Fills in the header of a record whose payload is already in place and checksums it.</summary>
    public static void WriteRecordHeader(Span<byte> record, int entryCount, long firstSequence, long timestampTicks, bool overlapped = false)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(record, overlapped ? OverlappedRecordMagic : RecordMagic);
        BinaryPrimitives.WriteUInt32LittleEndian(record[8..], (uint)record.Length);
        BinaryPrimitives.WriteUInt32LittleEndian(record[12..], (uint)entryCount);
        BinaryPrimitives.WriteInt64LittleEndian(record[16..], firstSequence);
        BinaryPrimitives.WriteInt64LittleEndian(record[24..], timestampTicks);
        BinaryPrimitives.WriteUInt32LittleEndian(record[4..], Crc32C.Compute(record[8..]));
    }

    /// <summary>A parsed record header.</summary>
    /// <remarks><c>Overlapped</c>: whether the record was written while an earlier record of its segment was not yet known durable.</remarks>
    public readonly record struct RecordHeader(int Length, int EntryCount, long FirstSequence, long TimestampTicks, bool Overlapped = false);

    /// <summary>
    /// Reads the header at the start of <paramref name="available"/> (the bytes from the record to the end of the
    /// readable region) and checks its shape: magic, a length that fits, at least one entry. The checksum is checked
    /// separately by <see cref="ChecksumMatches"/>.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static bool TryReadRecordHeader(ReadOnlySpan<byte> available, out RecordHeader header)
    {
        uint magic = available.Length < RecordHeaderSize ? 0 : BinaryPrimitives.ReadUInt32LittleEndian(available);
        if (magic != RecordMagic && magic != OverlappedRecordMagic)
        {
            header = default;
            return false;
        }

        uint length = BinaryPrimitives.ReadUInt32LittleEndian(available[8..]);
        uint count = BinaryPrimitives.ReadUInt32LittleEndian(available[12..]);
        if (length < RecordHeaderSize + EntryHeaderSize || length > (uint)available.Length || count == 0 || count > (length - RecordHeaderSize) / EntryHeaderSize)
        {
            header = default;
            return false;
        }

        header = new RecordHeader((int)length, (int)count, BinaryPrimitives.ReadInt64LittleEndian(available[16..]), BinaryPrimitives.ReadInt64LittleEndian(available[24..]), magic == OverlappedRecordMagic);
        return true;
    }

    /// <summary>Whether the record's stored checksum matches its bytes.</summary>
    public static bool ChecksumMatches(ReadOnlySpan<byte> record) =>
        BinaryPrimitives.ReadUInt32LittleEndian(record[4..]) == Crc32C.Compute(record[8..]);

    /// <summary>Whether the entries of a checksummed record exactly fill its payload.</summary>
    public static bool EntriesFillPayload(ReadOnlySpan<byte> record, int entryCount)
    {
        int offset = RecordHeaderSize;
        for (int i = 0; i < entryCount; i++)
        {
            if (record.Length - offset < EntryHeaderSize)
            {
                return false;
            }

            uint length = BinaryPrimitives.ReadUInt32LittleEndian(record[offset..]);
            if (length > (uint)(record.Length - offset - EntryHeaderSize))
            {
                return false;
            }

            offset += EntryHeaderSize + (int)length;
        }

        return offset == record.Length;
    }
}
