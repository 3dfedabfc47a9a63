namespace Folio;

/// <summary>What a restore made: a store, verified and closed, in the target folder.</summary>
/// <param name="Sequence">The restored store's last commit: the backup's, or the point in time asked for.</param>
/// <param name="CheckpointSequence">The checkpoint the backup carried.</param>
/// <param name="Entries">Journal entries (commits after the checkpoint) restored.</param>
/// <param name="Documents">Documents in the restored store.</param>
/// <param name="Bytes">Bytes read from the source.</param>
public sealed record RestoreResult(long Sequence, long CheckpointSequence, long Entries, long Documents, long Bytes);
