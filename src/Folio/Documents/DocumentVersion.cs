namespace Folio.Documents;

/// <summary>
/// One version of a document in the <see cref="VersionedIndex"/>: written once by the committer, then immutable but
/// for <see cref="_older"/>, which the committer may cut (never change otherwise) when no snapshot can reach past it.
/// A document replayed at the open gets its version when it is first read (<see cref="ReplayedDocuments"/>).
/// </summary>
internal sealed class DocumentVersion
{
    private DocumentVersion? _older;
    private readonly ReadOnlyMemory<byte> _json;

    public DocumentVersion(long sequence, long timestampTicks, ReadOnlyMemory<byte> json, bool isDeleted,
        DocumentVersion? older, bool isFirst = false)
    {
        IsFirst = isFirst;
        Sequence = sequence;
        TimestampTicks = timestampTicks;
        _json = json;
        IsDeleted = isDeleted;
        _older = older;
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

    /// <summary>Whether the document had no earlier version: the committer wrote this one when the id was in neither
    /// the heads, the replayed documents nor the checkpointed tree (so no tree before it holds the id). Pruning cuts
    /// versions, never this flag: a chain that ends in a version without it may have lost older ones.</summary>
    public bool IsFirst { get; }

    /// <summary>The previous version, or null (none, or pruned). Acquire read.</summary>
    public DocumentVersion? Older => Volatile.Read(ref _older);

    /// <summary>Cuts the chain after this version. Committer only, and only when no snapshot can need the older
    /// versions.</summary>
    public void Prune() => Volatile.Write(ref _older, null);
}
