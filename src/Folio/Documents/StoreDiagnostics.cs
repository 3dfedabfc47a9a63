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
    TimeSpan AverageSyncDuration)
{
    /// <summary>The file system's error from the journal's last try to start its next segment when that try found the
    /// disk full, or null (also once a later try succeeded): while set, commits that need the next segment fail with
    /// <see cref="StoreFullException"/>; the store is not faulted.</summary>
    public Exception? DiskFull { get; init; }

    /// <summary>Whether <see cref="DiskFull"/> is set: commits fail for want of space until some is freed.</summary>
    public bool IsDiskFull => DiskFull is not null;

    /// <summary>The error from the journal's last try to create its next segment file when it failed for a cause other
    /// than a full disk (too many open files, no thread to be had, a folder that refuses new files), or null (also
    /// once a later try succeeded): while set, commits that need the next segment fail with
    /// <see cref="StoreUnavailableException"/>; the store is not faulted.</summary>
    public Exception? SegmentUnavailable { get; init; }

    /// <summary>The error of the last checkpoint attempt when it failed (a full disk, a page that fails its checksum,
    /// an I/O error), or null (also once a later attempt succeeded). While set, the journal is not purged, the store's
    /// disk use grows with its commits, and once the journal after the last checkpoint passes
    /// <see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/> commits wait for each attempt; the store is
    /// not faulted.</summary>
    public Exception? CheckpointFailure { get; init; }

    /// <summary>The damage in the data file that checkpoints fail on, once the journal after the last checkpoint has
    /// reached <see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/> and commits fail with it until the
    /// store is repaired (restore a backup, or salvage it: <see cref="DocumentStore.SalvageFilesAsync"/>); reads go
    /// on. Null otherwise.</summary>
    public StoreCorruptedException? WritesRefused { get; init; }
}
