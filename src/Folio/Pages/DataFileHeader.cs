using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// One of the data file's two header slots (4 KiB each, at offsets 0 and 4096; docs/formats/pages.md). A checkpoint
/// writes generation G into slot G % 2 after its chunk is durable, so a torn header write leaves the other slot,
/// the previous checkpoint, intact. Layout (little-endian):
/// <code>
///  0  u64 magic "FOLIOPGS"    8  u32 format version     12 u32 slot size (4096)
/// 16  u64 generation         24  u32 chunk id           28 u32 0
/// 32  u64 chunk offset       40  u64 chunk length       48 u64 checkpoint sequence
/// 56  u32 CRC-32C of bytes [0, 56)
/// 60  16 store id (the store that wrote the checkpoint)   76 u32 CRC-32C of bytes [0, 76)
/// </code>
/// Bytes 60 to 80 are zero in slots written before stores had ids (the id is then <see cref="Guid.Empty"/>); a slot
/// with an id whose second checksum fails is read as torn.
/// </summary>
internal readonly record struct DataFileHeader(
    long Generation, uint ChunkId, long ChunkOffset, long ChunkLength, long CheckpointSequence, Guid StoreId = default)
{
    public const ulong Magic = 0x5347_5050_494C_4F46; // "FOLIOPGS"
    /// <summary>The version this Folio writes: 3, leaves with a fingerprint per id after their slot directory. It
    /// reads versions 1 (pages without slots, decoded to be read) and 2 (leaves without fingerprints,
    /// binary-searched) too, and a file holds pages of every version it was written with; an older Folio refuses a
    /// newer file instead of misreading it.</summary>
    public const int FormatVersion = 3;

    /// <summary>The oldest version this Folio reads.</summary>
    public const int OldestReadableVersion = 1;
    public const int SlotSize = 4096;
    public const int SlotCount = 2;

    /// <summary>Where the first chunk may start: after both slots.</summary>
    public const long DataStart = SlotSize * SlotCount;

    private const int ChecksumOffset = 56;
    private const int StoreIdOffset = 60;
    private const int StoreIdChecksumOffset = 76;

    public static long SlotOffset(long generation) => (generation % SlotCount) * SlotSize;

    public void Write(Span<byte> slot)
    {
        slot[..SlotSize].Clear();
        BinaryPrimitives.WriteUInt64LittleEndian(slot, Magic);
        BinaryPrimitives.WriteInt32LittleEndian(slot[8..], FormatVersion);
        BinaryPrimitives.WriteInt32LittleEndian(slot[12..], SlotSize);
        BinaryPrimitives.WriteInt64LittleEndian(slot[16..], Generation);
        BinaryPrimitives.WriteUInt32LittleEndian(slot[24..], ChunkId);
        BinaryPrimitives.WriteInt64LittleEndian(slot[32..], ChunkOffset);
        BinaryPrimitives.WriteInt64LittleEndian(slot[40..], ChunkLength);
        BinaryPrimitives.WriteInt64LittleEndian(slot[48..], CheckpointSequence);
        BinaryPrimitives.WriteUInt32LittleEndian(slot[ChecksumOffset..], Crc32C.Compute(slot[..ChecksumOffset]));
        if (StoreId != Guid.Empty)
        {
            StoreId.TryWriteBytes(slot[StoreIdOffset..]);
            BinaryPrimitives.WriteUInt32LittleEndian(slot[StoreIdChecksumOffset..],
                Crc32C.Compute(slot[..StoreIdChecksumOffset]));
        }
    }

    /// <summary>
    /// Decodes a slot. Returns null for a slot that was never written or whose checksum fails (a torn write: the
    /// other slot decides). Throws <see cref="StoreCorruptedException"/> for an intact slot of another format version
    /// (<paramref name="path"/> names the file in the message).
    /// </summary>
    public static DataFileHeader? TryRead(ReadOnlySpan<byte> slot, string path, long offset)
    {
        if (slot.Length < SlotSize || BinaryPrimitives.ReadUInt64LittleEndian(slot) != Magic
            || BinaryPrimitives.ReadUInt32LittleEndian(slot[ChecksumOffset..])
                != Crc32C.Compute(slot[..ChecksumOffset]))
        {
            return null;
        }

        int version = BinaryPrimitives.ReadInt32LittleEndian(slot[8..]);
        if (version is < OldestReadableVersion or > FormatVersion)
        {
            ThrowHelper.ThrowStoreCorrupted(path, offset,
                $"the data file has format version {version}; this Folio reads versions {OldestReadableVersion} "
                + $"to {FormatVersion}");
        }

        var storeId = new Guid(slot.Slice(StoreIdOffset, 16));
        if (storeId != Guid.Empty && BinaryPrimitives.ReadUInt32LittleEndian(slot[StoreIdChecksumOffset..])
            != Crc32C.Compute(slot[..StoreIdChecksumOffset]))
        {
            return null;
        }

        return new DataFileHeader(
            BinaryPrimitives.ReadInt64LittleEndian(slot[16..]),
            BinaryPrimitives.ReadUInt32LittleEndian(slot[24..]),
            BinaryPrimitives.ReadInt64LittleEndian(slot[32..]),
            BinaryPrimitives.ReadInt64LittleEndian(slot[40..]),
            BinaryPrimitives.ReadInt64LittleEndian(slot[48..]),
            storeId);
    }
}
