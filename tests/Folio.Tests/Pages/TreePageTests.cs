using System.Buffers.Binary;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Pages;

namespace Folio.Tests.Pages;

/// <summary>
/// Pages read in place through their slot directory (<see cref="TreePage"/>, how the buffer pool's frames are read)
/// against the sorted arrays they were written from: every search, fingerprint lookup, child choice and value agrees,
/// for ids of any UTF-16 code units (lone surrogates and U+FFFF included); a page without slots (format version 1)
/// and a leaf without fingerprints (version 2) decode to the same node and are found alike; and a slot that does not
/// point at its entry, or a fingerprint that does not match its id, fails the page's structure check.
/// </summary>
public sealed class TreePageTests
{
    [Property(MaxTest = 200, Arbitrary = [typeof(TreePageTests)])]
    public void A_leaf_read_in_place_agrees_with_the_sorted_ids_it_was_written_from(string[] ids, string[] probes)
    {
        string[] keys = SortedDistinct(ids);
        TreeNode leaf = TreeNode.NewLeaf(1);
        for (int i = 0; i < keys.Length; i++)
        {
            leaf.InsertEntry(i, keys[i], ValueFor(i));
        }

        byte[] bytes = Write(leaf);
        Assert.True(PageFormat.Check(bytes, out string? problem), problem);
        var page = new TreePage(bytes);
        Assert.True(page.HasSlots);
        Assert.True(page.HasFingerprints);
        Assert.True(page.IsLeaf);
        Assert.Equal(keys.Length, page.Count);
        for (int i = 0; i < keys.Length; i++)
        {
            Assert.Equal(i, page.Search(keys[i]));
            Assert.Equal(i, page.Find(keys[i]));
            Assert.True(page.KeyAt(i).SequenceEqual(keys[i]));
            StoredValue value = page.ValueAt(i);
            StoredValue expected = ValueFor(i);
            Assert.Equal(expected.Sequence, value.Sequence);
            Assert.Equal(expected.TimestampTicks, value.TimestampTicks);
            Assert.Equal(expected.Length, value.Length);
            Assert.Equal(expected.Overflow, value.Overflow);
            Assert.True(expected.Inline.Span.SequenceEqual(value.Inline.Span));
        }

        foreach (string probe in probes.Concat(probes.Select(p => "users/\uD800\u00E9000" + p)).Append("users/"))
        {
            // Found: the index; absent: the complement of where it would go, as Array.BinarySearch answers.
            int expected = Array.BinarySearch(keys, probe, StringComparer.Ordinal);
            Assert.Equal(expected, page.Search(probe));
            Assert.Equal(Math.Max(expected, -1), page.Find(probe));
        }

        AssertLegacyDecodesAlike(bytes, leaf);
        byte[] withoutFingerprints = WithoutFingerprints(bytes);
        Assert.True(PageFormat.Check(withoutFingerprints, out problem), problem);
        var version2 = new TreePage(withoutFingerprints);
        Assert.False(version2.HasFingerprints);
        foreach (string probe in keys.Concat(probes))
        {
            Assert.Equal(Math.Max(Array.BinarySearch(keys, probe, StringComparer.Ordinal), -1), version2.Find(probe));
        }

        TreeNode decoded = PageFormat.Decode(withoutFingerprints, new PagePosition(2, 2), out problem)!;
        Assert.Null(problem);
        Assert.Equal(leaf.ByteSize, decoded.ByteSize);
        Assert.Equal(keys, decoded.Keys.ToArray());
    }

    [Property(MaxTest = 200, Arbitrary = [typeof(TreePageTests)])]
    public void A_branch_read_in_place_sends_every_id_to_the_child_a_decoded_branch_does(string[] ids,
        string[] probes)
    {
        string[] separators = SortedDistinct(ids);
        separators = separators[..Math.Min(separators.Length, PageFormat.MaxChildren - 1)];
        var children = new PageReference[separators.Length + 1];
        for (int i = 0; i < children.Length; i++)
        {
            children[i] = new PageReference(new PagePosition(7, (uint)(i + 1)));
        }

        int size = PageFormat.PageHeaderSize + (children.Length * PageFormat.ChildReferenceSize);
        foreach (string separator in separators)
        {
            size += PageFormat.KeySize(separator);
        }

        TreeNode branch = TreeNode.SavedBranch(new PagePosition(7, 99), separators, children, size);
        byte[] bytes = Write(branch);
        Assert.True(PageFormat.Check(bytes, out string? problem), problem);
        var page = new TreePage(bytes);
        Assert.False(page.IsLeaf);
        Assert.Equal(children.Length, page.Count);
        for (int i = 0; i < children.Length; i++)
        {
            Assert.Equal(children[i].Position, page.ChildAt(i));
        }

        foreach (string probe in probes.Concat(separators).Concat(probes.Select(p => "users/\uD800\u00E9000" + p))
            .Append("users/").Append("users/\uD800"))
        {
            // Child i holds the ids below separator i: the count of separators at or below the id.
            int expected = separators.Count(separator => string.CompareOrdinal(separator, probe) <= 0);
            Assert.Equal(expected, page.ChildIndex(probe));
            Assert.Equal(expected, branch.ChildIndex(probe));
        }

        AssertLegacyDecodesAlike(bytes, branch);
    }

    [Fact]
    public void A_slot_that_does_not_point_at_its_entry_fails_the_structure_check()
    {
        byte[] bytes = LeafOfAAndB();
        int slot = PageFormat.PageHeaderSize + PageFormat.SlotSize;
        BinaryPrimitives.WriteInt32LittleEndian(bytes.AsSpan(slot),
            BinaryPrimitives.ReadInt32LittleEndian(bytes.AsSpan(slot)) + 2);
        AssertFailsTheCheck(bytes, "slot of entry 1");
    }

    [Fact]
    public void A_fingerprint_that_does_not_match_its_id_fails_the_structure_check()
    {
        byte[] bytes = LeafOfAAndB();
        int fingerprint = PageFormat.PageHeaderSize + (2 * PageFormat.SlotSize) + 1;
        Assert.Equal(PageFormat.Fingerprint("b"), bytes[fingerprint]);
        bytes[fingerprint] ^= 0x10;
        AssertFailsTheCheck(bytes, "fingerprint of entry 1");
    }

    [Fact]
    public void A_fingerprint_is_the_low_byte_of_the_ids_crc32c_in_utf16le()
    {
        // The format's definition (docs/formats/pages.md), independent of the machine's byte order.
        foreach (string id in new[] { "", "a", "people/0001234", "users/\uD800\u00E9\uFFFF" })
        {
            // UTF-16LE by hand: an encoder would replace the lone surrogate.
            byte[] bytes = id.SelectMany(c => new[] { (byte)c, (byte)(c >> 8) }).ToArray();
            Assert.Equal((byte)Folio.Storage.Crc32C.Compute(bytes), PageFormat.Fingerprint(id));
        }
    }

    public static Arbitrary<string> Ids() =>
        Gen.Choose(0, 40)
            .SelectMany(length => Gen.ArrayOf(Gen.Elements('a', 'b', 'z', '0', '\uD800', '\uDC00', '\uFFFF', '\u00E9'),
                length))
            .Select(chars => new string(chars))
            .ToArbitrary();

    private static StoredValue ValueFor(int i)
    {
        if (i % 5 == 4)
        {
            return new StoredValue(i, i * 10L, ReadOnlyMemory<byte>.Empty, new PagePosition(3, (uint)i),
                PageFormat.OverflowThreshold + 1 + i);
        }

        byte[] bytes = new byte[(i * 37) % 300];
        new Random(i).NextBytes(bytes);
        return new StoredValue(i + 1, (i + 1) * 10L, bytes);
    }

    private static string[] SortedDistinct(string[] ids)
    {
        // Ids of a real store share long prefixes ("users/0000..."): half the cases give them one.
        string prefix = ids.Length % 2 == 0 ? "users/\uD800\u00E9000" : "";
        string[] keys = ids.Where(id => id is not null).Select(id => prefix + id).Distinct(StringComparer.Ordinal)
            .ToArray();
        Array.Sort(keys, StringComparer.Ordinal);
        return keys.Length > PageFormat.MaxLeafEntries ? keys[..PageFormat.MaxLeafEntries] : keys;
    }

    /// <summary>A leaf of the ids "a" and "b" as this version writes it (it passes the structure check).</summary>
    private static byte[] LeafOfAAndB()
    {
        TreeNode leaf = TreeNode.NewLeaf(1);
        leaf.InsertEntry(0, "a", ValueFor(0));
        leaf.InsertEntry(1, "b", ValueFor(1));
        byte[] bytes = Write(leaf);
        Assert.True(PageFormat.Check(bytes, out _));
        return bytes;
    }

    /// <summary>The damaged page fails the structure check with a problem naming <paramref name="what"/>, and does
    /// not decode.</summary>
    private static void AssertFailsTheCheck(byte[] page, string what)
    {
        Assert.False(PageFormat.Check(page, out string? problem));
        Assert.Contains(what, problem, StringComparison.Ordinal);
        Assert.Null(PageFormat.Decode(page, new PagePosition(1, 1), out _));
    }

    private static byte[] Write(TreeNode node)
    {
        byte[] bytes = new byte[node.ByteSize];
        int written = node.IsLeaf ? PageFormat.WriteLeaf(bytes, node) : PageFormat.WriteBranch(bytes, node);
        Assert.Equal(bytes.Length, written);
        return bytes;
    }

    /// <summary>A leaf as format version 2 wrote it: no fingerprints, so the slots point that much earlier.</summary>
    private static byte[] WithoutFingerprints(byte[] page)
    {
        int count = BinaryPrimitives.ReadInt32LittleEndian(page.AsSpan(12));
        int fingerprintsAt = PageFormat.PageHeaderSize + (count * PageFormat.SlotSize);
        byte[] version2 = [.. page.AsSpan(0, fingerprintsAt), .. page.AsSpan(fingerprintsAt + count)];
        version2[9] = PageFormat.SlotDirectoryFlag;
        BinaryPrimitives.WriteInt32LittleEndian(version2, version2.Length);
        for (int i = 0; i < count; i++)
        {
            Span<byte> slot = version2.AsSpan(PageFormat.PageHeaderSize + (i * PageFormat.SlotSize));
            BinaryPrimitives.WriteInt32LittleEndian(slot, BinaryPrimitives.ReadInt32LittleEndian(slot) - count);
        }

        return version2;
    }

    /// <summary>The page with its slot directory (and a leaf's fingerprints) cut out and its flags cleared (how
    /// format version 1 wrote it) decodes to the same ids, values and children, sized as this version writes
    /// it.</summary>
    private static void AssertLegacyDecodesAlike(byte[] page, TreeNode node)
    {
        int count = BinaryPrimitives.ReadInt32LittleEndian(page.AsSpan(12));
        int slotsAt = PageFormat.PageHeaderSize + (node.IsLeaf ? 0 : count * PageFormat.ChildReferenceSize);
        int slotBytes = node.IsLeaf
            ? count * (PageFormat.SlotSize + PageFormat.FingerprintSize)
            : (count - 1) * PageFormat.SlotSize;
        byte[] legacy = [.. page.AsSpan(0, slotsAt), .. page.AsSpan(slotsAt + slotBytes)];
        legacy[9] = 0;
        BinaryPrimitives.WriteInt32LittleEndian(legacy, legacy.Length);
        Assert.True(PageFormat.Check(legacy, out string? problem), problem);
        Assert.False(new TreePage(legacy).HasSlots);
        TreeNode decoded = PageFormat.Decode(legacy, new PagePosition(2, 2), out problem)!;
        Assert.Null(problem);
        Assert.Equal(node.ByteSize, decoded.ByteSize);
        Assert.Equal(node.Keys.ToArray(), decoded.Keys.ToArray());
        if (node.IsLeaf)
        {
            for (int i = 0; i < node.Count; i++)
            {
                Assert.Equal(node.ValueAt(i).Sequence, decoded.ValueAt(i).Sequence);
                Assert.Equal(node.ValueAt(i).Overflow, decoded.ValueAt(i).Overflow);
                Assert.True(node.ValueAt(i).Inline.Span.SequenceEqual(decoded.ValueAt(i).Inline.Span));
            }
        }
        else
        {
            for (int i = 0; i < node.Count; i++)
            {
                Assert.Equal(node.ChildAt(i).Position, decoded.ChildAt(i).Position);
            }
        }
    }
}
