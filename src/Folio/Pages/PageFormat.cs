using System.Buffers.Binary;
using System.Numerics;
using System.Runtime.CompilerServices;
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
///  9  u8  flags      bit 0: the page has a slot directory (every tree page this version writes); bit 1: the
///                    leaf has fingerprints (every leaf this version writes)
/// 10  u16 0
/// 12  u32 count      entries (leaf), children (branch), value bytes (overflow)
/// </code>
/// Leaf body: count u32 slots (each entry's offset from the page's start), count u8 fingerprints (each id's
/// <see cref="Fingerprint"/>, in slot order; flag bit 1), then per entry: u16 id length in UTF-16 code units, the
/// id (UTF-16LE), i64 sequence, i64 timestamp (UTC ticks), i32 value length, then the value's bytes when the length
/// is at most <see cref="OverflowThreshold"/>, else the u64 position of its overflow page. Branch
/// body: count u64 child positions, count - 1 u32 slots (each separator's offset), then the separators (u16 length,
/// UTF-16LE). Overflow body: the value's bytes. Integers are little-endian. The slots let a reader binary-search a
/// page where it lies (<see cref="TreePage"/>, in a buffer pool frame) without decoding it; pages without the flag
/// (written before slots existed) have no slot directory and are decoded to be read. The fingerprints let a point
/// read find its id by scanning count bytes and comparing the ids whose fingerprint matches (one in 256 of the others
/// on average), instead of a binary search whose every step reads an id elsewhere in the page; leaves without the
/// fingerprint flag (format version 2) are binary-searched.
/// </summary>
internal static class PageFormat
{
    public const int PageHeaderSize = 16;
    public const int ChildReferenceSize = 8;

    /// <summary>A slot of a page's slot directory: the u32 offset of one entry (leaf) or separator (branch).</summary>
    public const int SlotSize = 4;

    /// <summary>Header byte 9, bit 0: the page has a slot directory.</summary>
    public const byte SlotDirectoryFlag = 1;

    /// <summary>Header byte 9, bit 1: the leaf has a fingerprint per id after its slots.</summary>
    public const byte FingerprintFlag = 2;

    /// <summary>A leaf entry's fingerprint: one byte.</summary>
    public const int FingerprintSize = 1;

    /// <summary>Values longer than this go to an overflow page.</summary>
    public const int OverflowThreshold = 2048;

    /// <summary>A page splits once its encoded size passes this (unless it holds two entries or fewer).</summary>
    public const int TargetPageSize = 16 * 1024;

    public const int MaxLeafEntries = 128;
    public const int MaxChildren = 128;

    public const byte LeafType = 1;
    public const byte BranchType = 2;
    public const byte OverflowType = 3;

    /// <summary>The bytes a key (leaf id or branch separator) takes in a page, its slot included.</summary>
    public static int KeySize(string key) => SlotSize + 2 + (key.Length * 2);

    public static int ValueSize(in StoredValue value) =>
        8 + 8 + 4 + (value.IsOverflow ? 8 : value.Length);

    /// <summary>The bytes a leaf entry takes, its slot and fingerprint included.</summary>
    public static int EntrySize(string key, in StoredValue value) => KeySize(key) + FingerprintSize + ValueSize(value);

    /// <summary>
    /// The fingerprint of a leaf's id: the low byte of the CRC-32C of its UTF-16LE bytes (the bytes the page stores),
    /// so equal ids have equal fingerprints on every machine and unequal ones differ in all but one case in 256.
    /// </summary>
    public static byte Fingerprint(ReadOnlySpan<char> key)
    {
        if (BitConverter.IsLittleEndian)
        {
            return (byte)Crc32C.Compute(MemoryMarshal.AsBytes(key));
        }

        uint crc = Crc32C.Seed;
        foreach (char c in key)
        {
            crc = BitOperations.Crc32C(BitOperations.Crc32C(crc, (byte)c), (byte)(c >> 8));
        }

        return (byte)Crc32C.Finish(crc);
    }

    /// <summary>Writes the header's checksum once the page's bytes are in place.</summary>
    public static void Seal(Span<byte> page, PagePosition position)
    {
        BinaryPrimitives.WriteUInt32LittleEndian(page[4..], Checksum(page, position));
    }

    /// <summary>The checksum a page at <paramref name="position"/> must carry.</summary>
    public static uint Checksum(ReadOnlySpan<byte> page, PagePosition position) => Checksum(page, [], position);

    /// <summary>The checksum of the page at <paramref name="position"/> whose bytes are <paramref name="page"/>
    /// followed by <paramref name="body"/> (an overflow page's value, written from where it lies).</summary>
    private static uint Checksum(ReadOnlySpan<byte> page, ReadOnlySpan<byte> body, PagePosition position)
    {
        Span<byte> positionBytes = stackalloc byte[8];
        BinaryPrimitives.WriteUInt64LittleEndian(positionBytes, position.Value);
        uint crc = Crc32C.Append(Crc32C.Seed, page[..4]);
        crc = Crc32C.Append(crc, page[8..]);
        crc = Crc32C.Append(crc, body);
        return Crc32C.Finish(Crc32C.Append(crc, positionBytes));
    }

    public static void WriteHeader(Span<byte> page, int length, byte type, int count, byte flags = 0)
    {
        BinaryPrimitives.WriteInt32LittleEndian(page, length);
        BinaryPrimitives.WriteUInt32LittleEndian(page[4..], 0);
        page[8] = type;
        page[9] = flags;
        BinaryPrimitives.WriteUInt16LittleEndian(page[10..], 0);
        BinaryPrimitives.WriteInt32LittleEndian(page[12..], count);
    }

    /// <summary>Encodes a leaf whose overflow values already carry their positions; returns the bytes
    /// written.</summary>
    public static int WriteLeaf(Span<byte> page, TreeNode leaf)
    {
        WriteHeader(page, leaf.ByteSize, LeafType, leaf.Count, SlotDirectoryFlag | FingerprintFlag);
        ReadOnlySpan<string> keys = leaf.Keys;
        ReadOnlySpan<StoredValue> values = leaf.Values;
        int fingerprints = PageHeaderSize + (keys.Length * SlotSize);
        int at = fingerprints + (keys.Length * FingerprintSize);
        for (int i = 0; i < keys.Length; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(page[(PageHeaderSize + (i * SlotSize))..], at);
            page[fingerprints + i] = Fingerprint(keys[i]);
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
        WriteHeader(page, branch.ByteSize, BranchType, branch.Count, SlotDirectoryFlag);
        int at = PageHeaderSize;
        foreach (PageReference child in branch.Children)
        {
            BinaryPrimitives.WriteUInt64LittleEndian(page[at..], child.Position.Value);
            at += 8;
        }

        ReadOnlySpan<string> separators = branch.Keys;
        int slots = at;
        at += separators.Length * SlotSize;
        for (int i = 0; i < separators.Length; i++)
        {
            BinaryPrimitives.WriteInt32LittleEndian(page[(slots + (i * SlotSize))..], at);
            at = WriteKey(page, at, separators[i]);
        }

        return at;
    }

    public static int OverflowPageSize(int valueLength) => PageHeaderSize + valueLength;

    /// <summary>Writes and seals the header (the first <see cref="PageHeaderSize"/> bytes of
    /// <paramref name="header"/>) of the overflow page at <paramref name="position"/> that holds
    /// <paramref name="value"/> as its body, without copying the value: the page is the header followed by the value's
    /// bytes, and the checksum covers them as <see cref="Checksum(ReadOnlySpan{byte}, PagePosition)"/> covers a page in
    /// one piece.</summary>
    public static void WriteOverflowHeader(Span<byte> header, ReadOnlySpan<byte> value, PagePosition position)
    {
        header = header[..PageHeaderSize];
        WriteHeader(header, PageHeaderSize + value.Length, OverflowType, value.Length);
        BinaryPrimitives.WriteUInt32LittleEndian(header[4..], Checksum(header, value, position));
    }

    /// <summary>
    /// Decodes a tree page whose length and checksum were checked. Inline values are slices of
    /// <paramref name="page"/>, which the node keeps alive. Returns null with <paramref name="problem"/> set when the
    /// bytes contradict themselves (a checksum collision or a writer's bug: corruption all the same).
    /// </summary>
    public static TreeNode? Decode(ReadOnlyMemory<byte> page, PagePosition position, out string? problem) =>
        Check(page.Span, out problem) ? DecodeChecked(page, position) : null;

    /// <summary>Decodes a page that passed <see cref="Check"/> when it was read from disk (a copy of a buffer pool
    /// frame's, which the node keeps alive as <see cref="Decode"/>'s does), without checking it again.</summary>
    public static TreeNode DecodeChecked(ReadOnlyMemory<byte> page, PagePosition position)
    {
        ReadOnlySpan<byte> bytes = page.Span;
        bool slotted = (bytes[9] & SlotDirectoryFlag) != 0;
        bool fingerprinted = (bytes[9] & FingerprintFlag) != 0;
        int count = BinaryPrimitives.ReadInt32LittleEndian(bytes[12..]);
        int at = PageHeaderSize;
        if (bytes[8] == LeafType)
        {
            // A page without slots or fingerprints is sized as this version would write it, so a copy of it splits
            // correctly.
            at += (slotted ? count * SlotSize : 0) + (fingerprinted ? count * FingerprintSize : 0);
            var keys = new string[count];
            var values = new StoredValue[count];
            for (int i = 0; i < count; i++)
            {
                keys[i] = ReadKey(bytes, ref at);
                long sequence = BinaryPrimitives.ReadInt64LittleEndian(bytes[at..]);
                long timestamp = BinaryPrimitives.ReadInt64LittleEndian(bytes[(at + 8)..]);
                int length = BinaryPrimitives.ReadInt32LittleEndian(bytes[(at + 16)..]);
                at += 20;
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
            }

            return TreeNode.SavedLeaf(position, keys, values,
                bytes.Length + (slotted ? 0 : count * SlotSize) + (fingerprinted ? 0 : count * FingerprintSize));
        }

        var children = new PageReference[count];
        for (int i = 0; i < count; i++)
        {
            children[i] = new PageReference(new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(bytes[at..])));
            at += 8;
        }

        var separators = new string[count - 1];
        at += slotted ? separators.Length * SlotSize : 0;
        for (int i = 0; i < separators.Length; i++)
        {
            separators[i] = ReadKey(bytes, ref at);
        }

        return TreeNode.SavedBranch(position, separators, children,
            bytes.Length + (slotted ? 0 : separators.Length * SlotSize));
    }

    /// <summary>
    /// Checks the structure of a tree page whose length and checksum were checked, without allocating: its type,
    /// flags and count, that every entry (separator) lies inside the page where its slot says, one after another,
    /// ending at the page's length, that a leaf's ids ascend and carry their fingerprints, and that a branch's
    /// children are saved. A page that passes can be read in place (<see cref="TreePage"/>) or decoded without
    /// further checks. False with <paramref name="problem"/> set otherwise.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // a scrub checks every page once per process
    public static bool Check(ReadOnlySpan<byte> page, out string? problem)
    {
        problem = null;
        if (page.Length < PageHeaderSize || BinaryPrimitives.ReadInt32LittleEndian(page) != page.Length)
        {
            problem = $"the page's length field disagrees with its {page.Length} bytes";
            return false;
        }

        byte type = page[8];
        bool slotted = (page[9] & SlotDirectoryFlag) != 0;
        bool fingerprinted = (page[9] & FingerprintFlag) != 0;
        int count = BinaryPrimitives.ReadInt32LittleEndian(page[12..]);
        int at = PageHeaderSize;
        if (type == LeafType)
        {
            if ((page[9] & ~(SlotDirectoryFlag | FingerprintFlag)) != 0 || (fingerprinted && !slotted))
            {
                problem = $"a leaf has flags {page[9]}";
                return false;
            }

            int perEntry = 22 + (slotted ? SlotSize : 0) + (fingerprinted ? FingerprintSize : 0);
            if (count < 0 || count > (page.Length - at) / perEntry)
            {
                problem = $"a leaf claims {count} entries";
                return false;
            }

            int slots = at;
            at += slotted ? count * SlotSize : 0;
            int fingerprints = at;
            at += fingerprinted ? count * FingerprintSize : 0;
            ReadOnlySpan<char> previous = default;
            for (int i = 0; i < count; i++)
            {
                if (slotted && BinaryPrimitives.ReadInt32LittleEndian(page[(slots + (i * SlotSize))..]) != at)
                {
                    problem = $"the slot of entry {i} does not point at it";
                    return false;
                }

                if (!TryKey(page, ref at, out ReadOnlySpan<char> key) || page.Length - at < 20)
                {
                    problem = $"entry {i} runs past the page's length {page.Length}";
                    return false;
                }

                if (i > 0 && previous.SequenceCompareTo(key) >= 0)
                {
                    problem = $"ids out of order at entry {i}";
                    return false;
                }

                if (fingerprinted && page[fingerprints + i] != Fingerprint(key))
                {
                    problem = $"the fingerprint of entry {i} does not match its id";
                    return false;
                }

                previous = key;
                int length = BinaryPrimitives.ReadInt32LittleEndian(page[(at + 16)..]);
                at += 20;
                int stored = length > OverflowThreshold ? 8 : length;
                if (length < 0 || page.Length - at < stored)
                {
                    problem = $"entry {i} has length {length}, past the page's length {page.Length}";
                    return false;
                }

                at += stored;
            }
        }
        else if (type == BranchType)
        {
            if ((page[9] & ~SlotDirectoryFlag) != 0)
            {
                problem = $"a branch has flags {page[9]}";
                return false;
            }

            if (count < 1 || count > (page.Length - at) / 8)
            {
                problem = $"a branch claims {count} children";
                return false;
            }

            for (int i = 0; i < count; i++)
            {
                if (BinaryPrimitives.ReadUInt64LittleEndian(page[at..]) == 0)
                {
                    problem = $"child {i} has no position";
                    return false;
                }

                at += 8;
            }

            int slots = at;
            if (slotted && (count - 1) > (page.Length - at) / SlotSize)
            {
                problem = $"a branch of {count} children has no room for its slots";
                return false;
            }

            at += slotted ? (count - 1) * SlotSize : 0;
            for (int i = 0; i < count - 1; i++)
            {
                if (slotted && BinaryPrimitives.ReadInt32LittleEndian(page[(slots + (i * SlotSize))..]) != at)
                {
                    problem = $"the slot of separator {i} does not point at it";
                    return false;
                }

                if (!TryKey(page, ref at, out _))
                {
                    problem = $"separator {i} runs past the page's length {page.Length}";
                    return false;
                }
            }
        }
        else
        {
            problem = $"page type {type} is not a tree page";
            return false;
        }

        if (at != page.Length)
        {
            problem = $"the page's entries end at {at}, not at its length {page.Length}";
            return false;
        }

        return true;
    }

    /// <summary>The key at <paramref name="at"/> (u16 length, UTF-16LE) of a checked page.</summary>
    public static ReadOnlySpan<char> KeyAt(ReadOnlySpan<byte> page, int at) =>
        MemoryMarshal.Cast<byte, char>(page.Slice(at + 2, BinaryPrimitives.ReadUInt16LittleEndian(page[at..]) * 2));

    private static bool TryKey(ReadOnlySpan<byte> page, scoped ref int at, out ReadOnlySpan<char> key)
    {
        key = default;
        if (page.Length - at < 2)
        {
            return false;
        }

        int length = BinaryPrimitives.ReadUInt16LittleEndian(page[at..]) * 2;
        if (page.Length - at - 2 < length)
        {
            return false;
        }

        key = MemoryMarshal.Cast<byte, char>(page.Slice(at + 2, length));
        at += 2 + length;
        return true;
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
