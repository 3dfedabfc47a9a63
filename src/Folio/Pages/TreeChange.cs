using System.Text;

namespace Folio.Pages;

/// <summary>
/// One document's change for a checkpoint: a put of <see cref="Value"/>, or a delete. The id is a string, or, for an
/// ASCII id a commit wrote, its bytes where they already lie (the commit's journal entry): a checkpoint takes
/// hundreds of thousands of ids at its start and holds them to its end, so id strings made up front would all
/// survive the collections of the young generation that run meanwhile, each copying them, while an id made when a
/// leaf takes it (<see cref="Id"/>) dies with the leaf's arrays once the leaf is encoded. An ASCII byte is its own
/// UTF-16 code unit, so both forms compare in the trees' order (ordinal order of UTF-16 code units) unit by unit
/// (<see cref="UnitAt"/>, <see cref="CompareTo(string)"/>) without a string.
/// </summary>
internal readonly struct TreeChange
{
    private readonly string? _id;
    private readonly byte[]? _ascii;
    private readonly int _offset;

    private TreeChange(string? id, byte[]? ascii, int offset, int length, StoredValue value, bool isDelete)
    {
        _id = id;
        _ascii = ascii;
        _offset = offset;
        IdLength = length;
        Value = value;
        IsDelete = isDelete;
    }

    public StoredValue Value { get; }

    public bool IsDelete { get; }

    /// <summary>The id's length in UTF-16 code units.</summary>
    public int IdLength { get; }

    /// <summary>The id as a string: a new string for an id held as bytes, so the placing code asks for it only where
    /// a leaf or a delete needs one and compares with <see cref="CompareTo(string)"/> elsewhere.</summary>
    public string Id => _id ?? Encoding.ASCII.GetString(_ascii!, _offset, IdLength);

    public static TreeChange Put(string id, StoredValue value) => new(id, null, 0, id.Length, value, false);

    public static TreeChange Delete(string id) => new(id, null, 0, id.Length, default, true);

    /// <summary>A put of the id whose ASCII bytes are <paramref name="length"/> bytes of <paramref name="buffer"/>
    /// from <paramref name="offset"/>; the bytes must not change while the change is in use.</summary>
    public static TreeChange PutAscii(byte[] buffer, int offset, int length, StoredValue value)
    {
        System.Diagnostics.Debug.Assert(Ascii.IsValid(buffer.AsSpan(offset, length)));
        return new(null, buffer, offset, length, value, false);
    }

    /// <summary>A delete of an id held as ASCII bytes (see <see cref="PutAscii"/>).</summary>
    public static TreeChange DeleteAscii(byte[] buffer, int offset, int length)
    {
        System.Diagnostics.Debug.Assert(Ascii.IsValid(buffer.AsSpan(offset, length)));
        return new(null, buffer, offset, length, default, true);
    }

    /// <summary>The id's UTF-16 code unit at <paramref name="index"/> (below <see cref="IdLength"/>).</summary>
    public char UnitAt(int index) => _id is not null ? _id[index] : (char)_ascii![_offset + index];

    /// <summary>The ordinal order of this id against <paramref name="key"/>: negative when it sorts first.</summary>
    public int CompareTo(string key)
    {
        if (_id is not null)
        {
            return string.CompareOrdinal(_id, key);
        }

        ReadOnlySpan<byte> id = _ascii.AsSpan(_offset, IdLength);
        int common = Math.Min(id.Length, key.Length);
        for (int i = 0; i < common; i++)
        {
            int difference = id[i] - key[i];
            if (difference != 0)
            {
                return difference;
            }
        }

        return id.Length - key.Length;
    }

    /// <summary>The ordinal order of this id against <paramref name="other"/>'s from code unit
    /// <paramref name="start"/> on (the units before it are equal or not compared).</summary>
    public int CompareFrom(in TreeChange other, int start)
    {
        if (_id is not null && other._id is not null)
        {
            return _id.AsSpan(start).SequenceCompareTo(other._id.AsSpan(start));
        }

        if (_id is null && other._id is null)
        {
            return AsciiFrom(start).SequenceCompareTo(other.AsciiFrom(start));
        }

        int common = Math.Min(IdLength, other.IdLength);
        for (int i = start; i < common; i++)
        {
            int difference = UnitAt(i) - other.UnitAt(i);
            if (difference != 0)
            {
                return difference;
            }
        }

        return IdLength - other.IdLength;
    }

    /// <summary>How many code units from <paramref name="start"/> on this id shares with <paramref name="other"/>
    /// (at most <paramref name="limit"/>).</summary>
    public int CommonUnits(in TreeChange other, int start, int limit)
    {
        int end = Math.Min(start + limit, Math.Min(IdLength, other.IdLength));
        if (_id is not null && other._id is not null)
        {
            return end <= start ? 0 : _id.AsSpan(start, end - start).CommonPrefixLength(other._id.AsSpan(start));
        }

        if (_id is null && other._id is null)
        {
            return end <= start ? 0 : AsciiFrom(start)[..(end - start)].CommonPrefixLength(other.AsciiFrom(start));
        }

        int i = start;
        while (i < end && UnitAt(i) == other.UnitAt(i))
        {
            i++;
        }

        return i - start;
    }

    /// <summary>The bytes of an id held as ASCII bytes, from code unit <paramref name="start"/> on.</summary>
    private ReadOnlySpan<byte> AsciiFrom(int start) => _ascii.AsSpan(_offset + start, IdLength - start);
}
