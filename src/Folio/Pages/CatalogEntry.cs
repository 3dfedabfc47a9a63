using System.Buffers.Binary;

namespace Folio.Pages;

/// <summary>
/// The values of the catalog tree, which names every collection's tree (docs/formats/pages.md, "Catalog tree").
/// <para>
/// Layout, little-endian. A collection's entry, keyed by its name: u64 root position, i64 document count (16
/// bytes); for a tree ahead of its checkpoint (<see cref="CollectionTree.AheadSequence"/>, a slice of a checkpoint
/// written in slices), then i64 ahead sequence, i32 length in UTF-16 code units of the first id not ahead
/// (<see cref="CollectionTree.AheadBefore"/>; -1: every id is), and those code units (28 bytes and 2 a unit). The
/// pass's entry, keyed by <see cref="PassName"/>: i64 the sequence of the pass the slice belongs to
/// (<see cref="PageCheckpoint.PassSequence"/>).
/// </para>
/// </summary>
internal static class CatalogEntry
{
    /// <summary>The key of the pass's entry: a control character, which no collection name holds.</summary>
    public const string PassName = "\u0001pass";

    /// <summary>Limits the ids a slice's mark may name (<see cref="CollectionTree.AheadBefore"/>), so that an entry
    /// stays inline in its leaf.</summary>
    public const int MaxAheadIdLength = 512;

    private const int TreeBytes = 16;
    private const int AheadBytes = 28;

    /// <summary>The entry of <paramref name="tree"/>.</summary>
    public static byte[] Encode(CollectionTree tree)
    {
        int units = tree.AheadBefore?.Length ?? 0;
        byte[] entry = new byte[tree.AheadSequence == 0 ? TreeBytes : AheadBytes + (2 * units)];
        BinaryPrimitives.WriteUInt64LittleEndian(entry, tree.Root.Position.Value);
        BinaryPrimitives.WriteInt64LittleEndian(entry.AsSpan(8), tree.Count);
        if (tree.AheadSequence != 0)
        {
            BinaryPrimitives.WriteInt64LittleEndian(entry.AsSpan(16), tree.AheadSequence);
            BinaryPrimitives.WriteInt32LittleEndian(entry.AsSpan(24), tree.AheadBefore is null ? -1 : units);
            for (int i = 0; i < units; i++)
            {
                BinaryPrimitives.WriteUInt16LittleEndian(entry.AsSpan(AheadBytes + (2 * i)), tree.AheadBefore![i]);
            }
        }

        return entry;
    }

    /// <summary>Decodes the entry of collection <paramref name="name"/>; null when it is malformed.</summary>
    public static CollectionTree? Decode(string name, ReadOnlySpan<byte> value)
    {
        if (value.Length < TreeBytes)
        {
            return null;
        }

        var root = new PagePosition(BinaryPrimitives.ReadUInt64LittleEndian(value));
        long count = BinaryPrimitives.ReadInt64LittleEndian(value[8..]);
        if (!root.IsSaved || count < 0)
        {
            return null;
        }

        if (value.Length == TreeBytes)
        {
            return new CollectionTree(name, new PageReference(root), count);
        }

        if (value.Length < AheadBytes)
        {
            return null;
        }

        long aheadSequence = BinaryPrimitives.ReadInt64LittleEndian(value[16..]);
        int units = BinaryPrimitives.ReadInt32LittleEndian(value[24..]);
        if (aheadSequence <= 0 || units < -1 || value.Length != AheadBytes + (2 * Math.Max(units, 0)))
        {
            return null;
        }

        string? before = null;
        if (units >= 0)
        {
            char[] chars = new char[units];
            for (int i = 0; i < units; i++)
            {
                chars[i] = (char)BinaryPrimitives.ReadUInt16LittleEndian(value[(AheadBytes + (2 * i))..]);
            }

            before = new string(chars);
        }

        return new CollectionTree(name, new PageReference(root), count)
        {
            AheadSequence = aheadSequence,
            AheadBefore = before,
        };
    }

    /// <summary>The pass's entry for <paramref name="passSequence"/>.</summary>
    public static byte[] EncodePass(long passSequence)
    {
        byte[] entry = new byte[8];
        BinaryPrimitives.WriteInt64LittleEndian(entry, passSequence);
        return entry;
    }

    /// <summary>Decodes the pass's entry: its sequence, or -1 when it is malformed.</summary>
    public static long DecodePass(ReadOnlySpan<byte> value) =>
        value.Length == 8 ? BinaryPrimitives.ReadInt64LittleEndian(value) : -1;
}
