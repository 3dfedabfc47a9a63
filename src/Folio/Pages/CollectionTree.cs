namespace Folio.Pages;

/// <summary>
/// A collection's tree in a checkpoint: its root and its number of documents. Immutable.
/// <para>
/// A checkpoint written in slices (<see cref="CheckpointPass"/>) publishes trees that are ahead of the checkpoint's
/// sequence for part of their keys: every id before <see cref="AheadBefore"/> (in the trees' ordinal order; every id
/// when it is null) may hold a version up to <see cref="AheadSequence"/>, the pass's sequence (a slice holds exactly
/// its newest at or below it; a later checkpoint below that sequence, one of the pieces an open writes a journal
/// backlog in, keeps the mark, as it may have left some of those versions); the other ids hold their newest version
/// at or below the checkpoint's own sequence. <see cref="AheadSequence"/> 0: not ahead.
/// </para>
/// </summary>
internal sealed record CollectionTree(string Name, PageReference Root, long Count)
{
    /// <summary>The sequence the ids before <see cref="AheadBefore"/> are at; 0 when the tree is not ahead.</summary>
    public long AheadSequence { get; init; }

    /// <summary>The first id not ahead; null: every id (when <see cref="AheadSequence"/> is set).</summary>
    public string? AheadBefore { get; init; }

    /// <summary>The sequence whose state the tree holds for <paramref name="id"/>: <see cref="AheadSequence"/> for an
    /// id ahead, else <paramref name="checkpointSequence"/>.</summary>
    public long SequenceOf(string id, long checkpointSequence) =>
        AheadSequence > 0 && (AheadBefore is null || string.CompareOrdinal(id, AheadBefore) < 0)
            ? AheadSequence : checkpointSequence;

    /// <summary>The same tree, not ahead.</summary>
    public CollectionTree Settled() => AheadSequence == 0 ? this : this with { AheadSequence = 0, AheadBefore = null };
}
