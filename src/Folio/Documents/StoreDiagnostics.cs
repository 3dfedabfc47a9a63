namespace Folio;

/// <summary>
/// A point-in-time view of a <see cref="DocumentStore"/>'s health, for health checks and dashboards. Reading it is
/// lock-free and cheap (a handful of volatile reads).
/// </summary>
/// <param name="IsFaulted">Whether a journal write or fsync failed; commits fail until the store is reopened, reads
/// keep working.</param>
/// <param name="Fault">The failure that faulted the store, or null.</param>
/// <param name="LastCommittedSequence">The newest commit visible to new reads (0 for an empty store).</param>
/// <param name="SyncCount">Journal fsyncs since the store opened.</param>
/// <param name="LastSyncDuration">Duration of the latest fsync (zero before the first).</param>
/// <param name="AverageSyncDuration">Exponentially weighted average of fsync durations, each new fsync weighing 1/8
/// (zero before the first).</param>
public readonly record struct StoreDiagnostics(
    bool IsFaulted,
    Exception? Fault,
    long LastCommittedSequence,
    long SyncCount,
    TimeSpan LastSyncDuration,
    TimeSpan AverageSyncDuration);
