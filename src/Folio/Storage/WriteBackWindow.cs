namespace Folio.Storage;

/// <summary>
/// Sends the bytes of a large write to the disk while it is being written, with at most <see cref="Limit"/> bytes on
/// their way at a time (<see cref="IStorageFile.WriteBack"/>). Left alone, the bytes of a write of many megabytes wait
/// in the page cache for the fsync that makes them durable, which then sends them in one burst: after the writer has
/// finished instead of while it works, and with every fsync on the same disk (a journal's) queued behind them.
/// Nothing here is durable; the writer's fsync still is what makes the bytes so, and a write-back that fails must fail
/// the writes it covers, as a failed write would.
/// </summary>
/// <remarks>Owned by one thread at a time (a checkpoint's, a restore's); not thread-safe.</remarks>
internal sealed class WriteBackWindow
{
    private readonly Action<long, long, bool> _writeBack;
    private readonly Queue<(long Offset, long Length)> _inFlight = new();
    private long _inFlightBytes;

    /// <param name="writeBack">The file's write-back: offset, length, and whether to wait until the range is
    /// written.</param>
    /// <param name="limit">The most bytes on their way at a time, unless one range alone is larger.</param>
    public WriteBackWindow(Action<long, long, bool> writeBack, long limit)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(limit);
        _writeBack = writeBack;
        Limit = limit;
    }

    /// <summary>The most bytes on their way at a time.</summary>
    public long Limit { get; }

    /// <summary>Bytes whose write-back was started and not yet waited for.</summary>
    public long InFlightBytes => _inFlightBytes;

    /// <summary>Waits for the oldest ranges on their way until <paramref name="length"/> more bytes fit under
    /// <see cref="Limit"/> (or none is left).</summary>
    /// <exception cref="IOException">A write-back failed.</exception>
    public void MakeRoom(long length)
    {
        while (_inFlight.Count > 0 && _inFlightBytes + length > Limit)
        {
            (long offset, long bytes) = _inFlight.Dequeue();
            _inFlightBytes -= bytes;
            _writeBack(offset, bytes, true);
        }
    }

    /// <summary>Starts the write-back of <paramref name="length"/> bytes written at <paramref name="offset"/>
    /// without waiting for it.</summary>
    /// <exception cref="IOException">The write-back could not be started.</exception>
    public void Start(long offset, long length)
    {
        if (length <= 0)
        {
            return;
        }

        _writeBack(offset, length, false);
        _inFlight.Enqueue((offset, length));
        _inFlightBytes += length;
    }
}
