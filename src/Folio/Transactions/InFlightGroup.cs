using Folio.Journal;

namespace Folio.Transactions;

/// <summary>
/// A commit group between its journal write and its completion. Reused (<see cref="CommitPipeline"/> rents it out).
/// <para>
/// Owners. The committer fills it (every field but <see cref="Done"/>) before the group enters the pipeline's
/// in-flight queue, under the pipeline's lock; from then on the thread that finishes it writes the sync's outcome
/// (<see cref="SyncElapsed"/>, <see cref="Failure"/>, <see cref="Applied"/>) before it takes the lock and sets
/// <see cref="Done"/>, and whichever thread completes it reads them under the lock. A group applied during its sync
/// is applied by the <see cref="ApplyThread"/>, which writes <see cref="ApplyFailure"/> before it signals the
/// finishing thread, whose wait for that signal returns before it takes the lock. <see cref="Writes"/> is read
/// without the lock by a later committer's validation (see <see cref="CommitPipeline"/>): it is filled before the
/// group is queued and cleared only when the committer rents the group again.
/// </para>
/// </summary>
internal sealed class InFlightGroup
{
    /// <summary>The accepted batches, in commit order: batch i has sequence <see cref="First"/> + i.</summary>
    public readonly List<PendingBatch> Batches = [];

    /// <summary>Each document the group writes, with its version after the group (0 when deleted); filled only when
    /// groups overlap (MaxGroupsInFlight above 1), the only case in which a later group is validated against
    /// it.</summary>
    public readonly Dictionary<DocumentKey, long> Writes = [];

    public JournalSyncPoint SyncPoint;
    public JournalPosition End;
    public long First;
    public long TimestampTicks;
    public int Commands;
    public bool NeedsSync;
    public TimeSpan SyncElapsed;
    public Exception? Failure;

    /// <summary>The batches were applied while the fsync ran; with the failure if that threw.</summary>
    public bool Applied;
    public Exception? ApplyFailure;

    /// <summary>The group's sync ended (or it had none); under the pipeline's lock.</summary>
    public bool Done;

    /// <summary>The sequence of the group's last batch.</summary>
    public long Last => First + Batches.Count - 1;

    public void Reset()
    {
        Batches.Clear();
        Writes.Clear();
        SyncPoint = default;
        End = default;
        First = 0;
        TimestampTicks = 0;
        Commands = 0;
        NeedsSync = false;
        SyncElapsed = default;
        Failure = null;
        Applied = false;
        ApplyFailure = null;
        Done = false;
    }
}
