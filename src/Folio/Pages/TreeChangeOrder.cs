using System.Buffers;
using System.Runtime.InteropServices;

namespace Folio.Pages;

/// <summary>
/// Sorts a checkpoint's puts into the trees' order (ordinal order of the ids' UTF-16 code units) for
/// <see cref="BTree.PutSorted"/>. The ids arrive in commit order, hundreds of thousands at a time, and sorting them
/// by their strings costs a string comparison (two objects read) per step. So the sort first finds the prefix every
/// id shares, packs the code units after it of each id into a 128-bit integer that orders as the ids do (eighteen of
/// seven bits when they are all ASCII, else eight of sixteen; a shorter id packs zeros, as <see cref="SearchHints"/>
/// does) and sorts those as primitives with the ids' indexes; ids that pack the same are sorted among themselves by
/// their next code units the same way, after any their run all share (a radix sort from the most significant end),
/// and compared unit by unit only where none is left. An id may be a string or ASCII bytes
/// (<see cref="TreeChange"/>); both give their code units.
/// </summary>
internal static class TreeChangeOrder
{
    /// <summary>The ASCII code units a key packs, seven bits each (126 of its 128 bits).</summary>
    private const int AsciiUnits = 18;

    /// <summary>
    /// The puts of <paramref name="changes"/> in ascending order of their ids, in an array rented from
    /// <see cref="ArrayPool{T}.Shared"/> (the first <paramref name="count"/> entries; return it with
    /// <see cref="Return"/>). Deletes are left out.
    /// </summary>
    public static TreeChange[] SortedPuts(List<TreeChange> changes, out int count)
    {
        ReadOnlySpan<TreeChange> all = CollectionsMarshal.AsSpan(changes);
        count = 0;
        int first = -1;
        int prefix = int.MaxValue;
        for (int i = 0; i < all.Length; i++)
        {
            if (all[i].IsDelete)
            {
                continue;
            }

            count++;
            if (first < 0)
            {
                first = i;
                prefix = all[i].IdLength;
            }
            else if (prefix > 0)
            {
                prefix = all[first].CommonUnits(all[i], 0, prefix);
            }
        }

        TreeChange[] sorted = ArrayPool<TreeChange>.Shared.Rent(Math.Max(1, count));
        UInt128[] keys = ArrayPool<UInt128>.Shared.Rent(Math.Max(1, count));
        int[] indexes = ArrayPool<int>.Shared.Rent(Math.Max(1, count));
        try
        {
            int next = 0;
            for (int i = 0; i < all.Length; i++)
            {
                if (!all[i].IsDelete)
                {
                    indexes[next++] = i;
                }
            }

            Span<int> order = indexes.AsSpan(0, count);
            Span<UInt128> packed = keys.AsSpan(0, count);
            int width = Pack(all, order, packed, prefix);
            SortFrom(packed, order, changes, prefix, prefix + width);
            for (int i = 0; i < count; i++)
            {
                sorted[i] = all[order[i]];
            }

            return sorted;
        }
        finally
        {
            ArrayPool<UInt128>.Shared.Return(keys);
            ArrayPool<int>.Shared.Return(indexes);
        }
    }

    /// <summary>Returns an array from <see cref="SortedPuts"/>, cleared so the pool holds no ids.</summary>
    public static void Return(TreeChange[] sorted) => ArrayPool<TreeChange>.Shared.Return(sorted, clearArray: true);

    /// <summary>
    /// Sorts <paramref name="order"/> (indexes into <paramref name="changes"/>) by <paramref name="packed"/>, the
    /// code units before <paramref name="next"/> packed, then each run of ids that packed the same by their next code
    /// units after those the run's ids all share, and so on. A run whose ids all end at or before
    /// <paramref name="next"/> can differ only where one id has U+0000 and another has ended (both pack zero), so it
    /// is sorted by comparing its ids after the shared <paramref name="prefix"/>.
    /// </summary>
    private static void SortFrom(Span<UInt128> packed, Span<int> order, List<TreeChange> changes, int prefix, int next)
    {
        packed.Sort(order);
        ReadOnlySpan<TreeChange> all = CollectionsMarshal.AsSpan(changes);
        for (int start = 0; start < packed.Length;)
        {
            int end = start + 1;
            while (end < packed.Length && packed[end] == packed[start])
            {
                end++;
            }

            if (end - start > 1)
            {
                Span<int> tie = order[start..end];

                // The run's ids agree on their code units before next; skip those after it that they all share too,
                // so ids with long common stretches (a tenant's prefix, a path) cost one pass, not one per eight units.
                ref readonly TreeChange first = ref all[tie[0]];
                int shared = Math.Max(0, first.IdLength - next);
                bool longer = false;
                foreach (int index in tie)
                {
                    ref readonly TreeChange id = ref all[index];
                    longer |= id.IdLength > next;
                    if (shared > 0)
                    {
                        shared = id.IdLength > next ? first.CommonUnits(id, next, shared) : 0;
                    }
                }

                if (longer)
                {
                    int from = next + shared;
                    Span<UInt128> tieKeys = packed[start..end];
                    int width = Pack(all, tie, tieKeys, from);
                    SortFrom(tieKeys, tie, changes, prefix, from + width);
                }
                else
                {
                    tie.Sort(new TailComparer(changes, prefix));
                }
            }

            start = end;
        }
    }

    /// <summary>
    /// Packs the code units of each id in <paramref name="order"/> from <paramref name="start"/> into
    /// <paramref name="keys"/>, in order, zeros past an id's end; returns how many code units a key holds: eighteen of
    /// seven bits when every one of them is ASCII (most ids), else eight of sixteen bits.
    /// </summary>
    private static int Pack(ReadOnlySpan<TreeChange> all, ReadOnlySpan<int> order, Span<UInt128> keys, int start)
    {
        for (int i = 0; i < order.Length; i++)
        {
            if (!TryPackAscii(all[order[i]], start, out keys[i]))
            {
                for (int j = 0; j < order.Length; j++)
                {
                    ref readonly TreeChange id = ref all[order[j]];
                    keys[j] = new UInt128(PackSixteenBits(id, start), PackSixteenBits(id, start + 4));
                }

                return 8;
            }
        }

        return AsciiUnits;
    }

    /// <summary>Eighteen code units of <paramref name="id"/> from <paramref name="start"/>, seven bits each, nine in
    /// each half; false when one of them is not ASCII.</summary>
    private static bool TryPackAscii(in TreeChange id, int start, out UInt128 key)
    {
        uint any = 0;
        ulong high = PackSevenBits(id, start, ref any);
        ulong low = PackSevenBits(id, start + (AsciiUnits / 2), ref any);
        key = new UInt128(high, low);
        return any <= 0x7F;
    }

    /// <summary>Nine code units of <paramref name="id"/> from <paramref name="start"/>, seven bits each (zeros past
    /// its end); <paramref name="any"/> gets every unit or-ed in, so the caller can tell whether all were
    /// ASCII.</summary>
    private static ulong PackSevenBits(in TreeChange id, int start, ref uint any)
    {
        ulong packed = 0;
        for (int i = 0; i < AsciiUnits / 2; i++)
        {
            int at = start + i;
            uint unit = at < id.IdLength ? id.UnitAt(at) : 0u;
            any |= unit;
            packed = (packed << 7) | unit;
        }

        return packed;
    }

    /// <summary>Four code units of <paramref name="id"/> from <paramref name="start"/>, sixteen bits each (zeros past
    /// its end), as <see cref="SearchHints.Pack"/> packs a key.</summary>
    private static ulong PackSixteenBits(in TreeChange id, int start)
    {
        ulong packed = 0;
        for (int i = 0; i < 4; i++)
        {
            int at = start + i;
            packed = (packed << 16) | (at < id.IdLength ? id.UnitAt(at) : 0u);
        }

        return packed;
    }

    /// <summary>Orders change indexes by their ids' code units after the prefix every id shares.</summary>
    private readonly struct TailComparer(List<TreeChange> changes, int prefix) : IComparer<int>
    {
        public int Compare(int x, int y)
        {
            ReadOnlySpan<TreeChange> all = CollectionsMarshal.AsSpan(changes);
            return all[x].CompareFrom(all[y], prefix);
        }
    }
}
