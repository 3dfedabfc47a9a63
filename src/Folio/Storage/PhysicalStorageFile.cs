using Microsoft.Win32.SafeHandles;

namespace Folio.Storage;

/// <summary>A file on disk, read and written with <see cref="RandomAccess"/> (pread/pwrite).</summary>
internal sealed class PhysicalStorageFile : IStorageFile
{
    private readonly FileStream _stream;
    private readonly SafeFileHandle _handle;

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

    public void Dispose() => _stream.Dispose();
}
