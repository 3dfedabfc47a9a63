using System.Buffers;
using System.Runtime.InteropServices;

namespace Folio.Pages;

/// <summary>
/// Sorts a checkpoint's puts into the trees' order (ordinal order of the ids' UTF-16 code units) for
/// <see cref="BTree.PutSorted"/>. The ids arrive in commit order, hundreds of thousands at a time, and sorting them
/// by their strings costs a string comparison (two objects read) per step. So the sort first finds the prefix every
/// id shares, packs the eight code units after it of each id into a 128-bit integer that orders as the ids do (a
/// shorter id packs zeros, as <see cref="SearchHints"/> does) and sorts those as primitives with the ids' indexes;
/// ids that pack the same are sorted among themselves by their next eight code units the same way (a radix sort from
/// the most significant end, eight code units a digit), and compared as strings only where none is left.
/// </summary>
internal static class TreeChangeOrder
{
    /// <summary>
    /// The puts of <paramref name="changes"/> in ascending order of their ids, in an array rented from
    /// <see cref="ArrayPool{T}.Shared"/> (the first <paramref name="count"/> entries; return it with
    /// <see cref="Return"/>). Deletes are left out.
    /// </summary>
    public static TreeChange[] SortedPuts(List<TreeChange> changes, out int count)
    {
        ReadOnlySpan<TreeChange> all = CollectionsMarshal.AsSpan(changes);
        count = 0;
        string? first = null;
        int prefix = int.MaxValue;
        foreach (ref readonly TreeChange change in all)
        {
            if (change.IsDelete)
            {
                continue;
            }

            count++;
            if (first is null)
            {
                first = change.Id;
                prefix = first.Length;
            }
            else if (prefix > 0)
            {
                prefix = Math.Min(prefix, first.AsSpan(0, prefix).CommonPrefixLength(change.Id));
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
                    string id = all[i].Id;
                    keys[next] = Pack(id, prefix);
                    indexes[next++] = i;
                }
            }

            Span<int> order = indexes.AsSpan(0, count);
            SortFrom(keys.AsSpan(0, count), order, changes, prefix, prefix + 8);
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
    /// code units before <paramref name="next"/> packed, then each run of ids that packed the same by their next eight
    /// code units, and so on. A run whose ids all end at or before <paramref name="next"/> can differ only where one
    /// id has U+0000 and another has ended (both pack zero), so it is sorted by comparing its ids after the shared
    /// <paramref name="prefix"/>.
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
                bool longer = false;
                foreach (int index in tie)
                {
                    longer |= all[index].Id.Length > next;
                }

                if (longer)
                {
                    Span<UInt128> tieKeys = packed[start..end];
                    for (int i = 0; i < tie.Length; i++)
                    {
                        tieKeys[i] = Pack(all[tie[i]].Id, next);
                    }

                    SortFrom(tieKeys, tie, changes, prefix, next + 8);
                }
                else
                {
                    tie.Sort(new TailComparer(changes, prefix));
                }
            }

            start = end;
        }
    }

    /// <summary>The eight code units of <paramref name="id"/> from <paramref name="start"/>, packed in order (zeros
    /// past its end).</summary>
    private static UInt128 Pack(string id, int start) =>
        new(SearchHints.Pack(id, start), SearchHints.Pack(id, start + 4));

    /// <summary>Orders change indexes by their ids' code units after the prefix every id shares.</summary>
    private readonly struct TailComparer(List<TreeChange> changes, int prefix) : IComparer<int>
    {
        public int Compare(int x, int y) =>
            changes[x].Id.AsSpan(prefix).SequenceCompareTo(changes[y].Id.AsSpan(prefix));
    }
}
