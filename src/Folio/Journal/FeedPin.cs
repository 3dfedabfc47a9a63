using System.Buffers.Binary;
using Folio.Pages;
using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// A change-feed reader in another process (<see cref="DocumentChanges.ReadFilesAsync"/>, <c>folio tail</c>) tells
/// the writing process where it is in the journal, so that the writer's checkpoints do not purge the segments it has
/// not read yet (within <see cref="DocumentStoreOptions.MaxChangeFeedLag"/>, as for a stream in the writer's own
/// process).
/// <para>
/// Protocol. A pin is a file <c>readers/&lt;guid&gt;.feed</c> in the store's folder (beside the data file's chunk
/// pins, <see cref="ReaderPin"/>). The reader creates it as <c>.tmp</c> holding it open with a shared lock, writes
/// its next sequence, and renames it, so the writer never sees a pin without its lock or with half its bytes; then it
/// rewrites the sequence in place as it reads (one write of <see cref="Size"/> bytes at offset 0). The writer reads
/// the live pins before each purge (<see cref="OldestLive"/>): a pin it can lock exclusively belongs to a reader that
/// died and is deleted; a live pin whose bytes fail their checksum is read again (it may have met the reader's
/// rewrite), and one that keeps failing holds the whole journal, within the bound.
/// A pin only keeps segments: a reader whose position was purged anyway fails with
/// <see cref="JournalPositionPurgedException"/>, as without it. Creating and updating a pin is best effort: a reader
/// that cannot write the store's folder reads without one.
/// </para>
/// <para>
/// Layout (little-endian): "FolioFed" (8 bytes), format version (u32, 1), reserved (u32, 0), next sequence (i64),
/// then the CRC-32C of everything before it (u32).
/// </para>
/// </summary>
internal sealed class FeedPin : IDisposable
{
    /// <summary>A feed pin's extension.</summary>
    public const string Extension = ".feed";

    /// <summary>A pin's size in bytes.</summary>
    public const int Size = 28;

    private const uint FormatVersion = 1;
    private static ReadOnlySpan<byte> Magic => "FolioFed"u8;

    private readonly ReaderPin _file; // the pin file: created, locked and deleted as a chunk pin's
    private long _written;
    private bool _failed;
    private bool _disposed;

    private FeedPin(ReaderPin file, long nextSequence)
    {
        _file = file;
        _written = nextSequence;
    }

    /// <summary>The pin file's path.</summary>
    public string Path => _file.Path;

    /// <summary>Pins the journal of the store in <paramref name="storeFolder"/> from <paramref name="nextSequence"/>
    /// on; null when the pin cannot be written (no write access to the folder, say).</summary>
    public static FeedPin? TryCreate(string storeFolder, long nextSequence)
    {
        try
        {
            return new FeedPin(ReaderPin.CreateFile(storeFolder, Extension, Encode(nextSequence)), nextSequence);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null;
        }
    }

    /// <summary>Moves the pin to <paramref name="nextSequence"/> (the reader has read what comes before). Best
    /// effort: a failed write leaves the older position, which keeps more, and stops further updates.</summary>
    public void Advance(long nextSequence)
    {
        if (_disposed || _failed || nextSequence <= _written)
        {
            return;
        }

        try
        {
            RandomAccess.Write(_file.Handle, Encode(nextSequence), 0);
            _written = nextSequence;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            _failed = true;
        }
    }

    /// <summary>The oldest next sequence the live feed pins in <paramref name="folder"/> name, deleting the pins of
    /// readers that died; null when there is none (or no such folder).</summary>
    public static long? OldestLive(IFileSystem fileSystem, string folder) => Live(fileSystem, folder).Oldest;

    /// <summary>The readers holding live feed pins in <paramref name="folder"/> and the oldest next sequence they
    /// name (null when there is none, or no such folder); the pins of readers that died are deleted unless
    /// <paramref name="deleteDead"/> is false.</summary>
    public static (int Readers, long? Oldest) Live(IFileSystem fileSystem, string folder, bool deleteDead = true)
    {
        int readers = 0;
        long? oldest = null;
        foreach (string pin in ReaderPins.LivePins(fileSystem, folder, Extension, deleteDead) ?? [])
        {
            if (ReadPosition(fileSystem, pin) is long next)
            {
                readers++;
                oldest = Math.Min(oldest ?? long.MaxValue, next);
            }
        }

        return (readers, oldest);
    }

    /// <summary>The position a live pin names; 1 (hold everything, within the bound) when three reads in a row find
    /// bytes that fail their checksum (each may have met the reader's rewrite); null when the pin is gone.</summary>
    private static long? ReadPosition(IFileSystem fileSystem, string pin)
    {
        for (int attempt = 0; attempt < 3; attempt++)
        {
            if (ReaderPins.TryReadAll(fileSystem, pin) is not { } bytes)
            {
                return null;
            }

            if (TryDecode(bytes, out long next))
            {
                return next;
            }
        }

        return 1;
    }

    /// <summary>Encodes a pin's bytes.</summary>
    internal static byte[] Encode(long nextSequence)
    {
        byte[] bytes = new byte[Size];
        Magic.CopyTo(bytes);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes.AsSpan(8), FormatVersion);
        BinaryPrimitives.WriteInt64LittleEndian(bytes.AsSpan(16), nextSequence);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes.AsSpan(24), Crc32C.Compute(bytes.AsSpan(0, 24)));
        return bytes;
    }

    /// <summary>Decodes a pin's bytes: false when they are not a whole, valid pin.</summary>
    internal static bool TryDecode(ReadOnlySpan<byte> bytes, out long nextSequence)
    {
        nextSequence = 0;
        if (bytes.Length != Size || !bytes[..8].SequenceEqual(Magic)
            || BinaryPrimitives.ReadUInt32LittleEndian(bytes[8..]) != FormatVersion
            || Crc32C.Compute(bytes[..24]) != BinaryPrimitives.ReadUInt32LittleEndian(bytes[24..]))
        {
            return false;
        }

        nextSequence = BinaryPrimitives.ReadInt64LittleEndian(bytes[16..]);
        return nextSequence >= 1;
    }

    /// <summary>Deletes the pin and lets its lock go (left behind, unlocked, if the delete fails: the writer deletes
    /// it). A second call does nothing.</summary>
    public void Dispose()
    {
        _disposed = true;
        _file.Dispose();
    }
}
