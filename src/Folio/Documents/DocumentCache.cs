using System.Numerics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Folio.Diagnostics;

namespace Folio.Documents;

/// <summary>
/// A bounded cache of checkpointed documents that point reads found in a collection's tree: a hot document is read
/// from here (one hash probe, its bytes shared with the reader) instead of through the tree's pages (a descent, a pin,
/// a search and a copy). An entry is keyed by the tree it was read from
/// (<see cref="VersionedIndex.TreeLayer.CacheKey"/>) and the id, and holds exactly what that tree holds for the id.
/// Trees never change (a checkpoint writes a new one), so an entry is never invalidated: a read through a newer tree
/// looks for its own key, and when it misses and the checkpoint that made that tree did not change the id, it moves
/// the older tree's entry to its own (<see cref="TryMove"/>); the entries of trees nobody reads any more age out of
/// the cache. Entries are placed by their collection's key (<see cref="VersionedIndex.SortedKeys.CacheKey"/>), so
/// every tree of a collection places an id in the same bucket. Only point
/// reads use it (range reads, and writes reading the versions they replace, go to the tree), so a scan does not flush
/// it, and a write over a document in a page damaged since it was cached still meets the damage.
/// <para>
/// Protocol. Any thread reads and adds; nothing is locked. The table is <see cref="Ways"/>-way set associative: a
/// collection's id hashes to a bucket of two adjacent slots (one cache line). An <see cref="Entry"/> is immutable but
/// for its referenced bit and its tree, and it is published into a slot by an interlocked exchange (a full fence: its
/// fields are written before the slot); a reader loads the slot with an acquire and so sees the fields. A move
/// changes the tree with a release store and nothing else: the entry's version is what both trees hold, so a reader
/// that matched the old tree, or that sees the new one (acquire), takes a version right for the tree it read for. A
/// reader that finds its entry sets the referenced bit with a plain store when it is clear (a lost store only makes
/// the entry look colder); an add
/// that finds no room ages its bucket by clearing the bits with plain stores (a racing reader's store may survive:
/// the entry looks read once more). Memory is counted in <see cref="_bytes"/> (interlocked adds): an add counts its
/// entry before publishing it and subtracts the entry it displaced (the exchange returns it, so each entry is
/// subtracted exactly once, by whoever took it out of its slot). An add into a full cache only replaces an entry of
/// its own bucket; when that leaves the count over the budget (a larger entry for a smaller one, or adds racing),
/// the adder evicts with a clock hand over the slots (an entry whose referenced bit is set has it cleared and is
/// passed; one that is clear is taken out by compare-exchange), and if the hand found too little it takes its own
/// entry back out. So the count exceeds the budget by at most the entries that adds in flight have published and
/// not yet paid for: one entry each, at most <see cref="_maxEntryBytes"/>.
/// </para>
/// </summary>
internal sealed class DocumentCache
{
    /// <summary>Slots per bucket.</summary>
    public const int Ways = 2;

    /// <summary>What an entry costs beyond its document's and its id's bytes: the entry object, the array's header
    /// and the slot (an estimate that errs high).</summary>
    internal const int EntryOverhead = 128;

    // The slots an adder's clock hand visits, at most, to bring the count under the budget.
    private const int MaxEvictionSteps = 4096;

    private readonly Entry?[] _slots;
    private readonly int[] _missed; // per bucket: the hash of the last id a full cache did not admit (see Add)
    private readonly int _bucketMask;
    private readonly long _budget;
    private readonly long _mostSlots; // the most slots the budget allows (see Fits)
    private readonly int _maxEntryBytes;
    private readonly DocumentCacheMetrics? _metrics;
    private long _bytes;
    private long _count;
    private int _hand;

    /// <summary>A cache of at most <paramref name="budget"/> bytes (its arrays count against it) with slots for
    /// about <paramref name="documents"/> documents (see <see cref="Fits"/>), counting on
    /// <paramref name="metrics"/>.</summary>
    public DocumentCache(long budget, long documents, DocumentCacheMetrics? metrics = null)
    {
        // Four slots a document (a bucket of two holds half a document on average, so few are asked to hold more
        // than two: about 1.6% of the documents then find no room), and at most one per 128 bytes of budget (the
        // slots and the doorkeepers then take about a twelfth of it). A store of few documents, or none yet, takes
        // little memory (a process may open many).
        _mostSlots = Math.Min((long)BitOperations.RoundUpToPowerOf2((ulong)Math.Max(budget / 128, 64)), 1L << 26);
        long slots = (long)BitOperations.RoundUpToPowerOf2((ulong)Math.Clamp(4 * documents, 64, _mostSlots));
        _slots = new Entry?[slots];
        _missed = new int[slots / Ways];
        _bucketMask = (int)(slots / Ways) - 1;
        _budget = Math.Max(budget - slots * IntPtr.Size - slots / Ways * sizeof(int), 0);
        _maxEntryBytes = (int)Math.Min(_budget / 64, 1 << 20);
        _metrics = metrics;
    }

    /// <summary>The slots of the table: four a document it was sized for, up to the budget's share.</summary>
    public int Slots => _slots.Length;

    /// <summary>Whether the table has four slots for each of <paramref name="documents"/> documents (about 1.6% of
    /// them then find no room in their bucket), or all its budget allows; false when a larger cache should replace
    /// it.</summary>
    public bool Fits(long documents) => _slots.Length >= Math.Min(4 * documents, _mostSlots);

    /// <summary>The bytes the entries take (an estimate: see <see cref="EntryOverhead"/>).</summary>
    public long Bytes => Volatile.Read(ref _bytes);

    /// <summary>The entries in the cache.</summary>
    public long Count => Volatile.Read(ref _count);

    /// <summary>The most the entries may take, in bytes.</summary>
    public long Budget => _budget;

    /// <summary>The version of <paramref name="id"/> (whose <see cref="IdBytes.HashOf(string)"/> is
    /// <paramref name="hash"/>) cached from the tree <paramref name="tree"/>, if it is cached (a hit, counted).
    /// </summary>
    public bool TryGet(long tree, string id, int hash, out DocumentVersion version) =>
        TryGet(tree, tree, id, hash, out version);

    /// <summary>The version of <paramref name="id"/> (whose <see cref="IdBytes.HashOf(string)"/> is
    /// <paramref name="hash"/>) cached from the tree <paramref name="tree"/> of the collection
    /// <paramref name="collection"/> (the key that places its entries), if it is cached (a hit, counted).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryGet(long collection, long tree, string id, int hash, out DocumentVersion version)
    {
        if (Find(collection, tree, id, hash) is { } entry)
        {
            version = Hit(entry);
            return true;
        }

        version = default;
        return false;
    }

    /// <summary>The entry of <paramref name="tree"/>'s <paramref name="id"/> in its collection's bucket, or
    /// null.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private Entry? Find(long collection, long tree, string id, int hash)
    {
        ref Entry? bucket = ref MemoryMarshal.GetArrayDataReference(_slots);
        int first = (BucketOf(collection, hash) & _bucketMask) * Ways;
        for (int way = 0; way < Ways; way++)
        {
            Entry? entry = Volatile.Read(ref Unsafe.Add(ref bucket, first + way));
            if (entry is not null && entry.Is(tree, id, hash))
            {
                return entry;
            }
        }

        return null;
    }

    /// <summary>A read found <paramref name="entry"/>: its referenced bit set, the hit counted, its version.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private DocumentVersion Hit(Entry entry)
    {
        if (entry.Referenced == 0)
        {
            entry.Referenced = 1;
        }

        _metrics?.Hit();
        return new DocumentVersion(entry.Sequence, entry.TimestampTicks, entry.Json, isDeleted: false);
    }

    /// <summary>Caches <paramref name="version"/> (a document, not a delete; a point read's miss, counted) as what the
    /// tree <paramref name="tree"/> holds for <paramref name="id"/>, if it is admitted (see below). Its bytes are
    /// kept, not copied, when they are a whole array (as a read from a page returns them), so the caller must not
    /// change them. A document larger than a sixty-fourth of the budget is not cached.</summary>
    public void Add(long tree, string id, int hash, in DocumentVersion version) => Add(tree, tree, id, hash, version);

    /// <summary>As <see cref="Add(long, string, int, in DocumentVersion)"/>, for the tree <paramref name="tree"/> of
    /// the collection <paramref name="collection"/> (the key that places its entries).</summary>
    public void Add(long collection, long tree, string id, int hash, in DocumentVersion version)
    {
        _metrics?.Miss();
        ReadOnlyMemory<byte> json = version.Json;
        long size = json.Length + 2L * id.Length + EntryOverhead;
        if (size > _maxEntryBytes || version.IsDeleted || version.IsUnreadable)
        {
            return;
        }

        // The slot to fill. While the entries fit the budget: an empty one, else one not read since it was last
        // aged, else the bucket's last. Once they fill it, a document is admitted only when it misses again soon
        // (the bucket's doorkeeper, _missed, holds the hash of the last one turned away: a plain racy int, whose
        // lost store only turns away one more), and then only in place of an entry of its bucket not read since it
        // was last aged; if both were read, they are aged (their referenced bits cleared) and it is not admitted.
        // So a full cache whose data is larger than it and read uniformly does not churn (a miss costs a look at
        // the bucket the lookup read and at its doorkeeper), a document read often gets in, and one read again
        // between two admissions to its bucket stays.
        int bucketHash = BucketOf(collection, hash);
        int first = (bucketHash & _bucketMask) * Ways;
        int empty = -1;
        int cold = -1;
        for (int way = 0; way < Ways; way++)
        {
            Entry? present = Volatile.Read(ref _slots[first + way]);
            if (present is null)
            {
                empty = empty < 0 ? first + way : empty;
            }
            else if (present.Is(tree, id, hash))
            {
                return; // another reader cached it meanwhile
            }
            else if (cold < 0 && present.Referenced == 0)
            {
                cold = first + way;
            }
        }

        int target;
        if (Volatile.Read(ref _bytes) + size <= _budget)
        {
            target = empty >= 0 ? empty : cold >= 0 ? cold : first + Ways - 1;
        }
        else
        {
            ref int missed = ref _missed[bucketHash & _bucketMask];
            if (missed != bucketHash)
            {
                missed = bucketHash; // turned away once
                return;
            }

            missed = 0;
            if (cold < 0)
            {
                Age(first);
                return;
            }

            target = cold;
        }

        byte[] bytes = MemoryMarshal.TryGetArray(json, out ArraySegment<byte> segment) && segment.Offset == 0
            && segment.Count == segment.Array!.Length
            ? segment.Array
            : json.ToArray();
        var entry = new Entry(tree, id, hash, version.Sequence, version.TimestampTicks, bytes, (int)size);
        Interlocked.Add(ref _bytes, size);
        Interlocked.Increment(ref _count);
        if (Interlocked.Exchange(ref _slots[target], entry) is { } displaced)
        {
            Taken(displaced);
        }

        // Over the budget only when this entry is larger than the one it displaced, or adds raced.
        if (Volatile.Read(ref _bytes) > _budget && !Evict() && Interlocked.CompareExchange(ref _slots[target], null,
            entry) == entry)
        {
            Taken(entry);
        }
    }

    /// <summary>
    /// The version of <paramref name="id"/> cached from the tree <paramref name="from"/> of the collection
    /// <paramref name="collection"/>, if it is cached (a hit, counted), its entry then moved to the tree
    /// <paramref name="to"/>: the caller knows that <paramref name="to"/> holds the same version (a checkpoint made it
    /// from <paramref name="from"/> and did not change the id). The entry stays in its slot, so the move takes no
    /// room and needs no admission.
    /// </summary>
    public bool TryMove(long collection, long from, long to, string id, int hash, out DocumentVersion version)
    {
        if (Find(collection, from, id, hash) is { } entry)
        {
            Volatile.Write(ref entry.Tree, to);
            version = Hit(entry);
            return true;
        }

        version = default;
        return false;
    }

    /// <summary>Clears the referenced bits of the bucket at <paramref name="first"/>.</summary>
    private void Age(int first)
    {
        for (int way = 0; way < Ways; way++)
        {
            if (Volatile.Read(ref _slots[first + way]) is { } present)
            {
                present.Referenced = 0;
            }
        }
    }

    /// <summary>Tests: the bucket a document of <paramref name="collection"/> whose id hashes to
    /// <paramref name="hash"/> goes to.</summary>
    internal int BucketIndexOf(long collection, int hash) => BucketOf(collection, hash) & _bucketMask;

    /// <summary>The hash that picks the bucket of a document of <paramref name="collection"/> whose id hashes to
    /// <paramref name="hash"/>: the id's hash mixed with the collection's key (Fibonacci hashing), so that collections
    /// that use the same ids (a tenant per collection, numbered ids) spread over the table instead of sharing buckets;
    /// every tree of a collection places an id in the same bucket (see <see cref="TryMove"/>).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static int BucketOf(long collection, int hash) =>
        hash ^ (int)(((ulong)collection * 0x9E3779B97F4A7C15UL) >> 32);

    /// <summary>Moves the clock hand until the entries fit the budget, taking out entries not read since it last
    /// passed them; false when it gave up first.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool Evict()
    {
        int mask = _slots.Length - 1;
        for (int step = 0; step < MaxEvictionSteps; step++)
        {
            int slot = ++_hand & mask; // racy: two adders may visit one slot; the exchange below takes it once
            Entry? entry = Volatile.Read(ref _slots[slot]);
            if (entry is null)
            {
                continue;
            }

            if (entry.Referenced != 0)
            {
                entry.Referenced = 0;
                continue;
            }

            if (Interlocked.CompareExchange(ref _slots[slot], null, entry) == entry)
            {
                Taken(entry);
                if (Volatile.Read(ref _bytes) <= _budget)
                {
                    return true;
                }
            }
        }

        return Volatile.Read(ref _bytes) <= _budget;
    }

    private void Taken(Entry entry)
    {
        Interlocked.Add(ref _bytes, -entry.Size);
        Interlocked.Decrement(ref _count);
    }

    /// <summary>Empties the cache.</summary>
    internal void Clear()
    {
        for (int slot = 0; slot < _slots.Length; slot++)
        {
            if (Interlocked.Exchange(ref _slots[slot], null) is { } entry)
            {
                Taken(entry);
            }
        }
    }

    /// <summary>One cached document: immutable but for <see cref="Referenced"/> and for <see cref="Tree"/>, which
    /// only moves to a tree holding the same version (see the protocol).</summary>
    private sealed class Entry(long tree, string id, int hash, long sequence, long timestampTicks, byte[] json,
        int size)
    {
        public long Tree = tree;
        public readonly string Id = id;
        public readonly int Hash = hash;
        public readonly int Size = size;
        public readonly long Sequence = sequence;
        public readonly long TimestampTicks = timestampTicks;
        public readonly byte[] Json = json;

        /// <summary>1 when a read found the entry since the clock hand last passed it.</summary>
        public byte Referenced;

        /// <summary>Whether this is the entry of <paramref name="tree"/>'s <paramref name="id"/> (of
        /// <paramref name="hash"/>); the tree is read with an acquire (see the protocol).</summary>
        public bool Is(long tree, string id, int hash) =>
            Hash == hash && Volatile.Read(ref Tree) == tree && string.Equals(Id, id);
    }
}
