namespace Folio.Buffers;

/// <summary>
/// A pin of one page in a <see cref="BufferPool"/> frame: its bytes stay in the frame, unchanged, until the handle is
/// disposed. Dispose it exactly once (a copy of the handle is the same pin); a span taken from <see cref="Bytes"/>
/// must not be used after that (Debug builds scribble frames that are evicted, so such a use fails loudly).
/// </summary>
internal readonly struct PageHandle : IDisposable
{
    private readonly BufferPool? _pool;

    internal PageHandle(BufferPool pool, int frame)
    {
        _pool = pool;
        Frame = frame;
    }

    /// <summary>The frame that holds the page.</summary>
    public int Frame { get; }

    /// <summary>The page's bytes: the whole frame (the page's own length is the caller's to know).</summary>
    public Span<byte> Bytes => _pool!.FrameBytes(Frame);

    /// <summary>Unpins the page.</summary>
    public void Dispose() => _pool?.Unpin(Frame);
}
