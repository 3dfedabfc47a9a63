namespace Folio.Documents;

/// <summary>
/// One version of a document as a read of the <see cref="VersionedIndex"/> returns it: a value, its bytes shared with
/// the index (which keeps versions as <see cref="HeadRecord"/>s), so a read allocates nothing.
/// </summary>
internal readonly struct DocumentVersion
{
    private readonly ReadOnlyMemory<byte> _json;

    public DocumentVersion(long sequence, long timestampTicks, ReadOnlyMemory<byte> json, bool isDeleted,
        bool isFirst = false, bool isUnreadable = false)
    {
        IsFirst = isFirst;
        IsUnreadable = isUnreadable;
        Sequence = sequence;
        TimestampTicks = timestampTicks;
        _json = json;
        IsDeleted = isDeleted;
    }

    /// <summary>The commit sequence number that wrote this version (the document's version number).</summary>
    public long Sequence { get; }

    /// <summary>When the version was committed (UTC ticks of its journal record): the document's last-modified
    /// time.</summary>
    public long TimestampTicks { get; }

    /// <summary>The UTF-8 JSON of a put; empty for a delete.</summary>
    public ReadOnlyMemory<byte> Json => _json;

    /// <summary>Whether this version is a delete (a tombstone).</summary>
    public bool IsDeleted { get; }

    /// <summary>Whether this is a checkpointed version whose value's pages failed their checks: <see cref="Json"/>
    /// then holds the failure (<see cref="UnreadableVersion"/>), which a read of the version throws. Only ever the
    /// version a write replaced, kept for snapshots older than the write.</summary>
    public bool IsUnreadable { get; }

    /// <summary>Whether the document had no earlier version: the committer wrote this one when the id was in neither
    /// the heads, the replayed documents nor the checkpointed tree (so no tree before it holds the id). Pruning cuts
    /// versions, never this flag: a chain that ends in a version without it may have lost older ones.</summary>
    public bool IsFirst { get; }
}
