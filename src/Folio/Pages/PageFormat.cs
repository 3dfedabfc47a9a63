using System.Buffers.Binary;
using System.Runtime.InteropServices;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// The bytes of a page (docs/formats/pages.md). Every page starts with a 16-byte header:
/// <code>
///  0  u32 length     the page's bytes, header included
///  4  u32 crc        CRC-32C of bytes [0, 4) and [8, length) followed by the page's position (8 bytes LE), so a
///                    page read from the wrong place fails its check even when its bytes are intact
///  8  u8  type       1 leaf, 2 branch, 3 overflow
///  9  u8  0, u16 0
/// 12  u32 count      entries (leaf), children (branch), value bytes (overflow)
/// </code>
/// Leaf body, per entry: u16 id length in UTF-16 code units, the id (UTF-16LE), i64 sequence, i64 timestamp (UTC
/// ticks), i32 value length, then the value's bytes when the length is at most <see cref="OverflowThreshold"/>,
/// else the u64 position of its overflow page. Branch body: count u64 child positions, then count - 1 separators
/// (u16 length, UTF-16LE). Overflow body: the value's bytes. Integers are little-endian.
/// </summary>
internal static class PageFormat
{
    public const int PageHeaderSize = 16;
    public const int ChildReferenceSize = 8;

    /// <summary>Values longer than this go to an overflow page.</summary>
    public const int OverflowThreshold = 2048;

    /// <summary>A page splits once its encoded size passes this (unless it holds two entries or fewer).</summary>
    public const int TargetPageSize = 16 * 1024;

    public const int MaxLeafEntries = 128;
    public const int MaxChildren = 128;

    public const byte LeafType = 1;
    public const byte BranchType = 2;
    public const byte OverflowType = 3;

    public static int KeySize(string key) => 2 + (key.Length * 2);

    public static int ValueSize(in StoredValue value) =>
        8 + 8 + 4 + (value.IsOverflow ? 8 : value.Length);

    public static int EntrySize(string key, in StoredValue value) => KeySize(key) + ValueSize(value);

    /// <summary>Writes the header's checksum once the page's bytes are in place.</summary>
    public static void Seal(Span<byte> page, PagePosition position)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(page[4..], Checksum(page, position));
    }

    /// <summary>The checksum a page at <paramref name="position"/> must carry.</summary>
    public static uint Checksum(ReadOnlySpan<byte> page, PagePosition position)
    {
        Span<byte> positionBytes = stackalloc byte[8];
        BinaryPrimitives.WriteUInt64LittleEndian(positionBytes, position.Value);
        uint crc = Crc32C.Append(Crc32C.Seed, page[..4]);
        crc = Crc32C.Append(crc, page[8..]);
        return Crc32C.Finish(Crc32C.Append(crc, positionBytes));
    }

    public static void WriteHeader(Span<byte> page, int length, byte type, int count)
    {
        BinaryPrimitives.WriteInt32LittleEndian(page, length);
        BinaryPrimitives.WriteUInt32LittleEndian(page[4..], 0);
        page[8] = type;
        page[9] = 0;
        BinaryPrimitives.WriteUInt16LittleEndian(page[10..], 0);
        BinaryPrimitives.WriteInt32LittleEndian(page[12..], count);
    }

    /// <summary>Encodes a leaf whose overflow values already carry their positions; returns the bytes
    /// written.</summary>
    public static int WriteLeaf(Span<byte> page, TreeNode leaf)
    {
        WriteHeader(page, leaf.ByteSize, LeafType, leaf.Count);
        int at = PageHeaderSize;
        ReadOnlySpan<string> keys = leaf.Keys;
        ReadOnlySpan<StoredValue> values = leaf.Values;
        for (int i = 0; i < keys.Length; i++)
        {
            at = WriteKey(page, at, keys[i]);
            StoredValue value = values[i];
            BinaryPrimitives.WriteInt64LittleEndian(page[at..], value.Sequence);
            BinaryPrimitives.WriteInt64LittleEndian(page[(at + 8)..], value.TimestampTicks);
            BinaryPrimitives.WriteInt32LittleEndian(page[(at + 16)..], value.Length);
            at += 20;
            if (value.IsOverflow)
            {
                BinaryPrimitives.WriteUInt64LittleEndian(page[at..], value.Overflow.Value);
                at += 8;
            }
            else
            {
                value.Inline.Span.CopyTo(page[at..]);
                at += value.Length;
            }
        }

        return at;
    }

    /// <summary>Encodes a branch whose children all carry their positions; returns the bytes written.</summary>
    public static int WriteBranch(Span<byte> page, TreeNode branch)
    {
        WriteHeader(page, branch.ByteSize, BranchType, branch.Count);
        int at = PageHeaderSize;
        foreach (PageReference child in branch.Children)
        {
            BinaryPrimitives.WriteUInt64LittleEndian(page[at..], child.Position.Value);
            at += 8;
        }

        foreach (string separator in branch.Keys)
        {
            at = WriteKey(page, at, separator);
        }

        return at;
    }

    public static int OverflowPageSize(int valueLength) => PageHeaderSize + valueLength;

    public static void WriteOverflow(Span<byte> page, ReadOnlySpan<byte> value)
    {
        WriteHeader(page, PageHeaderSize + value.Length, OverflowType, value.Length);
        value.CopyTo(page[PageHeaderSize..]);
    }

    /// <summary>
    /// Decodes a tree page whose length and checksum were checked. Inline values are slices of
    /// <paramref name="page"/>, which the node keeps alive. Returns null with <paramref name="problem"/> set when the
    /// bytes contradict themselves (a checksum collision or a writer's bug: corruption all the same).
    /// </summary>
    public static TreeNode? Decode(ReadOnlyMemory<byte> page, PagePosition position, out string? problem)
    {
        ReadOnlySpan<byte> bytes = page.Span;
        byte type = bytes[8];
        int count = BinaryPrimitives.ReadInt32LittleEndian(bytes[12..]);
        problem = null;
        int at = PageHeaderSize;
        try
        {
            if (type == LeafType)
            {
                if (count < 0 || count > (bytes.Length - at) / 22)
                {
                    problem = $"a leaf claims {count} entries";
                    return null;
                }

                var keys = new string[count];
                var values = new StoredValue[count];
                for (int i = 0; i < count; i++)
                {
                    keys[i] = ReadKey(bytes, ref at);
                    long sequence = BinaryPrimitives.ReadInt64LittleEndian(bytes[at..]);
                    long timestamp = BinaryPrimitives.ReadInt64LittleEndian(bytes[(at + 8)..]);
                    int length = BinaryPrimitives.ReadInt32LittleEndian(bytes[(at + 16)..]);
                    at += 20;
                    if (length < 0)
                    {
                        problem = $"entry {i} has length {length}";
                        return null;
                    }

                    if (length > OverflowThreshold)
                    {
                        var overflow = new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(bytes[at..]));
                        values[i] = new StoredValue(sequence, timestamp, ReadOnlyMemory<byte>.Empty, overflow, length);
                        at += 8;
                    }
                    else
                    {
                        values[i] = new StoredValue(sequence, timestamp, page.Slice(at, length));
                        at += length;
                    }

                    if (i > 0 && string.CompareOrdinal(keys[i - 1], keys[i]) >= 0)
                    {
                        problem = $"ids out of order at entry {i}";
                        return null;
                    }
                }

                if (at != bytes.Length)
                {
                    problem = $"the page's entries end at {at}, not at its length {bytes.Length}";
                    return null;
                }

                return TreeNode.SavedLeaf(position, keys, values, bytes.Length);
            }

            if (type == BranchType)
            {
                if (count < 1 || count > (bytes.Length - at) / 8)
                {
                    problem = $"a branch claims {count} children";
                    return null;
                }

                var children = new PageReference[count];
                for (int i = 0; i < count; i++)
                {
                    var child = new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(bytes[at..]));
                    if (!child.IsSaved)
                    {
                        problem = $"child {i} has no position";
                        return null;
                    }

                    children[i] = new PageReference(child);
                    at += 8;
                }

                var separators = new string[count - 1];
                for (int i = 0; i < separators.Length; i++)
                {
                    separators[i] = ReadKey(bytes, ref at);
                }

                if (at != bytes.Length)
                {
                    problem = $"the page's entries end at {at}, not at its length {bytes.Length}";
                    return null;
                }

                return TreeNode.SavedBranch(position, separators, children, bytes.Length);
            }

            problem = $"page type {type} is not a tree page";
            return null;
        }
        catch (ArgumentOutOfRangeException)
        {
            problem = $"the page's entries run past its length {bytes.Length}";
            return null;
        }
    }

    private static int WriteKey(Span<byte> page, int at, string key)
    {
        BinaryPrimitives.WriteUInt16LittleEndian(page[at..], (ushort)key.Length);
        MemoryMarshal.AsBytes(key.AsSpan()).CopyTo(page[(at + 2)..]);
        return at + 2 + (key.Length * 2);
    }

    private static string ReadKey(ReadOnlySpan<byte> page, ref int at)
    {
        int length = BinaryPrimitives.ReadUInt16LittleEndian(page[at..]);
        ReadOnlySpan<byte> chars = page.Slice(at + 2, length * 2);
        at += 2 + (length * 2);
        return new string(MemoryMarshal.Cast<byte, char>(chars));
    }
}
