using System.Buffers;
using Folio.Buffers;

namespace Folio.Pages;

/// <summary>
/// A tree page held for reading (<see cref="IPageReader.Pin(PagePosition)"/>): a pinned buffer pool frame, or, for a
/// page larger than a frame, a rented array. Its bytes stay valid and unchanged until <see cref="Dispose"/>, which the
/// holder calls exactly once; a span taken from <see cref="Bytes"/> must not be used after it.
/// </summary>
internal readonly ref struct PinnedPage : IDisposable
{
    private readonly PageHandle _frame;
    private readonly byte[]? _rented;
    private readonly int _length;

    public PinnedPage(PageHandle frame, int length)
    {
        _frame = frame;
        _length = length;
    }

    public PinnedPage(byte[] rented, int length)
    {
        _rented = rented;
        _length = length;
    }

    /// <summary>The buffer pool frame that holds the page, or -1 for a rented array.</summary>
    public int Frame => _rented is null ? _frame.Frame : -1;

    /// <summary>The page's bytes, exactly its length.</summary>
    public ReadOnlySpan<byte> Bytes => _rented is null ? _frame.Bytes[.._length] : _rented.AsSpan(0, _length);

    public void Dispose()
    {
        if (_rented is null)
        {
            _frame.Dispose();
        }
        else
        {
            ArrayPool<byte>.Shared.Return(_rented);
        }
    }
}
