namespace Folio.Documents;

/// <summary>
/// The memory all of a store's <see cref="IdFilter"/>s may take together. A filter takes bytes before it allocates a
/// segment and gives them all back when its owner drops it (<see cref="IdFilter.Release"/>); a filter that cannot take
/// what it needs is not made, or stops growing (and is dropped). Any thread: takes and returns are interlocked.
/// </summary>
internal sealed class IdFilterBudget(long bytes)
{
    private long _remaining = bytes;

    /// <summary>The bytes no filter holds.</summary>
    public long Remaining => Volatile.Read(ref _remaining);

    /// <summary>Takes <paramref name="bytes"/> if that many remain.</summary>
    public bool TryTake(long bytes)
    {
        long remaining = Volatile.Read(ref _remaining);
        while (remaining >= bytes)
        {
            long seen = Interlocked.CompareExchange(ref _remaining, remaining - bytes, remaining);
            if (seen == remaining)
            {
                return true;
            }

            remaining = seen;
        }

        return false;
    }

    /// <summary>Gives back <paramref name="bytes"/> taken before.</summary>
    public void Return(long bytes) => Interlocked.Add(ref _remaining, bytes);
}
