using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;

namespace Folio.Documents;

/// <summary>
/// One version of a document in a <see cref="HeadTable"/>: where its bytes are, its sequence and time, and the version
/// before it. Written once by the table's writer before anything refers to it; after that only <see cref="Older"/>
/// changes, and only to 0 (a prune, <see cref="HeadTable.Prune"/>).
/// </summary>
internal struct HeadRecord
{
    public const byte DeletedFlag = 1;
    public const byte FirstFlag = 2;

    /// <summary>Set by <see cref="HeadTable.Append"/> when it copied the id into <see cref="InlineId"/>.</summary>
    public const byte InlineIdFlag = 4;

    /// <summary>An older version taken from a tree whose value's pages failed their checks: its value is the failure
    /// (<see cref="UnreadableVersion"/>), thrown by <see cref="ToVersion"/>.</summary>
    public const byte UnreadableFlag = 8;

    /// <summary>The longest id kept in the record itself (<see cref="InlineId"/>), in UTF-8 bytes: 32, a GUID without
    /// hyphens and most ids people choose.</summary>
    public const int InlineIdBytes = 32;

    /// <summary>The bytes holding the value and, for a version written by a commit, the id: the commit's encoded
    /// journal entry; for an older version the index took from the replayed documents or a checkpointed tree, the
    /// array its value lies in.</summary>
    public byte[] Buffer;

    /// <summary>The commit sequence that wrote this version.</summary>
    public long Sequence;

    /// <summary>When the version was committed (UTC ticks of its journal record).</summary>
    public long TimestampTicks;

    /// <summary>The reference of the previous version in the same table, or 0 (none, or pruned). Read with an
    /// acquire, cut with a release.</summary>
    public int Older;

    public int ValueOffset;
    public int ValueLength;

    /// <summary>Where the id's UTF-8 bytes lie in <see cref="Buffer"/>; -1 for an older version taken from a
    /// replayed document or a tree (it is never a head, so it is never looked up).</summary>
    public int IdOffset;

    public int IdLength;

    /// <summary><see cref="IdBytes.HashOf(string)"/> the id (0 without one).</summary>
    public int Hash;

    /// <summary><see cref="DeletedFlag"/>, <see cref="FirstFlag"/>, <see cref="UnreadableFlag"/>,
    /// <see cref="InlineIdFlag"/>.</summary>
    public byte Flags;

    /// <summary>A copy of the id's bytes when it has at most <see cref="InlineIdBytes"/> (<see cref="IdLength"/> of
    /// them; <see cref="InlineIdFlag"/> says so), made by the table as it appends the record: a lookup compares its
    /// id with these, in the record it reads anyway, instead of with the bytes in the commit's entry, which lie
    /// elsewhere in memory and cost a lookup a cache miss of their own.</summary>
    public InlineIdBuffer InlineId;

    public readonly bool IsDeleted => (Flags & DeletedFlag) != 0;

    /// <summary>Whether the document had no earlier version anywhere when this one was written (see
    /// <see cref="DocumentVersion.IsFirst"/>).</summary>
    public readonly bool IsFirst => (Flags & FirstFlag) != 0;

    /// <summary>The id's UTF-8 bytes: the record's own copy when it has one, else the commit's entry.</summary>
    [UnscopedRef]
    public readonly ReadOnlySpan<byte> Id =>
        (Flags & InlineIdFlag) != 0
            ? ((ReadOnlySpan<byte>)InlineId)[..IdLength]
            : new(Buffer, IdOffset, IdLength);

    public readonly IdBytes IdBytes => new(Buffer, IdOffset, IdLength, Hash);

    public readonly ReadOnlyMemory<byte> Value => new(Buffer, ValueOffset, ValueLength);

    /// <summary>The version a reader gets: its own object, sharing the value's bytes.</summary>
    public readonly DocumentVersion ToVersion()
    {
        if ((Flags & UnreadableFlag) != 0)
        {
            UnreadableVersion.Throw(Value.Span);
        }

        return new(Sequence, TimestampTicks, Value, IsDeleted, IsFirst);
    }
}

/// <summary>The bytes of <see cref="HeadRecord.InlineId"/>.</summary>
[InlineArray(HeadRecord.InlineIdBytes)]
internal struct InlineIdBuffer
{
    private byte _first;
}
