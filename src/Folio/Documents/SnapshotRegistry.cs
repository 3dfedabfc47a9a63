namespace Folio.Documents;

/// <summary>
/// The snapshots open by readers, so the committer knows the oldest one still in use and never prunes a version it
/// could need.
/// <para>
/// Protocol (lock-free on the reader side). A reader reads the visible sequence S, claims a free slot with a CAS
/// (0 to S), then reads the visible sequence again: if it moved, it frees the slot and starts over. The committer
/// computes <c>oldest = min(visible, every claimed slot)</c> before it applies a batch and prunes only versions
/// hidden behind the one visible at <c>oldest</c>. Either the committer's scan saw the reader's slot, or it ran
/// while the visible sequence was still S (so <c>oldest</c> was at most S), or the visible sequence moved and the
/// reader's re-check fails: a reader never holds a snapshot whose versions were pruned.
/// </para>
/// </summary>
internal sealed class SnapshotRegistry
{
    /// <summary>Snapshots that can be open at once; one more waits for a reader to close its snapshot.</summary>
    public const int MaxOpenSnapshots = 4096;

    private readonly long[] _slots = new long[MaxOpenSnapshots];
    private int _highWater;

    /// <summary>Registers a snapshot of the current <paramref name="visible"/> sequence; returns its slot.</summary>
    public (int Slot, long Sequence) Open(ref long visible)
    {
        while (true)
        {
            long sequence = Volatile.Read(ref visible);
            int slot = Claim(Math.Max(sequence, 1));
            if (Volatile.Read(ref visible) == sequence)
            {
                return (slot, sequence);
            }

            Close(slot);
        }
    }

    /// <summary>Frees a slot.</summary>
    public void Close(int slot) => Volatile.Write(ref _slots[slot], 0);

    /// <summary>The oldest registered snapshot, or <paramref name="visible"/> when none is older.</summary>
    public long Oldest(long visible)
    {
        long oldest = visible;
        long[] slots = _slots;
        int used = Volatile.Read(ref _highWater);
        for (int i = 0; i < used; i++)
        {
            long value = Volatile.Read(ref slots[i]);
            if (value != 0 && value < oldest)
            {
                oldest = value;
            }
        }

        return oldest;
    }

    /// <summary>The number of open snapshots (tests and diagnostics).</summary>
    public int OpenCount
    {
        get
        {
            int count = 0;
            foreach (long value in _slots)
            {
                count += value != 0 ? 1 : 0;
            }

            return count;
        }
    }

    private int Claim(long sequence)
    {
        // First fit from slot 0 keeps the committer's scan short: it reads only up to the highest slot ever used.
        var spin = new SpinWait();
        while (true)
        {
            for (int i = 0; i < _slots.Length; i++)
            {
                if (Volatile.Read(ref _slots[i]) == 0 && Interlocked.CompareExchange(ref _slots[i], sequence, 0) == 0)
                {
                    int used = Volatile.Read(ref _highWater);
                    while (used <= i)
                    {
                        int seen = Interlocked.CompareExchange(ref _highWater, i + 1, used);
                        used = seen == used ? i + 1 : seen;
                    }

                    return i;
                }
            }

            // More than MaxOpenSnapshots readers at once: wait for one to close (never for a writer).
            spin.SpinOnce();
        }
    }
}
