using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// A process reading a store's files without opening the store (an export of a store a service holds) tells the
/// writing process which chunks its checkpoint reaches, so that the writer does not reuse them while it reads.
/// <para>
/// Protocol. A pin is a file <c>readers/&lt;guid&gt;.pin</c> beside the data file. The reader creates it as
/// <c>&lt;guid&gt;.tmp</c> (which the writer ignores), holding it open with a shared lock (<c>FileShare.Read</c>:
/// flock(LOCK_SH) on Unix, a share mode on Windows), writes the pinned checkpoint's generation and chunks, and
/// renames it to <c>.pin</c>: the writer never sees a pin without its lock or with half its bytes. The reader then
/// reads the data file's header again and keeps the pin only if the newest checkpoint is still the one pinned
/// (<see cref="ReaderPins"/> says why that suffices). Closing the pin deletes the file; a reader that dies leaves the
/// file unlocked, and the writer deletes it when it finds it so (<see cref="ReaderPins.ReadLive"/>).
/// </para>
/// <para>
/// Layout (little-endian): "FolioPin" (8 bytes), format version (u32, 1), chunk count n (u32), generation (i64), n
/// times chunk id (u32), offset (i64) and extent (i64), then the CRC-32C of everything before it (u32).
/// </para>
/// </summary>
internal sealed class ReaderPin : IDisposable
{
    /// <summary>The folder of the pins, beside the data file.</summary>
    public const string FolderName = "readers";

    /// <summary>A pin file's extension (a pin being written has <c>.tmp</c>).</summary>
    public const string Extension = ".pin";

    private const uint FormatVersion = 1;
    private const int HeaderSize = 24;
    private const int EntrySize = 20;
    private static ReadOnlySpan<byte> Magic => "FolioPin"u8;

    private readonly FileStream _file;
    private readonly string _path;
    private bool _disposed;

    private ReaderPin(FileStream file, string path)
    {
        _file = file;
        _path = path;
    }

    /// <summary>The pin file's path.</summary>
    public string Path => _path;

    /// <summary>The pin file, open for writing (a change-feed reader rewrites its position in place).</summary>
    internal Microsoft.Win32.SafeHandles.SafeFileHandle Handle => _file.SafeFileHandle;

    /// <summary>Pins <paramref name="chunks"/> of checkpoint <paramref name="generation"/> of the data file in
    /// <paramref name="storeFolder"/>; the caller then checks that the checkpoint is still the newest.</summary>
    public static ReaderPin Create(string storeFolder, long generation, IReadOnlyList<ChunkInfo> chunks) =>
        CreateFile(storeFolder, Extension, Encode(generation, chunks));

    /// <summary>Creates a pin file of any kind (this one's chunks, or a change-feed reader's
    /// <see cref="Journal.FeedPin"/>) in the <c>readers</c> folder of <paramref name="storeFolder"/>: written as
    /// <c>.tmp</c> under the shared lock, then renamed to <paramref name="extension"/>.</summary>
    internal static ReaderPin CreateFile(string storeFolder, string extension, ReadOnlySpan<byte> bytes)
    {
        string folder = System.IO.Path.Combine(storeFolder, FolderName);
        Directory.CreateDirectory(folder);
        string name = Guid.NewGuid().ToString("N");
        string temporary = System.IO.Path.Combine(folder, name + ".tmp");
        string path = System.IO.Path.Combine(folder, name + extension);
        var file = new FileStream(temporary, FileMode.CreateNew, FileAccess.ReadWrite,
            FileShare.Read | FileShare.Delete, bufferSize: 0);
        try
        {
            file.Write(bytes);
            File.Move(temporary, path);
            return new ReaderPin(file, path);
        }
        catch
        {
            file.Dispose();
            File.Delete(temporary);
            throw;
        }
    }

    /// <summary>Encodes a pin's bytes.</summary>
    internal static byte[] Encode(long generation, IReadOnlyList<ChunkInfo> chunks)
    {
        byte[] bytes = new byte[HeaderSize + (chunks.Count * EntrySize) + sizeof(uint)];
        Span<byte> span = bytes;
        Magic.CopyTo(span);
        BinaryPrimitives.WriteUInt32LittleEndian(span[8..], FormatVersion);
        BinaryPrimitives.WriteInt32LittleEndian(span[12..], chunks.Count);
        BinaryPrimitives.WriteInt64LittleEndian(span[16..], generation);
        for (int i = 0; i < chunks.Count; i++)
        {
            Span<byte> entry = span.Slice(HeaderSize + (i * EntrySize), EntrySize);
            BinaryPrimitives.WriteUInt32LittleEndian(entry, chunks[i].Id);
            BinaryPrimitives.WriteInt64LittleEndian(entry[4..], chunks[i].FileOffset);
            BinaryPrimitives.WriteInt64LittleEndian(entry[12..], chunks[i].Extent);
        }

        int end = bytes.Length - sizeof(uint);
        BinaryPrimitives.WriteUInt32LittleEndian(span[end..], Crc32C.Compute(span[..end]));
        return bytes;
    }

    /// <summary>Decodes a pin's bytes: its generation and chunks, or false when they are not a whole, valid
    /// pin.</summary>
    internal static bool TryDecode(ReadOnlySpan<byte> bytes, out long generation,
        out List<(uint Id, long Offset, long Extent)> chunks)
    {
        generation = 0;
        chunks = [];
        if (bytes.Length < HeaderSize + sizeof(uint) || !bytes[..8].SequenceEqual(Magic)
            || BinaryPrimitives.ReadUInt32LittleEndian(bytes[8..]) != FormatVersion)
        {
            return false;
        }

        int count = BinaryPrimitives.ReadInt32LittleEndian(bytes[12..]);
        if (count < 0 || (long)HeaderSize + ((long)count * EntrySize) + sizeof(uint) != bytes.Length)
        {
            return false;
        }

        int end = bytes.Length - sizeof(uint);
        if (Crc32C.Compute(bytes[..end]) != BinaryPrimitives.ReadUInt32LittleEndian(bytes[end..]))
        {
            return false;
        }

        generation = BinaryPrimitives.ReadInt64LittleEndian(bytes[16..]);
        chunks = new List<(uint, long, long)>(count);
        for (int i = 0; i < count; i++)
        {
            ReadOnlySpan<byte> entry = bytes.Slice(HeaderSize + (i * EntrySize), EntrySize);
            uint id = BinaryPrimitives.ReadUInt32LittleEndian(entry);
            chunks.Add((id, BinaryPrimitives.ReadInt64LittleEndian(entry[4..]),
                BinaryPrimitives.ReadInt64LittleEndian(entry[12..])));
        }

        return true;
    }

    /// <summary>Deletes the pin and lets its lock go; the writer may reuse the chunks from its next checkpoint on.
    /// A second call does nothing.</summary>
    public void Dispose()
    {
        if (_disposed)
        {
            return;
        }

        _disposed = true;
        try
        {
            File.Delete(_path);
        }
        catch (IOException)
        {
            // Left behind unlocked: the writer deletes it.
        }
        catch (UnauthorizedAccessException)
        {
        }

        _file.Dispose();
    }
}
