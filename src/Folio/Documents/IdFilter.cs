using System.Numerics;
using System.Runtime.CompilerServices;
using System.Runtime.Intrinsics;

namespace Folio.Documents;

/// <summary>
/// A filter of the ids a collection's checkpointed trees may hold: when it says an id is absent, no tree the index
/// can read holds it, so a write of a new id and a read of a missing one skip the tree search (a descent of three
/// pages, or a read from disk when the tree is larger than the cache). It may answer "maybe" for an id no tree holds
/// (about 1% of absent ids, and every id deleted since it was added): then the tree is searched as without it.
/// <para>
/// Layout. A split-block Bloom filter (the one Apache Parquet specifies): blocks of eight 32-bit words, an id sets one
/// bit in each word of one block, so a lookup reads one 32-byte block. The id's 32-bit hash
/// (<see cref="IdBytes.HashOf(string)"/>, the one the heads key ids by) is mixed to 64 bits: the high half picks the
/// block, the low half the bits. Segments: the filter starts with room for the ids it is built for and, when the last
/// segment holds its capacity, adds one four times larger (or as large as <see cref="MaxBytes"/> and the store's
/// <see cref="IdFilterBudget"/> still allow, if no smaller than the last); a lookup checks every segment (one block
/// each; the small ones stay in the processor's cache). When it cannot grow it refuses ids and is dropped by its owner
/// (<see cref="Add"/> returns false), which gives its memory back (<see cref="Release"/>): 16 MiB hold about 8.7
/// million ids added one by one, more when built for a known count.
/// </para>
/// <para>
/// Protocol. Ids are only ever added, bits only ever go from 0 to 1, so a reader that sees a bit set or not set is
/// right either way for every id added before its read began (see below), and an id added later only makes it answer
/// "maybe" more often. Writers: the committer (under the index's write lock) adds each id it writes that no tree
/// holds, and while the filter is built (<see cref="IsComplete"/> false) the checkpoint's thread adds the ids the
/// trees, the replayed documents and the heads already hold; both set bits with interlocked ORs, so neither loses the
/// other's. A new segment is published with a compare-exchange of the segment array (release), which both may try.
/// Readers: <see cref="MightContain"/> loads the segment array (acquire) and the words with plain loads. A committer's
/// add happens before the id's version is published in the heads (a release store), which happens before any
/// checkpoint takes the id and publishes a tree that holds it (a release store of the collection's layer); a reader
/// loads the layer (acquire) before it asks the filter, so every id of the layer it reads is visible to it.
/// <see cref="IsComplete"/> is set (release) only after every id the collection's trees could hold was added; readers
/// trust an "absent" only from a complete filter (acquire).
/// </para>
/// </summary>
internal sealed class IdFilter
{
    /// <summary>Ids a block is sized for: 256 bits for 20 ids, about 13 bits an id (about 1% "maybe" for an absent
    /// id per full segment).</summary>
    private const int IdsPerBlock = 20;

    /// <summary>The smallest segment: 8 blocks (256 bytes, 160 ids), so a store of many small collections keeps
    /// little.</summary>
    private const int MinBlocks = 8;

    /// <summary>How much larger each new segment is than the last.</summary>
    private const int Growth = 4;

    private static readonly uint[] s_salts =
    [
        0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU, 0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U,
    ];

    private readonly IdFilterBudget? _budget;
    private Segment[] _segments;
    private int _complete;
    private long _taken; // bytes taken from _budget and not given back (interlocked)

    private IdFilter(long maxBytes, int blocks, bool complete, IdFilterBudget? budget)
    {
        MaxBytes = maxBytes;
        _budget = budget;
        _taken = blocks * 32L;
        _segments = [new Segment(blocks)];
        _complete = complete ? 1 : 0;
    }

    /// <summary>An empty filter with room for <paramref name="ids"/> ids in its first segment, or null when that is
    /// more than <paramref name="maxBytes"/> or than <paramref name="budget"/> has left.</summary>
    /// <param name="ids">The ids expected at first.</param>
    /// <param name="maxBytes">The most memory the filter may take (at least one smallest segment).</param>
    /// <param name="complete">Whether it is complete from the start (a collection no tree holds yet).</param>
    /// <param name="budget">What all filters may take together; null for no limit but
    /// <paramref name="maxBytes"/>.</param>
    public static IdFilter? Create(long ids, long maxBytes, bool complete, IdFilterBudget? budget = null)
    {
        maxBytes = Math.Max(maxBytes, MinBlocks * 32L);
        int blocks = BlocksFor(ids);
        if (blocks * 32L > maxBytes || (budget is not null && !budget.TryTake(blocks * 32L)))
        {
            return null;
        }

        return new IdFilter(maxBytes, blocks, complete, budget);
    }

    /// <summary>The most memory the filter takes.</summary>
    public long MaxBytes { get; }

    /// <summary>Whether every id a tree of the collection can hold was added (acquire): only then is "absent"
    /// trusted.</summary>
    public bool IsComplete => Volatile.Read(ref _complete) != 0;

    /// <summary>The memory the segments take.</summary>
    public long Bytes
    {
        get
        {
            long bytes = 0;
            foreach (Segment segment in Volatile.Read(ref _segments))
            {
                bytes += segment.Words.Length * sizeof(uint);
            }

            return bytes;
        }
    }

    /// <summary>The checkpoint's thread, once it added every id it had to (release).</summary>
    public void MarkComplete() => Volatile.Write(ref _complete, 1);

    /// <summary>Whether the id with hash <paramref name="hash"/> may have been added (false: it never was).</summary>
    public bool MightContain(int hash)
    {
        ulong mixed = Mix(hash);
        return AnyHas(Volatile.Read(ref _segments), mixed, MaskOf(mixed));
    }

    /// <summary>
    /// Adds the id with hash <paramref name="hash"/>; false when the filter would have to grow past
    /// <see cref="MaxBytes"/> (the id was not added: the owner must stop using the filter before anything can find
    /// the id in a tree).
    /// </summary>
    public bool Add(int hash)
    {
        ulong mixed = Mix(hash);
        Vector256<uint> mask = MaskOf(mixed);
        while (true)
        {
            Segment[] segments = Volatile.Read(ref _segments);
            if (AnyHas(segments, mixed, mask))
            {
                return true; // counted once, whatever its segment
            }

            Segment last = segments[^1];
            if (last.TryAdd(mixed, mask))
            {
                return true;
            }

            // The last segment is full: add a larger one (whoever wins the exchange): four times as large, or as
            // large as the rest of the limit and of the budget allows, but never smaller than the last.
            long bytes = Bytes;
            long room = Math.Min(MaxBytes - bytes, _budget?.Remaining ?? long.MaxValue);
            long blocks = Math.Min((long)last.Blocks * Growth, 1L << BitOperations.Log2((ulong)Math.Max(1, room / 32)));
            if (blocks < last.Blocks || bytes + (blocks * 32) > MaxBytes
                || (_budget is not null && !_budget.TryTake(blocks * 32)))
            {
                return false;
            }

            Segment[] grown = [.. segments, new Segment((int)blocks)];
            if (Interlocked.CompareExchange(ref _segments, grown, segments) == segments)
            {
                Interlocked.Add(ref _taken, blocks * 32);
            }
            else
            {
                _budget?.Return(blocks * 32); // another writer grew it first
            }
        }
    }

    /// <summary>Gives the filter's memory back to its budget: its owner dropped it (no new reader finds it). Once;
    /// later calls do nothing.</summary>
    public void Release()
    {
        long taken = Interlocked.Exchange(ref _taken, 0);
        if (taken > 0)
        {
            _budget?.Return(taken);
        }
    }

    private static int BlocksFor(long ids) => (int)Math.Min(1 << 26,
        BitOperations.RoundUpToPowerOf2((ulong)Math.Max(MinBlocks, (ids + (ids / 4)) / IdsPerBlock)));

    /// <summary>SplitMix64's finalizer over the 32-bit hash: 64 well-mixed bits.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static ulong Mix(int hash)
    {
        ulong z = (uint)hash + 0x9E3779B97F4A7C15UL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
        return z ^ (z >> 31);
    }

    /// <summary>Whether any of <paramref name="segments"/> holds the id's bits, the largest (last) checked first.
    /// </summary>
    private static bool AnyHas(Segment[] segments, ulong mixed, Vector256<uint> mask)
    {
        for (int i = segments.Length - 1; i >= 0; i--)
        {
            if (segments[i].Has(mixed, mask))
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>The bit an id sets in each of a block's eight words (the same in every segment).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static Vector256<uint> MaskOf(ulong mixed)
    {
        uint key = (uint)mixed;
        return Vector256.Create(
            1u << (int)((key * s_salts[0]) >> 27), 1u << (int)((key * s_salts[1]) >> 27),
            1u << (int)((key * s_salts[2]) >> 27), 1u << (int)((key * s_salts[3]) >> 27),
            1u << (int)((key * s_salts[4]) >> 27), 1u << (int)((key * s_salts[5]) >> 27),
            1u << (int)((key * s_salts[6]) >> 27), 1u << (int)((key * s_salts[7]) >> 27));
    }

    /// <summary>One segment: its blocks and the ids added to it.</summary>
    private sealed class Segment(int blocks)
    {
        private int _ids;

        public int Blocks { get; } = blocks;

        public uint[] Words { get; } = new uint[blocks * 8];

        public bool Has(ulong mixed, Vector256<uint> mask)
        {
            Vector256<uint> block = Vector256.LoadUnsafe(ref Words[BlockOf(mixed)]); // bounds: BlockOf < Words - 7
            return (block & mask) == mask;
        }

        /// <summary>Sets the id's bits unless the segment holds its capacity already.</summary>
        public bool TryAdd(ulong mixed, Vector256<uint> mask)
        {
            if (Interlocked.Increment(ref _ids) > (long)Blocks * IdsPerBlock)
            {
                Interlocked.Decrement(ref _ids);
                return false;
            }

            int at = BlockOf(mixed);
            for (int i = 0; i < 8; i++)
            {
                Interlocked.Or(ref Words[at + i], mask.GetElement(i));
            }

            return true;
        }

        private int BlockOf(ulong mixed) => (int)(((mixed >> 32) * (ulong)Blocks) >> 32) * 8;
    }
}
