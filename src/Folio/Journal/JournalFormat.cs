using System.Buffers.Binary;
using System.Runtime.CompilerServices;
using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// The on-disk layout of journal segments and records (docs/formats/journal.md). All integers are little-endian.
/// <code>
/// Segment file "{firstSequence:D20}.journal", preallocated and zero-filled to the segment size:
///   0  u64 magic "FOLIOJNL"      8 u32 format version (3)   12 u32 header size (64)
///  16  u64 first sequence       24 i64 created (UTC ticks)   32 u64 segment size
///  40  16 store id (the store that wrote the segment; zero: written before stores had ids)
///  56   4 reserved zero bytes   60 u32 CRC-32C of bytes [0, 60)
///  64  records, back to back; the first all-zero header ends the segment's data
///
/// Record (a group of entries appended and made durable together), format 3:
///   0  u32 magic "FJR3"          4 u32 CRC-32C of bytes [8, length)
///   8  u32 length (header + payload)  12 u32 entry count (>= 1)
///  16  u64 first sequence       24 i64 timestamp (UTC ticks, never decreasing)
///  32  u64 synced length: the bytes of this segment a completed fdatasync had made durable when the record was
///      written (a durable point: damage below it is never a torn tail)
///  40  payload: entry count times { u32 entry length, entry bytes }
/// Formats 1 and 2 wrote 32-byte headers with magic "FJR1" (every earlier record of the segment was durable: its
/// synced length is its own offset) or "FJRO" (overlapped: synced length unknown, taken as the segment header).
/// </code>
/// Entry i of a record has sequence number <c>first sequence + i</c>; sequence numbers are gap-free across records
/// and segments, starting at 1.
/// </summary>
internal static class JournalFormat
{
    public const ulong SegmentMagic = 0x4C4E_4A4F_494C_4F46; // "FOLIOJNL"
    public const uint FormatVersion = 3;

    /// <summary>The oldest segment format version this build reads (version 1 has no overlapped records, version 2
    /// no synced lengths).</summary>
    public const uint OldestReadableFormatVersion = 1;
    public const int SegmentHeaderSize = 64;
    public const int SegmentHeaderCrcOffset = 60;

    public const uint RecordMagic = 0x3352_4A46; // "FJR3"
    public const uint LegacyRecordMagic = 0x3152_4A46; // "FJR1" (formats 1 and 2)
    public const uint OverlappedRecordMagic = 0x4F52_4A46; // "FJRO" (format 2)

    /// <summary>The header size of the records this build writes (format 3).</summary>
    public const int RecordHeaderSize = 40;

    /// <summary>The header size of format 1 and 2 records.</summary>
    public const int LegacyRecordHeaderSize = 32;

    /// <summary>A legacy record's <see cref="RecordHeader.SyncedLength"/>: every earlier record of its segment was
    /// durable.</summary>
    public const long SyncedUpToItself = -1;
    public const int EntryHeaderSize = 4;

    public const string SegmentExtension = ".journal";
    public const string SegmentSearchPattern = "*.journal";
    public const string TemporarySearchPattern = "*.tmp";
    public const string LockFileName = "journal.lock";
    public const string PurgeWatermarkFileName = "journal.purged";

    public static string SegmentFileName(long firstSequence)
        => firstSequence.ToString("D20", System.Globalization.CultureInfo.InvariantCulture) + SegmentExtension;

    /// <summary>The segment files in <paramref name="directory"/> as first sequence and size, oldest first, read
    /// beside a writer that may purge them meanwhile (one gone before its size was read is left out).</summary>
    public static List<(long First, long Bytes)> ListSegmentFiles(string directory)
    {
        var segments = new List<(long First, long Bytes)>();
        foreach (string file in Directory.EnumerateFiles(directory, SegmentSearchPattern))
        {
            if (TryParseSegmentFileName(Path.GetFileName(file), out long first))
            {
                try
                {
                    segments.Add((first, new FileInfo(file).Length));
                }
                catch (FileNotFoundException)
                {
                    // purged meanwhile
                }
            }
        }

        segments.Sort((a, b) => a.First.CompareTo(b.First));
        return segments;
    }

    public static bool TryParseSegmentFileName(string fileName, out long firstSequence)
    {
        firstSequence = 0;
        return fileName.Length == 20 + SegmentExtension.Length
            && fileName.EndsWith(SegmentExtension, StringComparison.Ordinal)
            && long.TryParse(fileName.AsSpan(0, 20), System.Globalization.NumberStyles.None,
                System.Globalization.CultureInfo.InvariantCulture, out firstSequence)
            && firstSequence > 0;
    }

    /// <summary>Where a segment header holds the id of the store that wrote it.</summary>
    public const int SegmentStoreIdOffset = 40;

    public static void WriteSegmentHeader(Span<byte> destination, long firstSequence, long createdTicks,
        long segmentSize, Guid storeId)
    {
        destination = destination[..SegmentHeaderSize];
        destination.Clear();
        BinaryPrimitives.WriteUInt64LittleEndian(destination, SegmentMagic);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[8..], FormatVersion);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[12..], SegmentHeaderSize);
        BinaryPrimitives.WriteInt64LittleEndian(destination[16..], firstSequence);
        BinaryPrimitives.WriteInt64LittleEndian(destination[24..], createdTicks);
        BinaryPrimitives.WriteInt64LittleEndian(destination[32..], segmentSize);
        storeId.TryWriteBytes(destination[SegmentStoreIdOffset..]);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[SegmentHeaderCrcOffset..],
            Crc32C.Compute(destination[..SegmentHeaderCrcOffset]));
    }

    /// <summary>The id of the store that wrote a segment, from its header (checked by
    /// <see cref="ValidateSegmentHeader"/>); <see cref="Guid.Empty"/> for a segment written before stores had
    /// ids.</summary>
    public static Guid ReadSegmentStoreId(ReadOnlySpan<byte> header) => new(header.Slice(SegmentStoreIdOffset, 16));

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

        if (BinaryPrimitives.ReadUInt32LittleEndian(header[SegmentHeaderCrcOffset..]) != Crc32C.Compute(
            header[..SegmentHeaderCrcOffset]))
        {
            return "the segment header checksum does not match";
        }

        uint version = BinaryPrimitives.ReadUInt32LittleEndian(header[8..]);
        if (version < OldestReadableFormatVersion || version > FormatVersion)
        {
            return $"the segment format version {version} is not supported (this build reads versions " +
                $"{OldestReadableFormatVersion} to {FormatVersion})";
        }

        long first = BinaryPrimitives.ReadInt64LittleEndian(header[16..]);
        return first != expectedFirstSequence
            ? $"the segment header says it starts at sequence {first}, its file name says {expectedFirstSequence}"
            : null;
    }

    /// <summary>The size of a record holding entries of the given total size.</summary>
    public static long RecordSize(int entryCount, long totalEntryBytes) => RecordHeaderSize
        + ((long)entryCount * EntryHeaderSize) + totalEntryBytes;

    /// <summary>Fills in the header of a record whose payload is already in place and checksums it.</summary>
    /// <param name="record">The whole record: a <see cref="RecordHeaderSize"/>-byte header, then the payload.</param>
    /// <param name="entryCount">The number of entries in the payload.</param>
    /// <param name="firstSequence">The sequence number of the first entry.</param>
    /// <param name="timestampTicks">The record's timestamp.</param>
    /// <param name="syncedLength">The bytes of the segment known durable when the record is written.</param>
    public static void WriteRecordHeader(Span<byte> record, int entryCount, long firstSequence, long timestampTicks,
        long syncedLength)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(record, RecordMagic);
        BinaryPrimitives.WriteUInt32LittleEndian(record[8..], (uint)record.Length);
        BinaryPrimitives.WriteUInt32LittleEndian(record[12..], (uint)entryCount);
        BinaryPrimitives.WriteInt64LittleEndian(record[16..], firstSequence);
        BinaryPrimitives.WriteInt64LittleEndian(record[24..], timestampTicks);
        BinaryPrimitives.WriteInt64LittleEndian(record[32..], syncedLength);
        BinaryPrimitives.WriteUInt32LittleEndian(record[4..], Crc32C.Compute(record[8..]));
    }

    /// <summary>A parsed record header.</summary>
    /// <remarks>
    /// <c>HeaderSize</c>: where the payload starts (40, or 32 for a legacy record). <c>SyncedLength</c>: the bytes of
    /// the segment known durable when the record was written; <see cref="SyncedUpToItself"/> for a legacy "FJR1"
    /// record, the segment header size for a legacy overlapped "FJRO" record.
    /// </remarks>
    public readonly record struct RecordHeader(int Length, int EntryCount, long FirstSequence, long TimestampTicks,
        int HeaderSize, long SyncedLength);

    /// <summary>
    /// Reads the header at the start of <paramref name="available"/> (the bytes from the record to the end of the
    /// readable region) and checks its shape: magic, a length that fits, at least one entry. The checksum is checked
    /// separately by <see cref="ChecksumMatches"/>.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static bool TryReadRecordHeader(ReadOnlySpan<byte> available, out RecordHeader header)
    {
        uint magic = available.Length < LegacyRecordHeaderSize ? 0 : BinaryPrimitives.ReadUInt32LittleEndian(available);
        int headerSize = magic == RecordMagic ? RecordHeaderSize : LegacyRecordHeaderSize;
        if ((magic != RecordMagic && magic != LegacyRecordMagic && magic != OverlappedRecordMagic)
            || available.Length < headerSize)
        {
            header = default;
            return false;
        }

        uint length = BinaryPrimitives.ReadUInt32LittleEndian(available[8..]);
        uint count = BinaryPrimitives.ReadUInt32LittleEndian(available[12..]);
        if (length < headerSize + EntryHeaderSize || length > (uint)available.Length || count == 0
            || count > (length - headerSize) / EntryHeaderSize)
        {
            header = default;
            return false;
        }

        long synced = magic switch
        {
            RecordMagic => BinaryPrimitives.ReadInt64LittleEndian(available[32..]),
            LegacyRecordMagic => SyncedUpToItself,
            _ => SegmentHeaderSize,
        };
        header = new RecordHeader((int)length, (int)count, BinaryPrimitives.ReadInt64LittleEndian(available[16..]),
            BinaryPrimitives.ReadInt64LittleEndian(available[24..]), headerSize, synced);
        return true;
    }

    /// <summary>Whether the record's stored checksum matches its bytes.</summary>
    public static bool ChecksumMatches(ReadOnlySpan<byte> record) =>
        BinaryPrimitives.ReadUInt32LittleEndian(record[4..]) == Crc32C.Compute(record[8..]);

    /// <summary>Whether the entries of a checksummed record exactly fill its payload.</summary>
    public static bool EntriesFillPayload(ReadOnlySpan<byte> record, in RecordHeader header)
    {
        int entryCount = header.EntryCount;
        int offset = header.HeaderSize;
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
