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

    private readonly FileStream _file;
    private readonly string _path;
    private long _written;
    private bool _failed;
    private bool _disposed;

    private FeedPin(FileStream file, string path, long nextSequence)
    {
        _file = file;
        _path = path;
        _written = nextSequence;
    }

    /// <summary>The pin file's path.</summary>
    public string Path => _path;

    /// <summary>Pins the journal of the store in <paramref name="storeFolder"/> from <paramref name="nextSequence"/>
    /// on; null when the pin cannot be written (no write access to the folder, say).</summary>
    public static FeedPin? TryCreate(string storeFolder, long nextSequence)
    {
        string folder = System.IO.Path.Combine(storeFolder, ReaderPin.FolderName);
        string name = Guid.NewGuid().ToString("N");
        string temporary = System.IO.Path.Combine(folder, name + ".tmp");
        string path = System.IO.Path.Combine(folder, name + Extension);
        FileStream? file = null;
        try
        {
            Directory.CreateDirectory(folder);
            file = new FileStream(temporary, FileMode.CreateNew, FileAccess.ReadWrite,
                FileShare.Read | FileShare.Delete, bufferSize: 0);
            file.Write(Encode(nextSequence));
            File.Move(temporary, path);
            return new FeedPin(file, path, nextSequence);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            if (file is not null)
            {
                file.Dispose();
                TryDeleteFile(temporary);
            }

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
            RandomAccess.Write(_file.SafeFileHandle, Encode(nextSequence), 0);
            _written = nextSequence;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            _failed = true;
        }
    }

    /// <summary>The oldest next sequence the live feed pins in <paramref name="folder"/> name, deleting the pins of
    /// readers that died; null when there is none (or no such folder).</summary>
    public static long? OldestLive(IFileSystem fileSystem, string folder)
    {
        if (!fileSystem.DirectoryExists(folder))
        {
            return null;
        }

        string[] pins;
        try
        {
            pins = fileSystem.GetFiles(folder, "*" + Extension);
        }
        catch (DirectoryNotFoundException)
        {
            return null;
        }

        long? oldest = null;
        foreach (string pin in pins)
        {
            if (!ReaderPins.IsHeld(fileSystem, pin))
            {
                ReaderPins.TryDelete(fileSystem, pin);
                continue;
            }

            if (ReadPosition(fileSystem, pin) is long next)
            {
                oldest = Math.Min(oldest ?? long.MaxValue, next);
            }
        }

        return oldest;
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

    /// <summary>Deletes the pin and lets its lock go. A second call does nothing.</summary>
    public void Dispose()
    {
        if (_disposed)
        {
            return;
        }

        _disposed = true;
        TryDeleteFile(_path); // left behind, unlocked, if this fails: the writer deletes it
        _file.Dispose();
    }

    private static void TryDeleteFile(string path)
    {
        try
        {
            File.Delete(path);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
        }
    }
}
