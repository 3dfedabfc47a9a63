namespace Folio.Pages;

/// <summary>
/// Buffers for the uncached reads of runs (<see cref="PageCache.ReadRun"/>): arrays on the pinned object heap, so a
/// buffer's address never moves and its aligned part stays aligned, big enough for a run widened to the alignment on
/// both ends. Reused, because a fresh buffer of this size costs this process page faults on every read; any thread
/// rents one for a read and returns it after (under a lock: a rent is one per run read, beside a disk read). At most
/// <see cref="Kept"/> wait for reuse; a reader that finds none allocates one, which the collector frees if it is not
/// kept.
/// </summary>
internal sealed class RunBuffers
{
    /// <summary>The most buffers kept for reuse.</summary>
    public const int Kept = 8;

    /// <summary>The largest alignment a buffer allows for: the page size.</summary>
    public const int MaxAlignment = 4096;

    private readonly int _size;
    private readonly Lock _lock = new();
    private readonly Stack<byte[]> _free = new(Kept);

    /// <summary>Buffers that hold <paramref name="runBytes"/> bytes widened on both ends to an alignment of at most
    /// <see cref="MaxAlignment"/>, from an aligned index.</summary>
    public RunBuffers(int runBytes) => _size = runBytes + (3 * MaxAlignment);

    public byte[] Rent()
    {
        lock (_lock)
        {
            if (_free.TryPop(out byte[]? buffer))
            {
                return buffer;
            }
        }

        return GC.AllocateUninitializedArray<byte>(_size, pinned: true);
    }

    public void Return(byte[] buffer)
    {
        lock (_lock)
        {
            if (_free.Count < Kept)
            {
                _free.Push(buffer);
            }
        }
    }

    /// <summary>The first index of <paramref name="buffer"/> (a pinned one from <see cref="Rent"/>) whose address is
    /// a multiple of <paramref name="alignment"/> (a power of two up to <see cref="MaxAlignment"/>).</summary>
    public static unsafe int AlignedIndex(byte[] buffer, int alignment)
    {
        fixed (byte* start = buffer)
        {
            return (int)((alignment - ((nint)start & (alignment - 1))) & (alignment - 1));
        }
    }
}
