using System.Buffers.Binary;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Pages;

namespace Folio.Tests.Pages;

/// <summary>
/// A checkpoint's edit encodes each leaf into its page's bytes once the sorted puts have moved past it. The encoded
/// tree must have the shape the same puts leave without encoding, each encoded leaf the bytes the serializer writes
/// for its twin; a leaf whose overflow value is not saved yet stays a node; leaves of the earlier edit are left alone;
/// a put that reaches an encoded leaf anyway decodes it and loses nothing; and the serializer seals encoded leaves
/// where they lie, to be written from there, then drops them from their references.
/// </summary>
public sealed class LeafEncoderTests
{
    [Property(MaxTest = 100, Arbitrary = [typeof(LeafEncoderTests)])]
    public void Encoded_leaves_are_the_pages_of_the_tree_the_same_puts_leave_without_encoding(int seed)
    {
        var random = new Random(seed);
        PageReference? before = Tree(random, new TreeEdit(1, reader: null!), random.Next(0, 3_000));
        string earlier = Describe(before);
        TreeChange[] puts = SortedPuts(random, random.Next(1, 6_000));

        PageReference? plain = before;
        long plainAdded = BTree.PutSorted(new TreeEdit(2, reader: null!), ref plain, puts);
        PageReference? encoded = before;
        var encoder = new LeafEncoder(new LeafArena());
        long encodedAdded = BTree.PutSorted(new TreeEdit(2, reader: null!), ref encoded, puts, encoder);

        Assert.Equal(plainAdded, encodedAdded);
        Assert.Equal(earlier, Describe(before)); // the earlier edit's nodes were copied, not changed
        List<TreeNode> plainLeaves = Leaves(plain);
        List<TreeNode> encodedLeaves = Leaves(encoded);
        Assert.Equal(plainLeaves.Count, encodedLeaves.Count);
        int expectedEncoded = 0;
        for (int i = 0; i < plainLeaves.Count; i++)
        {
            TreeNode twin = plainLeaves[i];
            TreeNode leaf = encodedLeaves[i];
            if (twin.Epoch == 1)
            {
                Assert.Same(twin, leaf); // not reached by a put: the earlier edit's node, in both trees
                continue;
            }

            bool unsavedOverflow = false;
            foreach (StoredValue value in twin.Values)
            {
                unsavedOverflow |= value.IsOverflow && !value.Overflow.IsSaved;
            }

            Assert.Equal(!unsavedOverflow, leaf.IsEncoded);
            if (!leaf.IsEncoded)
            {
                Assert.Equal(Entries(twin), Entries(leaf));
                continue;
            }

            expectedEncoded++;
            byte[] page = new byte[twin.ByteSize];
            Assert.Equal(twin.ByteSize, PageFormat.WriteLeaf(page, twin));
            Assert.Equal(page, leaf.Encoded.ToArray());
            Assert.Equal(twin.ByteSize, leaf.ByteSize);
            Assert.Equal(twin.Count, leaf.Count);
        }

        Assert.Equal(expectedEncoded, encoder.Encoded);
    }

    [Fact]
    public void A_put_that_reaches_an_encoded_leaf_decodes_it_and_loses_nothing()
    {
        var random = new Random(7);
        TreeChange[] first = SortedPuts(random, 5_000);
        TreeChange[] second = SortedPuts(random, 5_000);
        var model = new SortedDictionary<string, long>(StringComparer.Ordinal);
        foreach (TreeChange put in first.Concat(second))
        {
            model[put.Id] = put.Value.Sequence;
        }

        // The same edit places a second sorted batch, interleaved with the first, over the leaves it encoded.
        var edit = new TreeEdit(1, reader: null!);
        PageReference? root = null;
        var encoder = new LeafEncoder(new LeafArena());
        BTree.PutSorted(edit, ref root, first, encoder);
        int encodedFirst = encoder.Encoded;
        BTree.PutSorted(edit, ref root, second, encoder);

        Assert.True(encodedFirst > 10, $"{encodedFirst} leaves encoded");
        var found = new List<KeyValuePair<string, long>>();
        foreach (TreeNode leaf in Leaves(root))
        {
            TreeNode readable = leaf.IsEncoded ? PageFormat.DecodeChecked(leaf.Encoded, default) : leaf;
            for (int i = 0; i < readable.Count; i++)
            {
                found.Add(new(readable.KeyAt(i), readable.ValueAt(i).Sequence));
            }
        }

        Assert.Equal(model.ToList(), found);
    }

    [Fact]
    public void The_serializer_seals_encoded_leaves_where_they_lie_and_drops_them_from_their_references()
    {
        var random = new Random(11);
        TreeChange[] puts = SortedPuts(random, 20_000, overflow: false);
        PageReference? plain = null;
        BTree.PutSorted(new TreeEdit(1, reader: null!), ref plain, puts);
        PageReference? encoded = null;
        BTree.PutSorted(new TreeEdit(1, reader: null!), ref encoded, puts, new LeafEncoder(new LeafArena()));
        List<string> expected = [.. Leaves(plain).Select(Entries)];
        List<PageReference> leafReferences = LeafReferences(encoded!);
        Assert.All(leafReferences, reference => Assert.True(reference.Cached!.IsEncoded));

        const int PagesPerChunk = 256;
        int pages = TreeSerializer.CountUnsaved(encoded, out long bytes);
        using var serializer = new TreeSerializer(1, PagesPerChunk, 0, (int)bytes);
        serializer.Serialize(encoded!);

        Assert.Equal(pages, serializer.PageCount);
        Assert.Equal(bytes, serializer.Bytes.Length);
        Assert.True(bytes < PageFormat.TargetPageSize * 8, $"{bytes} bytes in the buffer"); // branches only
        var leaves = new List<string>();
        for (int i = 0; i < serializer.PageCount; i++)
        {
            long entry = serializer.Toc[i];
            ReadOnlyMemory<byte> body = serializer.BodyOf(i);
            byte[] page = [.. serializer.Bytes.Slice((int)(entry >> 32), (int)(uint)entry - body.Length),
                .. body.Span];
            Assert.True(body.IsEmpty || page.Length == body.Length); // a leaf wholly outside the buffer, or a branch
            PagePosition position = ChunkFormat.PositionOf(1, (uint)i, PagesPerChunk);
            Assert.Equal(PageFormat.Checksum(page, position), BinaryPrimitives.ReadUInt32LittleEndian(page.AsSpan(4)));
            Assert.True(PageFormat.Check(page, out string? problem), problem);
            TreeNode node = PageFormat.DecodeChecked(page, position);
            if (node.IsLeaf)
            {
                leaves.Add(Entries(node));
            }
        }

        Assert.Equal(expected, leaves);
        Assert.All(leafReferences, reference =>
        {
            Assert.Null(reference.Cached);
            Assert.True(reference.Position.IsSaved);
        });
    }

    public static Arbitrary<int> Seeds() => Gen.Choose(0, int.MaxValue).ToArbitrary();

    private static PageReference? Tree(Random random, TreeEdit edit, int count)
    {
        PageReference? root = null;
        for (int i = 0; i < count; i++)
        {
            string id = Id(random);
            BTree.Put(edit, ref root, id, Value(random, overflow: true));
        }

        return root;
    }

    /// <summary>Puts of distinct ids in ascending ordinal order, as a checkpoint sorts them.</summary>
    private static TreeChange[] SortedPuts(Random random, int count, bool overflow = true)
    {
        var ids = new SortedSet<string>(StringComparer.Ordinal);
        while (ids.Count < count)
        {
            ids.Add(Id(random));
        }

        return [.. ids.Select(id => TreeChange.Put(id, Value(random, overflow)))];
    }

    private static string Id(Random random) => random.Next(3) switch
    {
        0 => $"u{random.Next(64)}-{random.Next(4)}-{random.Next(2_000)}",
        1 => $"orders/2026/{random.Next(100_000):D6}",
        _ => $"w\u00e9{random.Next(1_000_000)}\ud83d\ude00",
    };

    /// <summary>A value of 0-1,500 bytes, or one in forty a value for an overflow page (not saved).</summary>
    private static StoredValue Value(Random random, bool overflow)
    {
        int length = overflow && random.Next(40) == 0
            ? PageFormat.OverflowThreshold + random.Next(1, 3_000)
            : random.Next(4) == 0 ? random.Next(200, 1_500) : random.Next(0, 60);
        byte[] bytes = new byte[length];
        random.NextBytes(bytes);
        return new StoredValue(random.Next(1, 1_000_000), random.Next(), bytes);
    }

    private static string Entries(TreeNode leaf)
    {
        var text = new System.Text.StringBuilder();
        for (int i = 0; i < leaf.Count; i++)
        {
            StoredValue value = leaf.ValueAt(i);
            text.Append(leaf.KeyAt(i)).Append('=').Append(value.Sequence).Append('/').Append(value.Length)
                .Append('/').Append(Digest(value.Inline.Span)).Append('|');
        }

        return text.ToString();
    }

    /// <summary>FNV-1a of a value's bytes: values told apart without printing them.</summary>
    private static uint Digest(ReadOnlySpan<byte> bytes)
    {
        uint hash = 2166136261;
        foreach (byte b in bytes)
        {
            hash = (hash ^ b) * 16777619;
        }

        return hash;
    }

    private static List<TreeNode> Leaves(PageReference? root)
    {
        var leaves = new List<TreeNode>();
        if (root is not null)
        {
            foreach (PageReference reference in LeafReferences(root))
            {
                leaves.Add(reference.Cached!);
            }
        }

        return leaves;
    }

    private static List<PageReference> LeafReferences(PageReference root)
    {
        var references = new List<PageReference>();
        Collect(root);
        return references;

        void Collect(PageReference reference)
        {
            TreeNode node = reference.Cached!;
            if (node.IsLeaf)
            {
                references.Add(reference);
                return;
            }

            foreach (PageReference child in node.Children)
            {
                Collect(child);
            }
        }
    }

    /// <summary>Every node's ids (leaves: with their values), depth first.</summary>
    private static string Describe(PageReference? root)
    {
        var text = new System.Text.StringBuilder();
        if (root is not null)
        {
            Describe(root.Cached!, text);
        }

        return text.ToString();

        static void Describe(TreeNode node, System.Text.StringBuilder text)
        {
            if (node.IsLeaf)
            {
                text.Append(Entries(node)).Append('\n');
                return;
            }

            foreach (string key in node.Keys)
            {
                text.Append(key).Append(';');
            }

            text.Append('\n');
            foreach (PageReference child in node.Children)
            {
                Describe(child.Cached!, text);
            }
        }
    }
}
