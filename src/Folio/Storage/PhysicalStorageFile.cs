using System.Runtime.CompilerServices;
using Microsoft.Win32.SafeHandles;

namespace Folio.Storage;

/// <summary>
/// A file on disk, read and written with <see cref="RandomAccess"/> (pread/pwrite). Uncached reads
/// (<see cref="ReadUncached"/>) go through a second handle opened with <c>O_DIRECT</c> by the first caller that asks
/// for the alignment (under <see cref="_uncachedLock"/>; published with a release store, read with an acquire load),
/// disposed with the file. A read the handle refuses (a file system that takes the flag but not the reads) turns
/// uncached reads off for the file: the alignment becomes 0, and that read and every later one go through the cache.
/// </summary>
internal sealed class PhysicalStorageFile : IStorageFile
{
    /// <summary>What uncached reads align to: the page size, a multiple of every logical block size Linux
    /// supports.</summary>
    private const int Alignment = 4096;

    private readonly FileStream _stream;
    private readonly SafeFileHandle _handle;
    private readonly Lock _uncachedLock = new();
    private SafeFileHandle? _uncached;
    private int _uncachedAlignment = -1; // -1: not asked yet

    /// <param name="path">The file.</param>
    /// <param name="mode">How to open or create it.</param>
    /// <param name="readOnly">Open for reads only, sharing the file with its writer (which shares it for
    /// reads).</param>
    public PhysicalStorageFile(string path, FileMode mode, bool readOnly = false)
    {
        Path = path;
        _stream = readOnly
            ? new FileStream(path, mode, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete, bufferSize: 0,
                FileOptions.None)
            : new FileStream(path, mode, FileAccess.ReadWrite, FileShare.Read | FileShare.Delete, bufferSize: 0,
                FileOptions.None);
        _handle = _stream.SafeFileHandle;
    }

    public string Path { get; }

    public long Length => RandomAccess.GetLength(_handle);

    public int Read(Span<byte> destination, long offset) => RandomAccess.Read(_handle, destination, offset);

    public int UncachedAlignment
    {
        get
        {
            int alignment = Volatile.Read(ref _uncachedAlignment);
            return alignment >= 0 ? alignment : OpenUncached();
        }
    }

    public int ReadUncached(Span<byte> destination, long offset)
    {
        if (Volatile.Read(ref _uncachedAlignment) > 0 && Volatile.Read(ref _uncached) is { } uncached)
        {
            try
            {
                return RandomAccess.Read(uncached, destination, offset);
            }
            catch (IOException)
            {
                // A file system that takes O_DIRECT at open may still refuse the reads (EINVAL: it wants a larger
                // alignment, or none of them): this file reads through the page cache from now on. A disk error
                // fails the buffered read below as well, and is reported from there.
                StopUncachedReads();
            }
        }

        return RandomAccess.Read(_handle, destination, offset);
    }

    public void Write(ReadOnlySpan<byte> source, long offset) => RandomAccess.Write(_handle, source, offset);

    public void Sync()
    {
        if (OperatingSystem.IsLinux())
        {
            // fdatasync: the data and the metadata needed to read it back, not the timestamps. Segments are
            // preallocated, so the file size never changes on the commit path and this is the cheapest durable sync.
            NativeMethods.DataSync(_handle, Path);
        }
        else
        {
            _stream.Flush(flushToDisk: true);
        }
    }

    public void AdviseWillNeed(long offset, long length) => NativeMethods.AdviseWillNeed(_handle, offset, length);

    public void WriteBack(long offset, long length, bool wait) =>
        NativeMethods.WriteBack(_handle, Path, offset, length, wait);

    public void Truncate(long length) => _stream.SetLength(length);

    public void SetLength(long length) => _stream.SetLength(length);

    public StorageMapping MapReadOnly(long length) => new(_stream, length);

    public void Dispose()
    {
        lock (_uncachedLock)
        {
            _uncached?.Dispose();
            _uncachedAlignment = 0;
        }

        _stream.Dispose();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void StopUncachedReads()
    {
        lock (_uncachedLock)
        {
            Volatile.Write(ref _uncachedAlignment, 0); // the handle stays open for reads under way; Dispose closes it
        }
    }

    private int OpenUncached()
    {
        lock (_uncachedLock)
        {
            if (_uncachedAlignment < 0)
            {
                SafeFileHandle? uncached = NativeMethods.OpenForUncachedReads(Path);
                Volatile.Write(ref _uncached, uncached);
                Volatile.Write(ref _uncachedAlignment, uncached is null ? 0 : Alignment);
            }

            return _uncachedAlignment;
        }
    }
}
