namespace Folio;

/// <summary>What a backup (<see cref="DocumentStore.BackupAsync(System.IO.Pipelines.PipeWriter,
/// System.Threading.CancellationToken)"/>) wrote: a consistent copy of the store as of
/// <see cref="Sequence"/>.</summary>
/// <param name="Sequence">Every commit up to and including this sequence is in the backup, none after it.</param>
/// <param name="CheckpointSequence">The checkpoint the backup's data-file chunks hold (0: none); the commits after it
/// travel as journal entries. It is the first sequence the backup restores to
/// (<see cref="RestoreOptions.ToSequence"/>): for a checkpoint caught between the slices of one written in slices,
/// whose trees hold some documents past its own sequence, the sequence its pass reached.</param>
/// <param name="Chunks">Data-file chunks copied.</param>
/// <param name="Entries">Journal entries (commits) copied after the checkpoint.</param>
/// <param name="Bytes">Bytes written to the destination, framing included.</param>
public sealed record BackupResult(long Sequence, long CheckpointSequence, int Chunks, long Entries, long Bytes);
