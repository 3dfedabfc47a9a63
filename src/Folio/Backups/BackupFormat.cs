using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Backups;

/// <summary>
/// The byte layout of a backup stream (docs/formats/backup.md). All integers are little-endian; checksums are
/// CRC-32C, as in the store's files.
/// <code>
/// stream header (32 bytes):
///   0 u64 magic "FOLIOBAK"   8 u32 format version (2)   12 u32 header size (32)
///  16 i64 created (UTC ticks)                            24 u32 zero   28 u32 CRC-32C of bytes [0, 28)
/// then frames, back to back:
///   0 u32 type   4 u32 index (0, 1, 2, ... in stream order)   8 u32 payload length (at most MaxPayload)
///  12 payload    12 + length: u32 CRC-32C of bytes [0, 12 + length)
/// frame types and payloads:
///   1 Begin      u32 kind (1 full, 2 incremental)   u32 data-file format version   i64 checkpoint generation
///                (0: none)   u32 chunk id   u32 0   i64 chunk offset   i64 chunk length   i64 checkpoint sequence C
///                (incremental: the last entry of the backup it follows)
///                i64 first entry (C + 1)   i64 last entry S   i32 chunk count   i32 0   i64 chunk bytes
///                i64 snapshot time (UTC ticks)   i64 journal segment size
///                i64 the time (UTC ticks) of the record that holds entry C, 0 when C is 0 or its time is unknown
///                (format version 1 ends before this field: 96 bytes)
///   2 Chunk      u32 chunk id   u32 0   i64 file offset   i64 length; the chunk's bytes follow in ChunkData frames
///   3 ChunkData  the next bytes of the current chunk
///   4 Entries    i64 record's first sequence   i64 record timestamp   i64 first sequence here   i32 count
///                then count times { u32 length, bytes }: consecutive entries of one journal record
///   5 LargeEntry i64 record's first sequence   i64 record timestamp   i64 sequence   i32 length; its bytes follow
///                in EntryData frames (an entry over LargeEntryThreshold bytes)
///   6 EntryData  the next bytes of the current large entry
///   7 End        i64 last entry S   i64 entries   i64 chunk bytes   i64 frames before this one
/// </code>
/// The index makes a dropped, repeated or reordered frame fail; the End frame's counts make a stream cut short at a
/// frame boundary fail; a restore accepts nothing after End. Entry C's time links a backup to the one before it in a
/// restore: a store's record times only grow, so another store's backup, or one of a copy that has since diverged,
/// names a different time for the entry that the backups before it end with.
/// </summary>
internal static class BackupFormat
{
    public const ulong Magic = 0x4B41_424F_494C_4F46; // "FOLIOBAK"
    public const int FormatVersion = 2;

    /// <summary>The oldest format a restore reads: version 1, whose Begin frame has no time for entry C.</summary>
    public const int OldestReadableVersion = 1;
    public const int StreamHeaderSize = 32;
    public const int FrameHeaderSize = 12;
    public const int FrameTrailerSize = 4;

    /// <summary>The largest payload a frame carries: 256 KiB plus room for an Entries frame's header.</summary>
    public const int MaxPayload = (256 * 1024) + 64;

    /// <summary>The chunk bytes one ChunkData frame carries.</summary>
    public const int DataPerFrame = 256 * 1024;

    /// <summary>An entry longer than this travels as LargeEntry and EntryData frames.</summary>
    public const int LargeEntryThreshold = 64 * 1024;

    public const int BeginSize = 104;
    public const int LegacyBeginSize = 96;
    public const int ChunkSize = 24;
    public const int EntriesHeaderSize = 28;
    public const int LargeEntrySize = 28;
    public const int EndSize = 32;

    /// <summary>The backup of a whole store: a checkpoint's chunks and the journal after it.</summary>
    public const int FullKind = 1;

    /// <summary>An incremental backup: journal entries only, from the sequence after the backup it follows (its
    /// Begin's checkpoint sequence names that backup's last entry; no chunks).</summary>
    public const int IncrementKind = 2;

    public enum FrameType : uint
    {
        Begin = 1,
        Chunk = 2,
        ChunkData = 3,
        Entries = 4,
        LargeEntry = 5,
        EntryData = 6,
        End = 7,
    }

    public static void WriteStreamHeader(Span<byte> destination, long createdTicks)
    {
        destination[..StreamHeaderSize].Clear();
        BinaryPrimitives.WriteUInt64LittleEndian(destination, Magic);
        BinaryPrimitives.WriteInt32LittleEndian(destination[8..], FormatVersion);
        BinaryPrimitives.WriteInt32LittleEndian(destination[12..], StreamHeaderSize);
        BinaryPrimitives.WriteInt64LittleEndian(destination[16..], createdTicks);
        BinaryPrimitives.WriteUInt32LittleEndian(destination[28..], Crc32C.Compute(destination[..28]));
    }

    /// <summary>Checks a stream header; returns null when it is valid (its format version in
    /// <paramref name="version"/>), else what is wrong.</summary>
    public static string? CheckStreamHeader(ReadOnlySpan<byte> header, out int version)
    {
        version = 0;
        if (BinaryPrimitives.ReadUInt64LittleEndian(header) != Magic)
        {
            return "it does not start with a Folio backup header";
        }

        if (BinaryPrimitives.ReadUInt32LittleEndian(header[28..]) != Crc32C.Compute(header[..28]))
        {
            return "the backup header fails its checksum";
        }

        version = BinaryPrimitives.ReadInt32LittleEndian(header[8..]);
        return version is >= OldestReadableVersion and <= FormatVersion
            ? null
            : $"the backup has format version {version}; this Folio reads versions {OldestReadableVersion} to "
                + $"{FormatVersion}";
    }

    /// <summary>Frames a payload already written at <paramref name="frame"/>[FrameHeaderSize..]: writes the header
    /// and the trailing checksum, and returns the frame's whole length.</summary>
    public static int Seal(Span<byte> frame, FrameType type, uint index, int payloadLength)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(frame, (uint)type);
        BinaryPrimitives.WriteUInt32LittleEndian(frame[4..], index);
        BinaryPrimitives.WriteInt32LittleEndian(frame[8..], payloadLength);
        int end = FrameHeaderSize + payloadLength;
        BinaryPrimitives.WriteUInt32LittleEndian(frame[end..], Crc32C.Compute(frame[..end]));
        return end + FrameTrailerSize;
    }

    /// <summary>What a Begin frame says. <paramref name="CheckpointTimestamp"/> is the time of the record that holds
    /// entry <paramref name="CheckpointSequence"/> (0: none, or unknown).</summary>
    public readonly record struct Begin(int Kind, int DataFileVersion, long Generation, uint ChunkId,
        long ChunkOffset, long ChunkLength, long CheckpointSequence, long FirstEntry, long LastEntry, int ChunkCount,
        long ChunkBytes, long SnapshotTicks, long SegmentSize, long CheckpointTimestamp)
    {
        public void Write(Span<byte> payload)
        {
            payload[..BeginSize].Clear();
            BinaryPrimitives.WriteInt32LittleEndian(payload, Kind);
            BinaryPrimitives.WriteInt32LittleEndian(payload[4..], DataFileVersion);
            BinaryPrimitives.WriteInt64LittleEndian(payload[8..], Generation);
            BinaryPrimitives.WriteUInt32LittleEndian(payload[16..], ChunkId);
            BinaryPrimitives.WriteInt64LittleEndian(payload[24..], ChunkOffset);
            BinaryPrimitives.WriteInt64LittleEndian(payload[32..], ChunkLength);
            BinaryPrimitives.WriteInt64LittleEndian(payload[40..], CheckpointSequence);
            BinaryPrimitives.WriteInt64LittleEndian(payload[48..], FirstEntry);
            BinaryPrimitives.WriteInt64LittleEndian(payload[56..], LastEntry);
            BinaryPrimitives.WriteInt32LittleEndian(payload[64..], ChunkCount);
            BinaryPrimitives.WriteInt64LittleEndian(payload[72..], ChunkBytes);
            BinaryPrimitives.WriteInt64LittleEndian(payload[80..], SnapshotTicks);
            BinaryPrimitives.WriteInt64LittleEndian(payload[88..], SegmentSize);
            BinaryPrimitives.WriteInt64LittleEndian(payload[96..], CheckpointTimestamp);
        }

        /// <summary>Decodes a Begin payload of <see cref="BeginSize"/> bytes, or of <see cref="LegacyBeginSize"/>
        /// (format version 1: no time for entry C).</summary>
        public static Begin Read(ReadOnlySpan<byte> payload) => new(
            BinaryPrimitives.ReadInt32LittleEndian(payload),
            BinaryPrimitives.ReadInt32LittleEndian(payload[4..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[8..]),
            BinaryPrimitives.ReadUInt32LittleEndian(payload[16..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[24..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[32..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[40..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[48..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[56..]),
            BinaryPrimitives.ReadInt32LittleEndian(payload[64..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[72..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[80..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[88..]),
            payload.Length >= BeginSize ? BinaryPrimitives.ReadInt64LittleEndian(payload[96..]) : 0);
    }

    /// <summary>What an End frame says.</summary>
    public readonly record struct End(long LastEntry, long Entries, long ChunkBytes, long Frames)
    {
        public void Write(Span<byte> payload)
        {
            BinaryPrimitives.WriteInt64LittleEndian(payload, LastEntry);
            BinaryPrimitives.WriteInt64LittleEndian(payload[8..], Entries);
            BinaryPrimitives.WriteInt64LittleEndian(payload[16..], ChunkBytes);
            BinaryPrimitives.WriteInt64LittleEndian(payload[24..], Frames);
        }

        public static End Read(ReadOnlySpan<byte> payload) => new(
            BinaryPrimitives.ReadInt64LittleEndian(payload),
            BinaryPrimitives.ReadInt64LittleEndian(payload[8..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[16..]),
            BinaryPrimitives.ReadInt64LittleEndian(payload[24..]));
    }
}
