using System.Collections.Concurrent;
using System.Runtime.CompilerServices;

namespace Folio.Documents;

/// <summary>
/// The snapshots open by readers, so the committer knows the oldest one still in use and never prunes a version it
/// could need; and the rules that keep a forgotten snapshot from blocking readers or pinning versions forever.
/// <para>
/// Owners. <b>Readers</b> (any thread) open and close snapshots: each open snapshot is an <see cref="Entry"/> in a
/// slot. <b>The committer</b> (the index's single writer) computes the oldest snapshot before it applies a batch
/// (<see cref="Oldest"/>) and is the only one that expires entries. Slots live in chunks that are only ever added
/// (under <see cref="_growLock"/>, rare); a reader never waits for a free slot: a closed slot's index goes to
/// <see cref="_free"/>, and when none is free the registry grows.
/// </para>
/// <para>
/// Registration. A reader reads the visible sequence S (acquire), creates an entry for S, publishes it in a slot
/// (<see cref="Volatile.Write{T}(ref T, T)"/>, then a full fence), then reads the visible sequence again: if it moved,
/// it closes the entry and starts over. The committer publishes a batch's sequence with a full fence
/// (<c>Interlocked.Exchange</c> in the index) before it next scans the slots. So either its scan sees the reader's
/// entry, or its scan ran while the visible sequence was still S (then its oldest is at most S), or the visible
/// sequence moved before the reader's re-read and the reader starts over (both sides store, fence, then load: the
/// store-buffering litmus, which a fence on each side rules out).
/// </para>
/// <para>
/// Scans are amortized. The oldest computed by a scan stays a safe lower bound until the next one: every entry
/// registered later has a sequence at least the visible sequence at its registration, which is at least that oldest.
/// So the committer rescans every <c>max(1, slots / 256)</c> batches: with a few readers that is every batch, and a
/// registry grown to 100,000 slots by leaked sessions costs about 400 slot reads per batch, not 100,000. The price is
/// that versions a scan could have released wait for the next scan. When no snapshot is registered at all
/// (<see cref="_registered"/> is zero) the committer needs no scan: a reader increments that count (a full fence)
/// before it re-reads the visible sequence, and the committer reads it after publishing the visible sequence with a
/// full fence, so a count of zero means every reader still registering will see the new visible sequence (or start
/// over), and the visible sequence itself is the oldest.
/// </para>
/// <para>
/// Forgotten snapshots. A session that is never disposed but becomes unreachable releases its entry from the
/// finalizer of its <see cref="IndexSnapshot"/> (the registry references the entry, never the snapshot, so the
/// snapshot can be collected). A snapshot kept reachable but open longer than the maximum age is expired by the
/// committer's scan: a compare-exchange of the entry's state from open to expired (a full fence) before the scan's
/// result is used to prune. A reader checks its entry's state after every read (acquire): if a prune cut a version
/// the read walked into, the reader's load of that cut (release, after the expiry) makes the expiry visible to the
/// check, so the read throws <see cref="SnapshotExpiredException"/> instead of returning what it found.
/// </para>
/// </summary>
internal sealed class SnapshotRegistry
{
    private const int ChunkSize = 1024;

    /// <summary>Rescan every this many slots' worth of batches (see the protocol).</summary>
    private const int SlotsPerBatchBetweenScans = 256;

    private readonly Lock _growLock = new();
    private readonly ConcurrentQueue<int> _free = new();
    private readonly long _maxAgeMilliseconds;
    private readonly TimeProvider _clock;
    private Entry?[][] _chunks = [new Entry?[ChunkSize]];
    private int _slotCount; // slots handed out so far (free or not); only grows
    private int _registered; // entries published and not yet closed (open or expired)

    // Committer-owned.
    private long _cachedOldest;
    private int _batchesUntilScan;

    /// <param name="maxAge">How long a snapshot may hold back pruning; <see cref="Timeout.InfiniteTimeSpan"/> for
    /// ever.</param>
    /// <param name="clock">The clock snapshot ages are read from (its monotonic timestamp).</param>
    /// <param name="heldBytesLimit">The bytes of versions the oldest snapshots may keep before the committer expires
    /// them (<see cref="ExpireHolding"/>; for the exception's message).</param>
    public SnapshotRegistry(TimeSpan maxAge, TimeProvider clock, long heldBytesLimit = long.MaxValue)
    {
        _clock = clock;
        _maxAgeMilliseconds = maxAge == Timeout.InfiniteTimeSpan ? long.MaxValue
            : (long)Math.Ceiling(maxAge.TotalMilliseconds);
        HeldBytesLimit = heldBytesLimit;
    }

    /// <summary>See the constructor.</summary>
    public long HeldBytesLimit { get; }

    private long NowMilliseconds()
    {
        long timestamp = _clock.GetTimestamp();
        return (long)(timestamp * (1000.0 / _clock.TimestampFrequency));
    }

    /// <summary>Registers a snapshot of the current <paramref name="visible"/> sequence.</summary>
    public Entry Open(ref long visible)
    {
        while (true)
        {
            long sequence = Volatile.Read(ref visible);
            var entry = new Entry(this, sequence, NowMilliseconds());
            Publish(entry);
            // the entry's store before the re-read of the visible sequence (see the protocol)
            Interlocked.MemoryBarrier();
            if (Volatile.Read(ref visible) == sequence)
            {
                return entry;
            }

            entry.Close();
        }
    }

    /// <summary>
    /// Committer only: a sequence no open, unexpired snapshot is older than (at most <paramref name="visible"/>).
    /// Versions hidden behind the one visible at it can be pruned.
    /// </summary>
    public long Oldest(long visible)
    {
        if (Volatile.Read(ref _registered) == 0)
        {
            _cachedOldest = visible; // every later registration is at least this (see the protocol)
            return visible;
        }

        if (--_batchesUntilScan > 0)
        {
            return Math.Min(_cachedOldest, visible);
        }

        int slots = Volatile.Read(ref _slotCount);
        _batchesUntilScan = Math.Max(1, slots / SlotsPerBatchBetweenScans);
        long oldest = visible;
        long now = NowMilliseconds();
        Entry?[][] chunks = Volatile.Read(ref _chunks);
        for (int i = 0; i < slots; i++)
        {
            Entry? entry = Volatile.Read(ref chunks[i / ChunkSize][i % ChunkSize]);
            if (entry is null || entry.Sequence >= oldest || !entry.IsOpen)
            {
                continue;
            }

            if (now - entry.OpenedAt > _maxAgeMilliseconds && entry.TryExpire())
            {
                continue; // past the maximum age: it no longer holds versions back, and its next read throws
            }

            oldest = entry.Sequence;
        }

        _cachedOldest = oldest;
        return oldest;
    }

    /// <summary>
    /// Committer: expires every open snapshot at or below <paramref name="sequence"/> because the versions it keeps
    /// passed the store's budget (its next read throws <see cref="SnapshotExpiredException"/> saying so), and makes the
    /// next <see cref="Oldest"/> scan, so the versions it kept are pruned from the next batch on. Returns how many it
    /// expired. Each expiry is a compare-exchange (a full fence) before any prune uses the higher oldest, as for an age
    /// expiry (see the protocol).
    /// </summary>
    public int ExpireHolding(long sequence)
    {
        int expired = 0;
        int slots = Volatile.Read(ref _slotCount);
        Entry?[][] chunks = Volatile.Read(ref _chunks);
        for (int i = 0; i < slots; i++)
        {
            if (Volatile.Read(ref chunks[i / ChunkSize][i % ChunkSize]) is { IsOpen: true } entry
                && entry.Sequence <= sequence)
            {
                entry.HeldTooMuch = true; // published by the compare-exchange below, read after IsExpired (acquire)
                if (entry.TryExpire())
                {
                    expired++;
                }
            }
        }

        _batchesUntilScan = 0;
        return expired;
    }

    /// <summary>
    /// Any thread: a sequence no open snapshot is older than (at most <paramref name="visible"/>), by a full scan
    /// that neither expires entries nor touches the committer's cached result (the checkpoint's eviction of covered
    /// versions). The caller reads <paramref name="visible"/> (acquire) before the call; the fence here orders that
    /// load before the loads of the count and the slots, so a reader still registering at an older sequence either
    /// is seen or re-reads a newer visible sequence and starts over (the registration protocol, with this scan in
    /// the committer's place: both sides fence between their store and their load).
    /// </summary>
    public long OldestOpen(long visible)
    {
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _registered) == 0)
        {
            return visible;
        }

        long oldest = visible;
        int slots = Volatile.Read(ref _slotCount);
        Entry?[][] chunks = Volatile.Read(ref _chunks);
        for (int i = 0; i < slots; i++)
        {
            if (Volatile.Read(ref chunks[i / ChunkSize][i % ChunkSize]) is { IsOpen: true } entry
                && entry.Sequence < oldest)
            {
                oldest = entry.Sequence;
            }
        }

        return oldest;
    }

    /// <summary>The number of open snapshots (tests and diagnostics; not a snapshot of the registry).</summary>
    public int OpenCount
    {
        get
        {
            int count = 0;
            int slots = Volatile.Read(ref _slotCount);
            Entry?[][] chunks = Volatile.Read(ref _chunks);
            for (int i = 0; i < slots; i++)
            {
                count += Volatile.Read(ref chunks[i / ChunkSize][i % ChunkSize]) is { IsOpen: true } ? 1 : 0;
            }

            return count;
        }
    }

    /// <summary>Puts <paramref name="entry"/> in a free slot, growing the registry when none is free.</summary>
    private void Publish(Entry entry)
    {
        if (!_free.TryDequeue(out int slot))
        {
            slot = NewSlot();
        }

        entry.Slot = slot;
        Interlocked.Increment(ref _registered);
        Volatile.Write(ref SlotOf(slot), entry);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private int NewSlot()
    {
        lock (_growLock)
        {
            int slot = _slotCount;
            Entry?[][] chunks = _chunks;
            if (slot / ChunkSize == chunks.Length)
            {
                var grown = new Entry?[chunks.Length * 2][];
                chunks.CopyTo(grown, 0);
                for (int i = chunks.Length; i < grown.Length; i++)
                {
                    grown[i] = new Entry?[ChunkSize];
                }

                Volatile.Write(ref _chunks, grown);
            }

            // The slot exists in the published chunks before the count that lets the committer scan it.
            Volatile.Write(ref _slotCount, slot + 1);
            return slot;
        }
    }

    private ref Entry? SlotOf(int slot) => ref Volatile.Read(ref _chunks)[slot / ChunkSize][slot % ChunkSize];

    private void Release(Entry entry)
    {
        Volatile.Write(ref SlotOf(entry.Slot), null);
        Interlocked.Decrement(ref _registered);
        _free.Enqueue(entry.Slot);
    }

    /// <summary>One registered snapshot: its sequence, when it was opened, and whether it is still open.</summary>
    internal sealed class Entry(SnapshotRegistry registry, long sequence, long openedAt)
    {
        private const int Open = 0;
        private const int Expired = 1;
        private const int Closed = 2;

        private int _state;

        public long Sequence { get; } = sequence;

        /// <summary>When the snapshot was opened (the registry's clock, milliseconds).</summary>
        public long OpenedAt { get; } = openedAt;

        /// <summary>Set once, before the entry is published in its slot.</summary>
        public int Slot { get; set; }

        /// <summary>Whether the committer expired the snapshot because the versions it kept passed the budget (set
        /// before the expiry, read after <see cref="IsExpired"/>), not for its age.</summary>
        public bool HeldTooMuch { get; set; }

        /// <summary>The budget of versions a snapshot may keep, in bytes (for the exception's message).</summary>
        public long HeldBytesLimit => registry.HeldBytesLimit;

        public bool IsOpen => Volatile.Read(ref _state) == Open;

        /// <summary>Whether the committer expired the snapshot (acquire: checked after a read, see the
        /// protocol).</summary>
        public bool IsExpired => Volatile.Read(ref _state) == Expired;

        /// <summary>The maximum age the snapshot outlived (for the exception's message).</summary>
        public TimeSpan MaxAge => registry._maxAgeMilliseconds == long.MaxValue ? Timeout.InfiniteTimeSpan
            : TimeSpan.FromMilliseconds(registry._maxAgeMilliseconds);

        /// <summary>Committer: expires an open snapshot (full fence). False when it was closed meanwhile.</summary>
        public bool TryExpire() => Interlocked.CompareExchange(ref _state, Expired, Open) == Open;

        /// <summary>Frees the slot (idempotent; an expired entry still gives its slot back).</summary>
        public void Close()
        {
            if (Interlocked.Exchange(ref _state, Closed) != Closed)
            {
                registry.Release(this);
            }
        }
    }
}
