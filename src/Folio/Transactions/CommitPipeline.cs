using System.Diagnostics;
using System.Runtime.ExceptionServices;
using Folio.Diagnostics;
using Folio.Journal;
using Microsoft.Extensions.Logging;

namespace Folio.Transactions;

/// <summary>
/// The groups between their journal write and their completion, completed in commit order: the sync of one group
/// overlaps the preparation, write and sync of the next.
/// <para>
/// Owners. A group is prepared by the committer (<see cref="GroupCommitter"/>, under the committer role: it reserves a
/// slot with <see cref="TryTakeSlot"/>, writes the group, and queues it with <see cref="Add"/>) and then finished by
/// the same thread after it gave the role up (<see cref="Finish"/>): it runs the fdatasync and then completes groups in
/// commit order. So while group N syncs, another thread can take the role and prepare group N+1, whose own sync may
/// run at the same time (each on a file handle of its own; see <see cref="JournalSegment"/>). At most
/// <see cref="TransactionMergerOptions.MaxGroupsInFlight"/> groups are between their write and their completion:
/// <see cref="_inFlightCount"/> counts them (reserved under the lock before a group is taken, given back when it
/// completes or when nothing was written). Everything else here (the in-flight queue, the free groups, the applied
/// groups not yet published, the stragglers count) is read and written under <see cref="_lock"/>.
/// </para>
/// <para>
/// Completion. A finished group marks itself done and then completes every done group at the head of the queue; a
/// group whose sync is done but whose predecessor's is not waits for the predecessor's thread, which completes both.
/// Completing a group applies its batches to the state (unless they were applied during its sync), publishes them,
/// publishes its record to journal readers if it is durable, and acknowledges its batches. A group whose sync failed,
/// or any group once the merger is faulted, fails instead (its record is in the journal but was not made durable, or
/// follows one that was not). A group is acknowledged only after its own sync and every earlier group's succeeded: an
/// fdatasync that succeeds does cover earlier writes, but a later success must not stand in for an earlier failure.
/// </para>
/// <para>
/// Apply during sync. With one group in flight, a group of at least <see cref="MinBatchesToApplyDuringSync"/> batches
/// is handed to the <see cref="ApplyThread"/>, which applies it to the state, unpublished (<see cref="ICommitState"/>),
/// while the committer runs the group's fdatasync on its own thread; its completion publishes it once the sync
/// succeeded. Only one group is in flight then, and the committer waits for the apply before it completes the group
/// or prepares the next, so the state keeps a single writer at a time and the groups still apply in commit order.
/// </para>
/// <para>
/// Publication order. The merger is the only publisher of a store's journal (see <see cref="WriteAheadJournal"/>):
/// for a durable group the order is durable, applied and visible, published, acknowledged; a buffered group is
/// applied and acknowledged, and published once a later sync covers it. So a journal reader (the change feed) never
/// sees a commit that is not durable, and never one that a read of the state does not show yet. Applied groups not
/// yet known durable wait in <see cref="_unpublished"/> in commit order; whoever completes a group or finishes a
/// buffered-mode sync publishes the newest of them that <see cref="WriteAheadJournal.DurableSequence"/> covers.
/// </para>
/// <para>
/// Validation against groups in flight. A group is validated against the committed state plus the writes of the
/// groups still in flight: the committer copies the in-flight queue under the lock when it reserves its slot, and
/// reads each copied group's <see cref="InFlightGroup.Writes"/> without the lock. That is safe because a group's writes
/// are filled before it enters the queue and are cleared only when the committer rents it again, after its
/// validation; a group that completes meanwhile holds the same versions the state now has.
/// </para>
/// </summary>
internal sealed class CommitPipeline : IDisposable
{
    /// <summary>The fewest batches in a group for which the group is applied while its fsync runs: a smaller group
    /// applies after its fsync in less time than waking the apply thread costs its committer (tens of microseconds
    /// on a virtual machine; about 1.5 µs of apply per single-document batch).</summary>
    public const int MinBatchesToApplyDuringSync = 32;

    private readonly WriteAheadJournal _journal;
    private readonly ICommitState _state;
    private readonly TransactionMergerOptions _options;
    private readonly ILogger _logger;
    private readonly FolioMetrics _metrics;
    private readonly PendingQueue _pending;
    private readonly CommitFault _fault;
    private readonly SyncStatistics _syncs;
    private readonly Lock _lock = new();
    private readonly Queue<InFlightGroup> _inFlight = new();
    private readonly Stack<InFlightGroup> _freeGroups = new();
    private readonly Queue<JournalPosition> _unpublished = new();
    private int _inFlightCount;
    private long _batchesInFlight;
    private int _stragglers;
    private long _groupsAppliedDuringSync;
    private ApplyThread? _applyThread; // created by the first group applied during its sync; one group in flight then

    public CommitPipeline(WriteAheadJournal journal, ICommitState state, TransactionMergerOptions options,
        ILogger logger, FolioMetrics metrics, PendingQueue pending, CommitFault fault, SyncStatistics syncs)
    {
        _journal = journal;
        _state = state;
        _options = options;
        _logger = logger;
        _metrics = metrics;
        _pending = pending;
        _fault = fault;
        _syncs = syncs;
    }

    /// <summary>Groups written and not yet completed.</summary>
    public int GroupsInFlight => Volatile.Read(ref _inFlightCount);

    /// <summary>Whether every slot is taken (a hint).</summary>
    public bool IsFull => Volatile.Read(ref _inFlightCount) >= _options.MaxGroupsInFlight;

    /// <summary>Batches submitted and not yet in a group: the queue's depth less the batches of the groups in flight,
    /// which it counts until they are answered (a hint: the two counters are read one after the other).</summary>
    public long QueuedBatches => _pending.Depth - Volatile.Read(ref _batchesInFlight);

    /// <summary>
    /// The batches that arrived after the last completed group was taken and waited through its fsync, counted when
    /// it completed (before its acknowledgements, when none of its writers can be back yet): the group fill's hint.
    /// </summary>
    public int Stragglers => Volatile.Read(ref _stragglers);

    /// <summary>Groups handed to the <see cref="ApplyThread"/> while their fsync ran.</summary>
    public long GroupsAppliedDuringSync => Volatile.Read(ref _groupsAppliedDuringSync);

    /// <summary>
    /// Under the committer role: reserves a slot unless all are taken, and copies the groups in flight, oldest first,
    /// into <paramref name="inFlight"/> (grown when too small; <paramref name="count"/> of them) for validation.
    /// </summary>
    public bool TryTakeSlot(ref InFlightGroup[] inFlight, ref int count)
    {
        lock (_lock)
        {
            if (_inFlightCount >= _options.MaxGroupsInFlight)
            {
                return false;
            }

            Interlocked.Increment(ref _inFlightCount);
            Array.Clear(inFlight, 0, count);
            if (inFlight.Length < _inFlight.Count)
            {
                inFlight = new InFlightGroup[_inFlight.Count * 2];
            }

            count = 0;
            foreach (InFlightGroup group in _inFlight)
            {
                inFlight[count++] = group;
            }

            return true;
        }
    }

    /// <summary>Gives back a slot reserved for a group that was not written.</summary>
    public void ReturnSlot() => Interlocked.Decrement(ref _inFlightCount);

    /// <summary>Under the role: a cleared group object, reused when one completed since.</summary>
    public InFlightGroup Rent()
    {
        InFlightGroup? group;
        lock (_lock)
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

    /// <summary>Under the role: queues a written group, in commit order.</summary>
    public void Add(InFlightGroup group)
    {
        Interlocked.Add(ref _batchesInFlight, group.Batches.Count);
        lock (_lock)
        {
            _inFlight.Enqueue(group);
        }
    }

    /// <summary>
    /// Outside the role: runs the group's fdatasync (applying the group meanwhile when it qualifies), then completes,
    /// in commit order, every group whose turn has come (this one, and later ones whose syncs finished first). Throws
    /// nothing: every failure is answered to the waiters it concerns.
    /// </summary>
    public void Finish(InFlightGroup group)
    {
        if (group.NeedsSync && group.Failure is null)
        {
            ApplyThread? apply = ShouldApplyDuringSync(group) ? _applyThread ?? TryCreateApplyThread() : null;
            if (apply is not null)
            {
                group.Applied = true;
                Volatile.Write(ref _groupsAppliedDuringSync, _groupsAppliedDuringSync + 1); // one group in flight
                apply.Start(group);
            }

            long started = Stopwatch.GetTimestamp();
            try
            {
                _journal.CompleteSync(group.SyncPoint);
                group.SyncElapsed = Stopwatch.GetElapsedTime(started);
            }
            catch (Exception e)
            {
                group.Failure = CommitFault.JournalFailureCause(e);
            }

            apply?.Wait();
        }

        lock (_lock)
        {
            group.Done = true;
            while (_inFlight.TryPeek(out InFlightGroup? head) && head.Done)
            {
                _inFlight.Dequeue();
                Complete(head);
                Interlocked.Add(ref _batchesInFlight, -head.Batches.Count);
                head.Batches.Clear();
                _freeGroups.Push(head);
                Interlocked.Decrement(ref _inFlightCount);
            }
        }
    }

    /// <summary>
    /// Publishes to journal readers the newest applied group that a completed sync covers (the buffered-mode timer,
    /// after its sync).
    /// </summary>
    public void PublishDurable()
    {
        lock (_lock)
        {
            PublishDurableLocked();
        }
    }

    /// <summary>Stops the apply thread; no group may be in flight.</summary>
    public void Dispose() => Volatile.Read(ref _applyThread)?.Dispose();

    /// <summary>The first group applied during its sync starts the thread (stores that never see
    /// <see cref="MinBatchesToApplyDuringSync"/> concurrent writers never do); published with a release store for
    /// <see cref="Dispose"/>, which may run on another thread. Null when the process cannot create a thread: the group
    /// is then applied after its sync, as a smaller one is, and a later group tries again.</summary>
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private ApplyThread? TryCreateApplyThread()
    {
        ApplyThread thread;
        try
        {
            thread = new ApplyThread(ApplyDuringSync);
        }
        catch (OutOfMemoryException)
        {
            return null;
        }

        Volatile.Write(ref _applyThread, thread);
        return thread;
    }

    private bool ShouldApplyDuringSync(InFlightGroup group) =>
        _options.MaxGroupsInFlight == 1 && group.Batches.Count >= MinBatchesToApplyDuringSync && !_fault.IsFaulted;

    /// <summary>
    /// On the apply thread, while the group's fsync runs: applies its batches to the state, unpublished; its completion
    /// publishes them once the sync succeeded. A failure is kept for the completion, which faults the store.
    /// </summary>
    private void ApplyDuringSync(InFlightGroup group)
    {
        try
        {
            for (int i = 0; i < group.Batches.Count; i++)
            {
                PendingBatch pending = group.Batches[i];
                _state.Apply(pending.Batch, pending.Encoded, group.First + i, group.TimestampTicks);
            }
        }
        catch (Exception e)
        {
            group.ApplyFailure = e;
        }
    }

    /// <summary>Under the lock, in commit order: acknowledges a durable group, or fails it. Throws nothing.</summary>
    private void Complete(InFlightGroup group)
    {
        if (group.Failure is { } failure)
        {
            _fault.Set(failure);
            _pending.FailUnanswered(group.Batches, _ => CommitFault.NotDurable(failure));
            return;
        }

        if (_fault.Cause is { } fault)
        {
            _pending.FailUnanswered(group.Batches, _ => new StoreFaultedException(
                "The store was faulted (the inner exception is the cause) before this commit was acknowledged; it " +
                    "may or may not be in the journal after the store is reopened.",
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
                    PendingBatch pending = group.Batches[i];
                    _state.Apply(pending.Batch, pending.Encoded, group.First + i, group.TimestampTicks);
                }
            }
            else if (group.ApplyFailure is { } applyFailure)
            {
                ExceptionDispatchInfo.Throw(applyFailure);
            }

            // Applied and made visible, then published to journal readers (a durable group's own sync covers it; a
            // buffered one waits for a sync).
            _state.Publish(group.Last);
            _unpublished.Enqueue(group.End);
            PublishDurableLocked();
        }
        catch (Exception e)
        {
            // In the journal, but the state may hold part of the group: fault, and tell the waiters where their commits
            // are.
            long first = group.First;
            _fault.Set(e);
            _pending.FailUnanswered(group.Batches, i => new StoreFaultedException(
                $"Commit {first + i} was written to the journal, but applying it to the in-memory state failed. The " +
                    $"store is faulted; reopen it (recovery replays the commit).",
                e));
            return;
        }

        // For the next fill: none of this group's writers is back yet, so what is pending now arrived during its sync.
        Volatile.Write(ref _stragglers, (int)Math.Clamp(QueuedBatches, 0, int.MaxValue));
        try
        {
            if (group.NeedsSync)
            {
                _syncs.Record(group.SyncElapsed);
                if (group.SyncElapsed > _options.SlowSyncThreshold)
                {
                    TransactionLog.SlowSync(_logger, group.SyncElapsed.TotalMilliseconds,
                        _options.SlowSyncThreshold.TotalMilliseconds, count);
                }
            }

            // Counted before the writers are answered, so a writer that reads the counters after its commit sees it
            // (as a failed commit is counted before its writer learns of it).
            GuardedInstruments.Add(_metrics.Commits, count);
            GuardedInstruments.Add(_metrics.Groups, 1);
            GuardedInstruments.Record(_metrics.BatchesPerGroup, count);
            GuardedInstruments.Record(_metrics.CommandsPerGroup, group.Commands);

            // Acknowledge in commit order, only now that the group is durable (or written, for a buffered group).
            for (int i = 0; i < count; i++)
            {
                _pending.TryAnswer(group.Batches[i], new CommitResult(group.First + i, group.TimestampTicks));
            }
        }
        catch (Exception e)
        {
            // A failure the committer did not expect (its loggers and instruments keep their listeners' failures to
            // themselves): fault rather than go on in an unknown state; waiters not yet answered learn their commit
            // may be in the journal.
            _fault.Set(e);
            _pending.FailUnanswered(group.Batches, _ => new StoreFaultedException(
                "An unexpected failure in the committer faulted the store; this commit may or may not be in the " +
                    "journal. Reopen the store to recover.",
                e));
        }
    }

    /// <summary>
    /// Under the lock: publishes to journal readers the newest applied group that a completed sync covers (with
    /// everything before it), and forgets those groups.
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
}
