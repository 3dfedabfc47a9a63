namespace Folio.Documents;

/// <summary>
/// The checkpointed versions the commands of one batch write over, read from the collections' trees on the writer's
/// thread before the batch is submitted (<see cref="VersionedIndex.ReadWrittenOver"/>), so that a page that fails its
/// checks fails that write alone, before the journal holds it. The committer's apply takes a command's version from
/// here while its collection's tree layer is still the one read (a tree never changes, so it would find the same),
/// and reads the tree itself otherwise.
/// <para>
/// Protocol. Written by the writer's thread before the batch is submitted, read by the committer after it takes the
/// batch from the merger's queue (the enqueue is a release, the dequeue an acquire); never changed after the
/// submission.
/// </para>
/// </summary>
internal sealed class WrittenOverVersions(int commands)
{
    private readonly VersionedIndex.TreeLayer?[] _layers = new VersionedIndex.TreeLayer?[commands];
    private readonly DocumentVersion?[] _versions = new DocumentVersion?[commands];

    /// <summary>Notes that command <paramref name="command"/>'s id has <paramref name="version"/> (null: none) in the
    /// tree of <paramref name="layer"/>.</summary>
    public void Set(int command, VersionedIndex.TreeLayer layer, DocumentVersion? version)
    {
        _layers[command] = layer;
        _versions[command] = version;
    }

    /// <summary>Whether command <paramref name="command"/>'s id was read in the tree of <paramref name="layer"/>,
    /// with what was found there (null: nothing).</summary>
    public bool TryGet(int command, VersionedIndex.TreeLayer? layer, out DocumentVersion? version)
    {
        version = _versions[command];
        return layer is not null && ReferenceEquals(_layers[command], layer);
    }
}
