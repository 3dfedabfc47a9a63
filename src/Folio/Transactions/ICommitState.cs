namespace Folio.Transactions;

/// <summary>
/// The committed state the transaction merger validates batches against and applies them to. Only the committer
/// calls <see cref="Validate"/> and <see cref="Apply"/>, one group at a time and in commit order; readers of the
/// state (through <see cref="GetVersion"/>) may run concurrently.
/// </summary>
internal interface ICommitState
{
    /// <summary>The version (last commit sequence) of a document, or 0 when it does not exist.</summary>
    long GetVersion(in DocumentKey key);

    /// <summary>Extra validation of a batch before it is written; throw to fail this batch alone.</summary>
    void Validate(CommitBatch batch);

    /// <summary>Makes a durable (or, in buffered mode, written) batch visible, with its commit sequence number and
    /// the commit time (UTC ticks of its journal record).</summary>
    void Apply(CommitBatch batch, long sequence, long timestampTicks);
}
