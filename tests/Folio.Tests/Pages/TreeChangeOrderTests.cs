using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Pages;

namespace Folio.Tests.Pages;

/// <summary>
/// A checkpoint sorts its puts through packed code units and places them run by run. The order must be the ordinal
/// order of the ids (ids that share long prefixes, ids that are prefixes of others, U+0000, surrogates, U+FFFF); the
/// tree must hold what single puts leave, in pages that fit, over an empty tree and over a tree of an earlier edit
/// that the batch copies on write without changing; and a range of new ids fills its pages. A change's id is a string
/// or, for an ASCII id, bytes in a commit's entry: the tests mix both forms, the bytes at random offsets of larger
/// buffers, and the forms must compare as the strings do.
/// </summary>
public sealed class TreeChangeOrderTests
{
    private static readonly char[] s_alphabet =
        ['\0', 'a', 'b', '/', '0', '9', '\u00e9', '\ud83d', '\ude00', '\uffff', 'z'];

    [Property(MaxTest = 300, Arbitrary = [typeof(TreeChangeOrderTests)])]
    public void Sorted_puts_come_in_the_ordinal_order_of_their_ids_without_the_deletes(int seed)
    {
        var random = new Random(seed);
        string prefix = Word(random, random.Next(0, 12));
        var ids = new HashSet<string>(StringComparer.Ordinal);
        int count = random.Next(0, 400);
        while (ids.Count < count)
        {
            // Some ids share a long stretch after a short group of their own, as a tenant's or a path's prefix.
            string stretch = random.Next(3) == 0 ? Word(random, 1) + new string('q', random.Next(0, 60)) : string.Empty;
            ids.Add(prefix + stretch + Word(random, random.Next(0, random.Next(2) == 0 ? 6 : 40)));
        }

        var changes = new List<TreeChange>();
        var expected = new List<string>();
        foreach (string id in ids)
        {
            if (random.Next(5) == 0)
            {
                changes.Add(Change(random, id, value: null));
            }
            else
            {
                changes.Add(Change(random, id, Value(random, id.Length)));
                expected.Add(id);
            }
        }

        expected.Sort(StringComparer.Ordinal);
        TreeChange[] sorted = TreeChangeOrder.SortedPuts(changes, out int putCount);
        try
        {
            Assert.Equal(expected.Count, putCount);
            for (int i = 0; i < putCount; i++)
            {
                Assert.Equal(expected[i], sorted[i].Id);
                Assert.False(sorted[i].IsDelete);
            }
        }
        finally
        {
            TreeChangeOrder.Return(sorted);
        }
    }

    [Fact]
    public void Ids_that_share_a_thousand_code_units_within_their_group_sort_in_ordinal_order()
    {
        var changes = new List<TreeChange>();
        foreach (string tenant in new[] { "tenant-b/", "tenant-a/", "tenant-a0" })
        {
            string stretch = new('x', 1_000);
            for (int i = 0; i < 20_000; i++)
            {
                changes.Add(TreeChange.Put($"{tenant}{stretch}/{(i * 7_919) % 20_000}", default));
            }
        }

        List<string> expected = [.. changes.Select(change => change.Id)];
        expected.Sort(StringComparer.Ordinal);
        TreeChange[] sorted = TreeChangeOrder.SortedPuts(changes, out int count);
        try
        {
            Assert.Equal(expected, sorted.Take(count).Select(change => change.Id));
        }
        finally
        {
            TreeChangeOrder.Return(sorted);
        }
    }

    [Property(MaxTest = 100, Arbitrary = [typeof(TreeChangeOrderTests)])]
    public void Puts_placed_run_by_run_leave_what_single_puts_leave_in_pages_that_fit(int seed)
    {
        var random = new Random(seed);
        PageReference? before = null;
        var first = new TreeEdit(1, reader: null!);
        int existing = random.Next(0, 3_000);
        for (int i = 0; i < existing; i++)
        {
            string id = Id(random);
            BTree.Put(first, ref before, id, Value(random, id.Length));
        }

        string before1 = Describe(before);
        var changes = new List<TreeChange>();
        var seen = new HashSet<string>(StringComparer.Ordinal);
        int count = random.Next(1, 6_000);
        while (changes.Count < count)
        {
            string id = Id(random);
            if (seen.Add(id))
            {
                changes.Add(Change(random, id, Value(random, id.Length)));
            }
        }

        TreeChange[] sorted = TreeChangeOrder.SortedPuts(changes, out int putCount);
        try
        {
            PageReference? single = before;
            var singleEdit = new TreeEdit(2, reader: null!);
            long singleAdded = 0;
            for (int i = 0; i < putCount; i++)
            {
                singleAdded += BTree.Put(singleEdit, ref single, sorted[i].Id, sorted[i].Value) ? 1 : 0;
            }

            PageReference? batched = before;
            var batchEdit = new TreeEdit(2, reader: null!);
            long batchAdded = BTree.PutSorted(batchEdit, ref batched, sorted.AsSpan(0, putCount));

            Assert.Equal(singleAdded, batchAdded);
            Assert.Equal(Entries(single), Entries(batched));
            AssertOrdered(batched!.GetNode(null!), lower: null, upper: null);
            Assert.Equal(before1, Describe(before)); // the earlier edit's nodes were copied, not changed
            AssertPagesFit(batched!.GetNode(null!));
        }
        finally
        {
            TreeChangeOrder.Return(sorted);
        }
    }

    [Fact]
    public void A_range_of_new_ids_fills_its_leaves_at_the_end_and_in_the_middle_of_a_tree()
    {
        var value = new StoredValue(1, 1, new byte[40]);
        PageReference? root = null;
        var edit = new TreeEdit(1, reader: null!);
        TreeChange[] existing = [.. Enumerable.Range(0, 20_000).Select(i => TreeChange.Put($"b/{i:D6}", value))];
        BTree.PutSorted(edit, ref root, existing); // at the end of an empty tree
        AssertFull(root!, 20_000);

        // A range between existing ids: "b/000100/" sorts after "b/000100" and before "b/000101".
        TreeChange[] range = [.. Enumerable.Range(0, 20_000).Select(i => TreeChange.Put($"b/000100/{i:D6}", value))];
        BTree.PutSorted(new TreeEdit(2, reader: null!), ref root, range);
        AssertFull(root!, 40_000);
        AssertOrdered(root!.GetNode(null!), lower: null, upper: null);

        static void AssertFull(PageReference root, int expected)
        {
            List<TreeNode> leaves = [];
            Leaves(root.GetNode(null!), leaves);
            Assert.Equal(expected, leaves.Sum(leaf => leaf.Count));
            // A leaf is full by its bytes or by its entries, whichever it reaches first.
            double fill = leaves.Average(leaf => Math.Max(leaf.ByteSize / (double)PageFormat.TargetPageSize,
                leaf.Count / (double)PageFormat.MaxLeafEntries));
            Assert.True(fill > 0.85, $"{leaves.Count} leaves {fill:P0} full");
        }
    }

    [Property(MaxTest = 300, Arbitrary = [typeof(TreeChangeOrderTests)])]
    public void A_change_compares_its_id_as_the_strings_compare_whether_it_holds_a_string_or_bytes(int seed)
    {
        var random = new Random(seed);
        string prefix = random.Next(2) == 0 ? string.Empty : AsciiWord(random, random.Next(1, 20));
        for (int i = 0; i < 200; i++)
        {
            string left = prefix
                + (random.Next(3) == 0 ? Word(random, random.Next(0, 6)) : AsciiWord(random, random.Next(0, 6)));
            string right = random.Next(4) == 0 ? left : prefix + AsciiWord(random, random.Next(0, 6));
            TreeChange a = Change(random, left, Value(random, 1));
            TreeChange b = Change(random, right, Value(random, 1));
            int start = random.Next(0, Math.Min(left.Length, right.Length) + 1);
            int limit = random.Next(0, 30);

            Assert.Equal(left, a.Id);
            Assert.Equal(left.Length, a.IdLength);
            Assert.Equal(Math.Sign(string.CompareOrdinal(left, right)), Math.Sign(a.CompareTo(right)));
            Assert.Equal(Math.Sign(left.AsSpan(start).SequenceCompareTo(right.AsSpan(start))),
                Math.Sign(a.CompareFrom(b, start)));
            int common = Math.Min(limit, left.AsSpan(start).CommonPrefixLength(right.AsSpan(start)));
            Assert.Equal(common, a.CommonUnits(b, start, limit));
            for (int unit = 0; unit < left.Length; unit++)
            {
                Assert.Equal(left[unit], a.UnitAt(unit));
            }
        }
    }

    public static Arbitrary<int> Seeds() => Gen.Choose(0, int.MaxValue).ToArbitrary();

    /// <summary>A put of <paramref name="value"/> (a delete when null) of <paramref name="id"/>: an ASCII id as bytes
    /// at a random offset of a larger buffer half of the time, as a checkpoint takes ids from commits' entries, else
    /// as a string.</summary>
    private static TreeChange Change(Random random, string id, StoredValue? value)
    {
        if (!System.Text.Ascii.IsValid(id) || random.Next(2) == 0)
        {
            return value is { } put ? TreeChange.Put(id, put) : TreeChange.Delete(id);
        }

        int offset = random.Next(0, 16);
        byte[] buffer = new byte[offset + id.Length + random.Next(0, 16)];
        random.NextBytes(buffer); // bytes around the id that a comparison must not read
        System.Text.Encoding.ASCII.GetBytes(id, buffer.AsSpan(offset));
        return value is { } bytesPut
            ? TreeChange.PutAscii(buffer, offset, id.Length, bytesPut)
            : TreeChange.DeleteAscii(buffer, offset, id.Length);
    }

    private static string AsciiWord(Random random, int length)
    {
        var chars = new char[length];
        for (int i = 0; i < length; i++)
        {
            chars[i] = (char)random.Next(0, 128);
        }

        return new string(chars);
    }

    /// <summary>Ids of a few shapes: writer-interleaved counters, ids sharing long prefixes, and short words.</summary>
    private static string Id(Random random) => random.Next(3) switch
    {
        0 => $"u{random.Next(64)}-{random.Next(4)}-{random.Next(2_000)}",
        1 => $"orders/2026/{random.Next(100_000):D6}",
        _ => Word(random, random.Next(1, 9)),
    };

    private static string Word(Random random, int length)
    {
        var chars = new char[length];
        for (int i = 0; i < length; i++)
        {
            chars[i] = s_alphabet[random.Next(s_alphabet.Length)];
        }

        return new string(chars);
    }

    private static StoredValue Value(Random random, int salt) =>
        new(random.Next(1, 1_000), salt, new byte[random.Next(4) == 0 ? random.Next(200, 1_500) : random.Next(0, 60)]);

    /// <summary>Every id in the tree with its value's length, in order.</summary>
    private static string Entries(PageReference? root)
    {
        List<TreeNode> leaves = [];
        if (root is not null)
        {
            Leaves(root.GetNode(null!), leaves);
        }

        var text = new System.Text.StringBuilder();
        foreach (TreeNode leaf in leaves)
        {
            for (int i = 0; i < leaf.Count; i++)
            {
                text.Append(leaf.KeyAt(i)).Append('=').Append(leaf.ValueAt(i).Length).Append('|');
            }
        }

        return text.ToString();
    }

    private static void Leaves(TreeNode node, List<TreeNode> leaves)
    {
        if (node.IsLeaf)
        {
            leaves.Add(node);
            return;
        }

        foreach (PageReference child in node.Children)
        {
            Leaves(child.GetNode(null!), leaves);
        }
    }

    /// <summary>Every node's ids ascend and lie in the range its parent gives it.</summary>
    private static void AssertOrdered(TreeNode node, string? lower, string? upper)
    {
        ReadOnlySpan<string> keys = node.Keys;
        for (int i = 0; i < keys.Length; i++)
        {
            Assert.True(i == 0 || string.CompareOrdinal(keys[i - 1], keys[i]) < 0);
            Assert.True(lower is null || string.CompareOrdinal(lower, keys[i]) <= 0);
            Assert.True(upper is null || string.CompareOrdinal(keys[i], upper) < 0);
        }

        if (!node.IsLeaf)
        {
            for (int i = 0; i < node.Count; i++)
            {
                AssertOrdered(node.ChildAt(i).GetNode(null!), i == 0 ? lower : keys[i - 1],
                    i == node.Count - 1 ? upper : keys[i]);
            }
        }
    }

    /// <summary>Every node's ids (leaves: with value lengths), depth first.</summary>
    private static string Describe(PageReference? root)
    {
        var text = new System.Text.StringBuilder();
        if (root is not null)
        {
            Describe(root.GetNode(null!), text);
        }

        return text.ToString();
    }

    private static void Describe(TreeNode node, System.Text.StringBuilder text)
    {
        text.Append(node.IsLeaf ? "L[" : "B[");
        for (int i = 0; i < node.Keys.Length; i++)
        {
            text.Append(node.KeyAt(i)).Append(node.IsLeaf ? $"={node.ValueAt(i).Length}" : string.Empty).Append('|');
        }

        text.Append(']');
        if (!node.IsLeaf)
        {
            foreach (PageReference child in node.Children)
            {
                Describe(child.GetNode(null!), text);
            }
        }
    }

    private static void AssertPagesFit(TreeNode node)
    {
        Assert.False(node.IsOverfull);
        if (!node.IsLeaf)
        {
            foreach (PageReference child in node.Children)
            {
                AssertPagesFit(child.GetNode(null!));
            }
        }
    }
}
