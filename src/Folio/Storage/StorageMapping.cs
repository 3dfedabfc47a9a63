using System.IO.MemoryMappedFiles;

namespace Folio.Storage;

/// <summary>
/// A read-only memory mapping of the start of a file. Readers read committed bytes through <see cref="Span"/>
/// without a system call. The owner disposes it only when no reader can still touch it (the journal segment's
/// reference count guarantees this), since reading an unmapped view would crash the process.
/// <para>
/// The mapping keeps no file descriptor: the mapping object is closed as soon as the view exists (the kernel keeps
/// the pages mapped until the view is unmapped), so a journal with many sealed segments holds one memory map per
/// segment and no open files.
/// </para>
/// </summary>
internal sealed unsafe class StorageMapping : IDisposable
{
    private readonly MemoryMappedViewAccessor _view;
    private byte* _pointer;

    public StorageMapping(FileStream stream, long length)
    {
        using (MemoryMappedFile file = MemoryMappedFile.CreateFromFile(stream, mapName: null, length,
            MemoryMappedFileAccess.Read, HandleInheritability.None, leaveOpen: true))
        {
            _view = file.CreateViewAccessor(0, length, MemoryMappedFileAccess.Read);
        }

        byte* pointer = null;
        _view.SafeMemoryMappedViewHandle.AcquirePointer(ref pointer);
        _pointer = pointer + _view.PointerOffset;
        Length = length;
    }

    /// <summary>The mapped length in bytes.</summary>
    public long Length { get; }

    /// <summary>The bytes <c>[offset, offset + length)</c> of the mapping. The caller keeps the range inside
    /// <see cref="Length"/>.</summary>
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
        }
    }
}
