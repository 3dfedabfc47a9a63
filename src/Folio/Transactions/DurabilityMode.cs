namespace Folio;

/// <summary>When a commit is acknowledged.</summary>
public enum DurabilityMode
{
    /// <summary>
    /// Acknowledged after the journal record holding the batch is on stable storage (fdatasync returned). The default.
    /// Survives a process crash and a power loss.
    /// </summary>
    Durable = 0,

    /// <summary>
    /// Acknowledged after the record is handed to the operating system (written to the page cache); the journal is
    /// synced in the background at most every <c>BufferedSyncInterval</c> (default 100 ms). Survives a process crash,
    /// but a power loss or OS crash can lose the last interval of acknowledged commits. A durable batch is never merged
    /// into a group that is not synced.
    /// </summary>
    Buffered = 1,
}
