namespace Folio.Transactions;

/// <summary>
/// The committed state the transaction merger validates batches against and applies them to. Only the committer
/// calls <see cref="Validate"/>, <see cref="Apply"/> and <see cref="Publish"/>, one group at a time and in commit
/// order; readers of the state (through <see cref="GetVersion"/>) may run concurrently.
/// </summary>
/// <remarks>
/// Applying and publishing are two steps so that the committer can apply a group while its fsync runs: a batch
/// applied but not published must not be visible to readers (nor to <see cref="GetVersion"/>), and a group whose
/// fsync fails is never published (the store is faulted then, and accepts no further commits).
/// </remarks>
internal interface ICommitState
{
    /// <summary>The version (last commit sequence) of a document as published, or 0 when it does not exist.</summary>
    long GetVersion(in DocumentKey key);

    /// <summary>Extra validation of a batch before it is written; throw to fail this batch alone.</summary>
    void Validate(CommitBatch batch);

    /// <summary>Applies a written batch with its commit sequence number and the commit time (UTC ticks of its journal
    /// record), invisibly until <see cref="Publish"/> reaches <paramref name="sequence"/>. The state keeps values from
    /// <paramref name="encoded"/>, the batch's journal entry (<see cref="BatchEncoding.NextCommand"/>), never the
    /// batch's own memory, which its caller may reuse once the commit completes.</summary>
    void Apply(CommitBatch batch, ReadOnlyMemory<byte> encoded, long sequence, long timestampTicks);

    /// <summary>Makes every applied batch up to <paramref name="sequence"/> visible: the group is durable (or, in
    /// buffered mode, written).</summary>
    void Publish(long sequence);
}
