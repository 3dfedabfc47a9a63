using System.IO.MemoryMappedFiles;

namespace Folio.Storage;

/// <summary>
/// A read-only memory mapping of the start of a file. Readers read committed bytes through <see cref="Span"/>
/// without a system call. The owner disposes it only when no reader can still touch it (the journal segment's
/// reference count guarantees this), since reading an unmapped view would crash the process.
/// </summary>
internal sealed unsafe class StorageMapping : IDisposable
{
    private readonly MemoryMappedFile _file;
    private readonly MemoryMappedViewAccessor _view;
    private byte* _pointer;

    public StorageMapping(FileStream stream, long length)
    {
        _file = MemoryMappedFile.CreateFromFile(stream, mapName: null, length, MemoryMappedFileAccess.Read, HandleInheritability.None, leaveOpen: true);
        try
        {
            _view = _file.CreateViewAccessor(0, length, MemoryMappedFileAccess.Read);
            byte* pointer = null;
            _view.SafeMemoryMappedViewHandle.AcquirePointer(ref pointer);
            _pointer = pointer + _view.PointerOffset;
            Length = length;
        }
        catch
        {
            _view?.Dispose();
            _file.Dispose();
            throw;
        }
    }

    /// <summary>The mapped length in bytes.</summary>
    public long Length { get; }

    /// <summary>The bytes <c>[offset, offset + length)</c> of the mapping. The caller keeps the range inside <see cref="Length"/>.</summary>
    public ReadOnlySpan<byte> Span(long offset, int length)
    {
        System.Diagnostics.Debug.Assert(offset >= 0 && offset + length <= Length);
        return new ReadOnlySpan<byte>(_pointer + offset, length);
    }

    public void Dispose()
    {
        if (_pointer != null)
        {
            _pointer = null;
            _view.SafeMemoryMappedViewHandle.ReleasePointer();
            _view.Dispose();
            _file.Dispose();
        }
    }
}
