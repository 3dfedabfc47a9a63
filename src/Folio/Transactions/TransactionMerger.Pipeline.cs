using System.Diagnostics;
using Folio.Journal;

namespace Folio.Transactions;

/// <summary>
/// The commit pipeline: the sync of one group overlaps the preparation, write and sync of the next.
/// <para>
/// Protocol. A group is <b>prepared</b> under the committer role (taken, validated, written to the journal, its sync
/// started) and then <b>finished</b> by the same thread after it gave the role up: it runs the fdatasync and then
/// completes groups in commit order. So while group N syncs, another thread can take the role and prepare group N+1,
/// whose own sync may run at the same time (each on a file handle of its own; see <see cref="JournalSegment"/>).
/// At most <see cref="TransactionMergerOptions.MaxGroupsInFlight"/> groups are between their write and their
/// completion: <see cref="_inFlightCount"/> counts them (reserved under the role before a group is taken, given
/// back when it completes or when nothing was written).
/// </para>
/// <para>
/// Completion is in order and under <see cref="_completionLock"/>: a finished group marks itself done and then
/// completes every done group at the head of <see cref="_inFlight"/>. A group whose sync is done but whose
/// predecessor's is not waits for the predecessor's thread, which completes both. Completing a group applies its
/// batches to the state, publishes its record to journal readers if it is durable, and acknowledges its batches; a
/// group whose sync failed, or any group once the merger is faulted, fails instead (its record is in the journal but
/// was not made durable, or follows one that was not). A group is acknowledged only after its own sync and every
/// earlier group's succeeded: an fdatasync that succeeds does cover earlier writes, but a later success must not
/// stand in for an earlier failure.
/// </para>
/// <para>
/// Publication order. The merger is the only publisher of a store's journal (see <see cref="WriteAheadJournal"/>):
/// for a durable group the order is durable, applied, published, acknowledged; a buffered group is applied and
/// acknowledged, and published once a later sync covers it. So a journal reader (the change feed) never sees a
/// commit that is not durable, and never one that a read of the state does not show yet. Applied groups not yet
/// known durable wait in <see cref="_unpublished"/> (under the completion lock, in commit order); whoever completes a
/// group or finishes a buffered-mode sync publishes the newest of them that <see cref="WriteAheadJournal.DurableSequence"/>
/// covers.
/// </para>
/// <para>
/// Validation against groups in flight. A group is validated against the committed state plus the writes of the
/// groups still in flight (written, not yet applied): the committer copies the in-flight queue under the lock when it
/// reserves its slot, and reads each copied group's <see cref="InFlightGroup.Writes"/> without a lock. That is safe
/// because a group's writes are filled before it enters the queue and are cleared only when the committer rents it
/// again, after its validation; a group that completes meanwhile holds the same versions the state now has.
/// </para>
/// <para>
/// Hand-off. Releasing the role stores 0 and then re-checks for pending batches and a free slot; completing a group
/// frees its slot and then re-checks for pending batches and a free role (both with full fences). Whichever runs second
/// sees the other's write, so a batch enqueued while the pipeline was full is never stranded.
/// </para>
/// </summary>
internal sealed partial class TransactionMerger
{
    private readonly Lock _completionLock = new();
    private readonly Queue<InFlightGroup> _inFlight = new();
    private readonly Stack<InFlightGroup> _freeGroups = new();
    private readonly Queue<JournalPosition> _unpublished = new(); // under _completionLock: applied, not yet published
    private int _inFlightCount;
    private SyncThread? _syncThread; // created by the first group that applies during its sync; one group in flight then

    /// <summary>The fewest batches in a group for which the committer applies the group while its fsync runs.</summary>
    private const int MinBatchesToApplyDuringSync = 4;
    private int _writersSeen; // committer-only
    private int _stragglers; // committer-only (one group in flight): batches that arrived after the group was taken
    private long _batchesInFlight; // batches of the groups in flight: _queueDepth counts them until they are answered

    // Committer-only: the groups in flight when the committer reserved its slot, oldest first.
    private InFlightGroup[] _inFlightSnapshot = new InFlightGroup[4];
    private int _inFlightSnapshotCount;

    /// <summary>Groups written and not yet completed (diagnostics and tests).</summary>
    public int GroupsInFlight => Volatile.Read(ref _inFlightCount);

    /// <summary>
    /// Under the role: reserves a pipeline slot unless all are taken, and copies the groups in flight for validation.
    /// </summary>
    private bool TryTakePipelineSlot()
    {
        lock (_completionLock)
        {
            if (_inFlightCount >= _options.MaxGroupsInFlight)
            {
                return false;
            }

            Interlocked.Increment(ref _inFlightCount);
            if (_inFlightSnapshot.Length < _inFlight.Count)
            {
                _inFlightSnapshot = new InFlightGroup[_inFlight.Count * 2];
            }

            Array.Clear(_inFlightSnapshot, 0, _inFlightSnapshotCount);
            _inFlightSnapshotCount = 0;
            foreach (InFlightGroup group in _inFlight)
            {
                _inFlightSnapshot[_inFlightSnapshotCount++] = group;
            }

            return true;
        }
    }

    /// <summary>
    /// How many pending batches the group fill waits for. One group at a time: as many as the previous group held (its
    /// writers coming back) plus the stragglers, the batches that arrived after it was taken and waited through its
    /// fsync (counted before its acknowledgements, when none of its writers can be back yet). Without them the target
    /// settled at the previous group's size, and the same few late writers missed every group (64 writers: groups of
    /// 58-61 instead of 62-64). With a pipeline of N groups: the writers seen at once (batches in flight plus pending,
    /// the larger of now and the previous take) divided by N, so the writers settle into N groups that alternate, each
    /// preparing and syncing while the others sync, instead of one group that holds everybody while the pipeline idles.
    /// </summary>
    private int FillTarget()
    {
        int depth = _options.MaxGroupsInFlight;
        if (depth == 1)
        {
            return Volatile.Read(ref _lastGroupBatches) + _stragglers;
        }

        long writers = Math.Max(_writersSeen, Volatile.Read(ref _queueDepth));
        return (int)Math.Min(int.MaxValue, (writers + depth - 1) / depth);
    }

    /// <summary>Batches submitted and not yet in a group (a hint: the two counters are read one after the other).</summary>
    private long PendingBatches() => Volatile.Read(ref _queueDepth) - Volatile.Read(ref _batchesInFlight);

    /// <summary>Gives back a slot reserved for a group that was not written.</summary>
    private void ReturnPipelineSlot()
    {
        Interlocked.Decrement(ref _inFlightCount);
    }

    /// <summary>The version of <paramref name="key"/> after the groups in flight (newest first), else in the state.</summary>
    private long VersionBeforeGroup(in DocumentKey key)
    {
        for (int i = _inFlightSnapshotCount - 1; i >= 0; i--)
        {
            if (_inFlightSnapshot[i].Writes.TryGetValue(key, out long version))
            {
                return version;
            }
        }

        return _state.GetVersion(key);
    }

    /// <summary>Under the role: a cleared group object, reused when one completed since.</summary>
    private InFlightGroup RentInFlightGroup()
    {
        InFlightGroup? group;
        lock (_completionLock)
        {
            _freeGroups.TryPop(out group);
        }

        if (group is null)
        {
            return new InFlightGroup();
        }

        group.Reset();
        return group;
    }

    private void AddInFlight(InFlightGroup group)
    {
        Interlocked.Add(ref _batchesInFlight, group.Batches.Count);
        lock (_completionLock)
        {
            _inFlight.Enqueue(group);
        }
    }

    /// <summary>
    /// Outside the role: runs the group's fdatasync, then completes, in commit order, every group whose turn has come
    /// (this one, and later ones whose syncs finished first). Then, when <paramref name="retrigger"/>, re-triggers the
    /// committer if batches are waiting (the pool committer re-checks inline instead, to keep the role on its thread).
    /// Throws nothing: every failure is answered to the waiters it concerns.
    /// </summary>
    private void FinishGroup(InFlightGroup group, bool retrigger)
    {
        if (group.NeedsSync && group.Failure is null)
        {
            if (ShouldApplyDuringSync(group))
            {
                SyncThread sync = _syncThread ??= new SyncThread(_journal);
                sync.Start(group.SyncPoint);
                ApplyDuringSync(group);
                if (sync.Wait(out group.SyncElapsed) is { } failure)
                {
                    group.Failure = JournalFailureCause(failure);
                }
            }
            else
            {
                long started = Stopwatch.GetTimestamp();
                try
                {
                    _journal.CompleteSync(group.SyncPoint);
                    group.SyncElapsed = Stopwatch.GetElapsedTime(started);
                }
                catch (Exception e)
                {
                    group.Failure = JournalFailureCause(e);
                }
            }
        }

        lock (_completionLock)
        {
            group.Done = true;
            while (_inFlight.TryPeek(out InFlightGroup? head) && head.Done)
            {
                _inFlight.Dequeue();
                CompleteGroup(head);
                Interlocked.Add(ref _batchesInFlight, -head.Batches.Count);
                head.Batches.Clear();
                _freeGroups.Push(head);
                Interlocked.Decrement(ref _inFlightCount);
            }
        }

        // A full fence between freeing the slot and reading the role (ReleaseRole does the mirror image).
        if (retrigger && !_queue.IsEmpty)
        {
            Interlocked.MemoryBarrier();
            TryBecomeCommitter(mayCommitInline: false);
        }
    }

    /// <summary>
    /// Whether the group's fsync runs on the <see cref="SyncThread"/> while this thread applies the group: with one
    /// group in flight (then groups finish one at a time, so applying outside the completion lock keeps the state's
    /// single writer) and at least <see cref="MinBatchesToApplyDuringSync"/> batches (a small group applies in less
    /// time than the hand-off to the sync thread costs; a lone writer keeps its fsync on its own thread).
    /// </summary>
    private bool ShouldApplyDuringSync(InFlightGroup group) =>
        _options.MaxGroupsInFlight == 1 && group.Batches.Count >= MinBatchesToApplyDuringSync && !IsFaulted;

    /// <summary>
    /// While the group's fsync runs: applies its batches to the state, unpublished (<see cref="ICommitState"/>); its
    /// completion publishes them once the sync succeeded. A failure is kept for the completion, which faults the store.
    /// </summary>
    private void ApplyDuringSync(InFlightGroup group)
    {
        group.Applied = true;
        try
        {
            for (int i = 0; i < group.Batches.Count; i++)
            {
                _state.Apply(group.Batches[i].Batch, group.First + i, group.TimestampTicks);
            }
        }
        catch (Exception e)
        {
            group.ApplyFailure = e;
        }
    }

    /// <summary>Under the completion lock, in commit order: acknowledges a durable group, or fails it. Throws nothing.</summary>
    private void CompleteGroup(InFlightGroup group)
    {
        if (group.Failure is { } failure)
        {
            SetFault(failure);
            FailUnanswered(group.Batches, _ => FaultedException(failure));
            return;
        }

        if (Volatile.Read(ref _fault) is { } fault)
        {
            FailUnanswered(group.Batches, _ => new StoreFaultedException(
                "The store was faulted (the inner exception is the cause) before this commit was acknowledged; it may or may not be in the journal after the store is reopened.",
                fault));
            return;
        }

        int count = group.Batches.Count;
        try
        {
            if (!group.Applied)
            {
                for (int i = 0; i < count; i++)
                {
                    _state.Apply(group.Batches[i].Batch, group.First + i, group.TimestampTicks);
                }
            }
            else if (group.ApplyFailure is { } applyFailure)
            {
                System.Runtime.ExceptionServices.ExceptionDispatchInfo.Throw(applyFailure);
            }

            // Applied and made visible, then published to journal readers (a durable group's own sync covers it; a
            // buffered one waits for a sync).
            _state.Publish(group.First + count - 1);
            _unpublished.Enqueue(group.End);
            PublishDurableLocked();
        }
        catch (Exception e)
        {
            // In the journal, but the state may hold part of the group: fault, and tell the waiters where their commits are.
            long first = group.First;
            SetFault(e);
            FailUnanswered(group.Batches, i => new StoreFaultedException(
                $"Commit {first + i} was written to the journal, but applying it to the in-memory state failed. The store is faulted; reopen it (recovery replays the commit).",
                e));
            return;
        }

        _stragglers = (int)Math.Max(0, PendingBatches()); // for the next fill (FillTarget): none of this group's writers is back yet
        try
        {
            if (group.NeedsSync)
            {
                RecordSync(group.SyncElapsed);
                if (group.SyncElapsed > _options.SlowSyncThreshold)
                {
                    TransactionLog.SlowSync(_logger, group.SyncElapsed.TotalMilliseconds, _options.SlowSyncThreshold.TotalMilliseconds, count);
                }
            }

            // Acknowledge in commit order, only now that the group is durable (or written, for a buffered group).
            for (int i = 0; i < count; i++)
            {
                PendingBatch pending = group.Batches[i];
                Release(pending);
                pending.TrySetResult(new CommitResult(group.First + i, group.TimestampTicks));
            }

            _metrics.Commits.Add(count);
            _metrics.Groups.Add(1);
            _metrics.BatchesPerGroup.Record(count);
            _metrics.CommandsPerGroup.Record(group.Commands);
        }
        catch (Exception e)
        {
            // A metrics listener or logger that throws: the committer did not expect it, so fault rather than go on
            // with an observer in an unknown state; waiters not yet answered learn their commit may be in the journal.
            SetFault(e);
            FailUnanswered(group.Batches, _ => new StoreFaultedException(
                "An unexpected failure in the committer faulted the store; this commit may or may not be in the journal. Reopen the store to recover.",
                e));
        }
    }

    /// <summary>
    /// Under the completion lock: publishes to journal readers the newest applied group that a completed sync covers
    /// (with everything before it), and forgets those groups.
    /// </summary>
    private void PublishDurableLocked()
    {
        long durable = _journal.DurableSequence;
        bool any = false;
        JournalPosition newest = default;
        while (_unpublished.TryPeek(out JournalPosition next) && next.Sequence <= durable)
        {
            newest = _unpublished.Dequeue();
            any = true;
        }

        if (any)
        {
            _journal.Publish(newest);
        }
    }

    /// <summary>A group between its journal write and its completion. Reused; see the protocol above.</summary>
    private sealed class InFlightGroup
    {
        /// <summary>The accepted batches, in commit order: batch i has sequence <see cref="First"/> + i.</summary>
        public readonly List<PendingBatch> Batches = [];

        /// <summary>Each document the group writes, with its version after the group (0 when deleted); filled only when
        /// groups overlap (MaxGroupsInFlight above 1), the only case in which a later group is validated against it.</summary>
        public readonly Dictionary<DocumentKey, long> Writes = [];

        public JournalSyncPoint SyncPoint;
        public JournalPosition End;
        public long First;
        public long TimestampTicks;
        public int Commands;
        public bool NeedsSync;
        public TimeSpan SyncElapsed;
        public Exception? Failure;

        /// <summary>The batches were applied while the fsync ran (<see cref="ApplyDuringSync"/>); with the failure if that threw.</summary>
        public bool Applied;
        public Exception? ApplyFailure;

        /// <summary>The group's sync ended (or it had none); under the completion lock.</summary>
        public bool Done;

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
}
