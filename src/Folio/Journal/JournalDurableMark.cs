using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// A durable point recorded outside the segments, in <c>journal.state</c>: every entry up to
/// <see cref="Sequence"/> was durable, and segment <see cref="SegmentFirstSequence"/> was durable up to
/// <see cref="SyncedLength"/> bytes. Both stay true as the journal grows, so any mark written is a lower bound that
/// recovery can hold the files to: a journal that ends before <see cref="Sequence"/> lost its newest segment (or part
/// of it), and damage below <see cref="SyncedLength"/> in that segment is corruption, never a torn tail.
/// <para>
/// Layout (52 bytes, little-endian): u32 magic "FJST", u32 version (2), u64 sequence, u64 segment first sequence,
/// u64 synced length, 16 bytes store id (the store the journal belongs to, as its segments' headers name it), u32
/// CRC-32C of bytes [0, 48). Version 1 (36 bytes) had no store id and its checksum at 32; it is read as well, with
/// an empty id. Written as a new file (temporary name, fdatasync, rename over the old one, fsync of the folder), so
/// a crash leaves the old mark or the new one, never a torn one.
/// </para>
/// <para>
/// Written by the journal at rotation (naming the new segment, so the loss of the newest segment file is detected),
/// at a clean close, at the end of recovery, and when the store is idle
/// (<see cref="WriteAheadJournal.MarkDurableIfIdle"/>).
/// </para>
/// </summary>
internal readonly record struct JournalDurableMark(long Sequence, long SegmentFirstSequence, long SyncedLength,
    Guid StoreId = default)
{
    public const string FileName = "journal.state";
    private const string TemporaryFileName = "journal.state.tmp";
    private const uint Magic = 0x5453_4A46; // "FJST"
    private const uint Version = 2;
    private const int Size = 52;
    private const uint VersionWithoutStoreId = 1;
    private const int SizeWithoutStoreId = 36;

    /// <summary>Replaces the mark file in <paramref name="directory"/> with this mark, durably.</summary>
    public void Write(IFileSystem fileSystem, string directory)
    {
        Span<byte> bytes = stackalloc byte[Size];
        BinaryPrimitives.WriteUInt32LittleEndian(bytes, Magic);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes[4..], Version);
        BinaryPrimitives.WriteInt64LittleEndian(bytes[8..], Sequence);
        BinaryPrimitives.WriteInt64LittleEndian(bytes[16..], SegmentFirstSequence);
        BinaryPrimitives.WriteInt64LittleEndian(bytes[24..], SyncedLength);
        StoreId.TryWriteBytes(bytes[32..]);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes[48..], Crc32C.Compute(bytes[..48]));
        string temporary = Path.Combine(directory, TemporaryFileName);
        fileSystem.DeleteFile(temporary);
        using (IStorageFile file = fileSystem.OpenFile(temporary, FileMode.CreateNew))
        {
            file.Write(bytes, 0);
            file.Sync();
        }

        fileSystem.MoveFile(temporary, Path.Combine(directory, FileName), overwrite: true);
        fileSystem.SyncDirectory(directory);
    }

    /// <summary>Whether this mark says more than <paramref name="other"/> (a later segment, or more of the same
    /// one).</summary>
    public bool IsAhead(in JournalDurableMark other) =>
        SegmentFirstSequence > other.SegmentFirstSequence
        || (SegmentFirstSequence == other.SegmentFirstSequence
            && (SyncedLength > other.SyncedLength || Sequence > other.Sequence));

    /// <summary>Reads the mark file; false when there is none.</summary>
    /// <exception cref="JournalCorruptedException">The file exists but is not a valid mark.</exception>
    public static bool TryRead(IFileSystem fileSystem, string directory, out JournalDurableMark mark)
    {
        mark = default;
        string path = Path.Combine(directory, FileName);
        if (!fileSystem.FileExists(path))
        {
            return false;
        }

        Span<byte> bytes = stackalloc byte[Size];
        int read;
        using (IStorageFile file = fileSystem.OpenFileForReading(path))
        {
            read = file.Length is Size or SizeWithoutStoreId ? file.Read(bytes[..(int)file.Length], 0) : 0;
        }

        int checksummed = read - 4;
        if (read is not (Size or SizeWithoutStoreId)
            || BinaryPrimitives.ReadUInt32LittleEndian(bytes) != Magic
            || BinaryPrimitives.ReadUInt32LittleEndian(bytes[checksummed..]) != Crc32C.Compute(bytes[..checksummed]))
        {
            ThrowHelper.ThrowJournalCorrupted(path, 0, "the journal's durable mark is damaged. It only names the " +
                "newest segment and the last durable commit, so that a lost segment file is caught: if no segment " +
                "file is missing, delete it and the store opens from its segments alone");
        }

        if (BinaryPrimitives.ReadUInt32LittleEndian(bytes[4..]) != (read == Size ? Version : VersionWithoutStoreId))
        {
            ThrowHelper.ThrowJournalCorrupted(path, 4, "the journal's durable mark has an unsupported version");
        }

        mark = new JournalDurableMark(
            BinaryPrimitives.ReadInt64LittleEndian(bytes[8..]),
            BinaryPrimitives.ReadInt64LittleEndian(bytes[16..]),
            BinaryPrimitives.ReadInt64LittleEndian(bytes[24..]),
            read == Size ? new Guid(bytes.Slice(32, 16)) : Guid.Empty);
        return true;
    }
}
