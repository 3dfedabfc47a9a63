using System.Buffers.Binary;

namespace Folio.Pages;

/// <summary>
/// A tree page read where it lies (a buffer pool frame), through its slot directory: binary searches over the ids or
/// separators without decoding the page into objects. The bytes must have passed <see cref="PageFormat.Check"/> and
/// carry a slot directory (<see cref="HasSlots"/>), and stay pinned while the page is read; nothing read from it
/// outlives the pin except what <see cref="ValueAt"/> copies.
/// </summary>
internal readonly ref struct TreePage
{
    private readonly ReadOnlySpan<byte> _page;

    public TreePage(ReadOnlySpan<byte> page) => _page = page;

    /// <summary>Whether the page has a slot directory (else it is decoded to be read).</summary>
    public bool HasSlots => (_page[9] & PageFormat.SlotDirectoryFlag) != 0;

    public bool IsLeaf => _page[8] == PageFormat.LeafType;

    /// <summary>Whether the leaf carries a fingerprint per id (format version 3), so <see cref="Find"/> can scan
    /// them.</summary>
    public bool HasFingerprints => (_page[9] & PageFormat.FingerprintFlag) != 0;

    /// <summary>Entries (leaf) or children (branch).</summary>
    public int Count => BinaryPrimitives.ReadInt32LittleEndian(_page[12..]);

    /// <summary>The index of <paramref name="key"/> in a leaf, or the complement of where it would go.</summary>
    public int Search(ReadOnlySpan<char> key)
    {
        int low = 0;
        int high = Count - 1;
        while (low <= high)
        {
            int middle = (int)((uint)(low + high) >> 1);
            int order = PageFormat.KeyAt(_page, LeafSlot(middle)).SequenceCompareTo(key);
            if (order == 0)
            {
                return middle;
            }

            if (order < 0)
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return ~low;
    }

    /// <summary>
    /// The index of <paramref name="key"/> in a leaf, or -1: the fingerprints (one byte an entry, next to the slots)
    /// are scanned for the key's, and only the ids whose fingerprint matches are compared, so a point read touches
    /// the page's first few cache lines and the entry it finds, where a binary search reads an id at a different
    /// place in the page at every step. Leaves without fingerprints are binary-searched.
    /// </summary>
    public int Find(ReadOnlySpan<char> key)
    {
        if (!HasFingerprints)
        {
            int index = Search(key);
            return index >= 0 ? index : -1;
        }

        int count = Count;
        int start = PageFormat.PageHeaderSize + (count * PageFormat.SlotSize);
        ReadOnlySpan<byte> fingerprints = _page.Slice(start, count);
        byte fingerprint = PageFormat.Fingerprint(key);
        int from = 0;
        while (true)
        {
            int match = fingerprints[from..].IndexOf(fingerprint);
            if (match < 0)
            {
                return -1;
            }

            from += match;
            if (PageFormat.KeyAt(_page, LeafSlot(from)).SequenceEqual(key))
            {
                return from;
            }

            from++;
        }
    }

    /// <summary>The child of a branch whose subtree holds <paramref name="key"/>: the number of separators at or
    /// below it (child i holds the ids below separator i, child i + 1 those at or above it).</summary>
    public int ChildIndex(ReadOnlySpan<char> key)
    {
        int low = 0;
        int high = Count - 2;
        while (low <= high)
        {
            int middle = (int)((uint)(low + high) >> 1);
            if (PageFormat.KeyAt(_page, SeparatorSlot(middle)).SequenceCompareTo(key) <= 0)
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return low;
    }

    /// <summary>The position of child <paramref name="index"/> of a branch.</summary>
    public PagePosition ChildAt(int index) =>
        new(BinaryPrimitives.ReadUInt64LittleEndian(
            _page[(PageFormat.PageHeaderSize + (index * PageFormat.ChildReferenceSize))..]));

    /// <summary>The id of entry <paramref name="index"/> of a leaf.</summary>
    public ReadOnlySpan<char> KeyAt(int index) => PageFormat.KeyAt(_page, LeafSlot(index));

    /// <summary>The value of entry <paramref name="index"/> of a leaf, its inline bytes copied out of the page (an
    /// overflow value keeps only its position: read it with <see cref="StoredValue.Read"/>).</summary>
    public StoredValue ValueAt(int index)
    {
        int at = LeafSlot(index);
        at += 2 + (BinaryPrimitives.ReadUInt16LittleEndian(_page[at..]) * 2);
        long sequence = BinaryPrimitives.ReadInt64LittleEndian(_page[at..]);
        long timestamp = BinaryPrimitives.ReadInt64LittleEndian(_page[(at + 8)..]);
        int length = BinaryPrimitives.ReadInt32LittleEndian(_page[(at + 16)..]);
        at += 20;
        if (length > PageFormat.OverflowThreshold)
        {
            var overflow = new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(_page[at..]));
            return new StoredValue(sequence, timestamp, ReadOnlyMemory<byte>.Empty, overflow, length);
        }

        return new StoredValue(sequence, timestamp, _page.Slice(at, length).ToArray());
    }

    private int LeafSlot(int index) =>
        BinaryPrimitives.ReadInt32LittleEndian(_page[(PageFormat.PageHeaderSize + (index * PageFormat.SlotSize))..]);

    private int SeparatorSlot(int index) =>
        BinaryPrimitives.ReadInt32LittleEndian(_page[(PageFormat.PageHeaderSize
            + (Count * PageFormat.ChildReferenceSize) + (index * PageFormat.SlotSize))..]);
}
