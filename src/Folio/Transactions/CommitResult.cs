namespace Folio.Transactions;

/// <summary>The outcome of a committed batch.</summary>
/// <param name="Sequence">The batch's commit sequence number: its journal entry, and the new version of every
/// document it put.</param>
public readonly record struct CommitResult(long Sequence);
