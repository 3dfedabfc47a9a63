using System.Diagnostics;
using Folio.Diagnostics;
using Folio.Journal;

namespace Folio.Transactions;

/// <summary>
/// The committer role's work: takes one group of pending batches, validates it, writes it to the journal as one
/// record and starts its sync (<see cref="PrepareNextGroup"/>).
/// <para>
/// Owners. Only the thread holding the committer role (<see cref="TransactionMerger"/> hands it over with a CAS and a
/// full fence) calls <see cref="PrepareNextGroup"/>; every field but the two published hints is that thread's scratch,
/// so successive holders see each other's writes through the role's fences. <see cref="LastGroupBatches"/> is written
/// here (Volatile) and read by submitters deciding whether to commit inline and by the fill target;
/// <see cref="BufferedAcknowledged"/> is written here (Volatile) and read by the buffered-sync timer. Both are hints or
/// monotonic marks: a stale read costs one hand-off, one short wait or one timer tick's delay, never correctness.
/// </para>
/// <para>
/// Validation. Each batch's preconditions are checked against the committed state plus the writes of the groups in
/// flight (copied when the slot is reserved; see <see cref="CommitPipeline"/>) plus the writes of the batches before
/// it in the group. A batch that fails is answered here, alone; the rest of the group goes on.
/// </para>
/// </summary>
internal sealed class GroupCommitter
{
    /// <summary>A put earlier in the same group: no expectation can match it.</summary>
    private const long PendingPut = -1;

    private readonly WriteAheadJournal _journal;
    private readonly ICommitState _state;
    private readonly TransactionMergerOptions _options;
    private readonly FolioMetrics _metrics;
    private readonly PendingQueue _pending;
    private readonly CommitPipeline _pipeline;
    private readonly CommitFault _fault;
    private readonly SyncStatistics _syncs;
    private readonly int _maxRecordPayload;
    private readonly List<PendingBatch> _group = [];
    private readonly List<PendingBatch> _accepted = [];
    private readonly List<DocumentKey> _conflicts = [];
    private readonly Dictionary<DocumentKey, long> _groupWrites = [];
    private ReadOnlyMemory<byte>[] _entries = new ReadOnlyMemory<byte>[64];
    // the groups in flight when the slot was reserved, oldest first
    private InFlightGroup[] _inFlight = new InFlightGroup[4];
    private int _inFlightCount;
    private int _writersSeen;
    private int _lastGroupBatches;
    private long _bufferedAcknowledged;

    public GroupCommitter(WriteAheadJournal journal, ICommitState state, TransactionMergerOptions options,
        FolioMetrics metrics, PendingQueue pending, CommitPipeline pipeline, CommitFault fault, SyncStatistics syncs,
        int maxRecordPayload)
    {
        _journal = journal;
        _state = state;
        _options = options;
        _metrics = metrics;
        _pending = pending;
        _pipeline = pipeline;
        _fault = fault;
        _syncs = syncs;
        _maxRecordPayload = maxRecordPayload;
    }

    /// <summary>How many batches the last written group held (a hint).</summary>
    public int LastGroupBatches => Volatile.Read(ref _lastGroupBatches);

    /// <summary>The newest sequence acknowledged before its fsync (buffered groups): the timer syncs up to
    /// it.</summary>
    public long BufferedAcknowledged => Volatile.Read(ref _bufferedAcknowledged);

    /// <summary>The buffered-mode timer, woken after a buffered group is acknowledged; set once, before any
    /// commit.</summary>
    public BufferedSync? BufferedTimer { get; set; }

    /// <summary>
    /// Under the role: takes one group off the queue, validates it and writes it to the journal, and starts its sync.
    /// Returns the group, which the caller finishes (<see cref="CommitPipeline.Finish"/>) after giving up the role, or
    /// null when there was nothing to write (nothing pending, every batch failed validation, the pipeline is full, or
    /// the merger is faulted: then every pending batch fails here). Answers its batches on every path.
    /// </summary>
    public InFlightGroup? PrepareNextGroup()
    {
        if (_fault.Cause is { } cause)
        {
            _pending.FailAll(cause);
            return null;
        }

        if (!_pipeline.TryTakeSlot(ref _inFlight, ref _inFlightCount))
        {
            return null; // the pipeline is full: the group completing next re-triggers the committer
        }

        int target = WaitForGroupToFill();
        _writersSeen = (int)Math.Min(int.MaxValue, _pending.Depth); // in flight plus pending, for the next fill

        InFlightGroup? written = null;
        try
        {
            TakeGroup(_options.MaxGroupsInFlight > 1 && target > 0 ? target : int.MaxValue);
            if (_group.Count == 0)
            {
                return null;
            }

            ValidateGroup();
            if (_accepted.Count > 0)
            {
                written = WriteGroup();
            }

            return written;
        }
        catch (Exception e)
        {
            // Journal failures are handled in WriteGroup; this is anything else (a bug, or a metrics listener that
            // throws). Fault rather than leave the committer role taken or a waiter unanswered.
            FaultGroup(e, _ => new StoreFaultedException(
                "An unexpected failure in the committer faulted the store; this commit may or may not be in the " +
                    "journal. Reopen the store to recover.",
                e));
            return null;
        }
        finally
        {
            _group.Clear();
            _accepted.Clear();
            if (written is null)
            {
                _pipeline.ReturnSlot();
            }
        }
    }

    /// <summary>
    /// For a group that never reached the pipeline: faults the merger with <paramref name="cause"/>, answers every
    /// batch of the group not answered yet with <paramref name="errorFor"/>(its position in the group), then fails
    /// every pending batch. Throws nothing.
    /// </summary>
    private void FaultGroup(Exception cause, Func<int, StoreFaultedException> errorFor)
    {
        _fault.Set(cause);
        _pending.FailUnanswered(_group, errorFor);
        _pending.FailAll(_fault.Cause!);
    }

    /// <summary>Lets the writers acknowledged by the previous group come back before taking the next one
    /// (<see cref="GroupFillPolicy"/>); returns the fill target.</summary>
    private int WaitForGroupToFill()
    {
        long pending = _pipeline.QueuedBatches;
        int target = GroupFillPolicy.Target(_options.MaxGroupsInFlight, LastGroupBatches, _pipeline.Stragglers,
            _writersSeen, _pending.Depth);
        if (!GroupFillPolicy.ShouldWait(pending, target, _options.GroupFillWait, _fault.IsFaulted))
        {
            return target;
        }

        long now = Stopwatch.GetTimestamp();
        var fill = new GroupFillPolicy(now, pending, target,
            GroupFillPolicy.Budget(_syncs.Average, _options.GroupFillWait), GroupFillPolicy.StallTicks);
        var spin = new SpinWait();
        while (fill.KeepWaiting(now, pending))
        {
            spin.SpinOnce(sleep1Threshold: -1);
            now = Stopwatch.GetTimestamp();
            pending = _pipeline.QueuedBatches;
        }

        return target;
    }

    /// <summary>
    /// Takes batches in arrival order while the group stays within the caps: 1024 commands, the byte cap (or the first
    /// batch's size plus the small-batch allowance), and what one journal record holds. The first batch is always
    /// taken.
    /// </summary>
    private void TakeGroup(int maxBatches)
    {
        int commands = 0;
        long bytes = 0;
        long byteCap = Math.Min(_options.MaxGroupBytes, _maxRecordPayload);
        while (_pending.TryTakeNext(out PendingBatch next))
        {
            if (_group.Count > 0
                && (commands + next.CommandCount > _options.MaxGroupCommands || bytes + next.Length + 4 > byteCap
                || _group.Count >= maxBatches))
            {
                _pending.HoldBack(next); // the next group's first
                break;
            }

            if (!next.TryTake())
            {
                continue; // cancelled: its cancellation already released it
            }

            if (_group.Count == 0 && next.Length <= _options.SmallBatchAllowance)
            {
                byteCap = Math.Min(byteCap, next.Length + _options.SmallBatchAllowance);
            }

            _group.Add(next);
            commands += next.CommandCount;
            bytes += next.Length + 4;
        }
    }

    /// <summary>Checks each batch's preconditions against the committed state plus the writes of earlier batches in the
    /// group.</summary>
    private void ValidateGroup()
    {
        _groupWrites.Clear();
        foreach (PendingBatch pending in _group)
        {
            CommitBatch batch = pending.Batch;
            try
            {
                _conflicts.Clear();
                foreach ((DocumentKey key, long expected) in batch.Expectations)
                {
                    long current = _groupWrites.TryGetValue(key, out long written) ? written : VersionBeforeGroup(key);
                    if (current != expected && !_conflicts.Contains(key)) // two expectations of one key: named once
                    {
                        _conflicts.Add(key);
                    }
                }

                if (_conflicts.Count > 0)
                {
                    throw new ConcurrencyException([.. _conflicts]);
                }

                _state.Validate(batch);
            }
            catch (Exception e)
            {
                // Counted before the caller is answered, so a caller that reads the counter after its failure sees it.
                GuardedInstruments.Add(_metrics.FailedCommits, 1);
                _pending.TryFail(pending, e);
                continue;
            }

            foreach (BatchCommand command in batch.Commands)
            {
                _groupWrites[command.Key] = command.Kind == ChangeKind.Put ? PendingPut : 0;
            }

            _accepted.Add(pending);
        }
    }

    /// <summary>The version of <paramref name="key"/> after the groups in flight (newest first), else in the
    /// state.</summary>
    private long VersionBeforeGroup(in DocumentKey key)
    {
        for (int i = _inFlightCount - 1; i >= 0; i--)
        {
            if (_inFlight[i].Writes.TryGetValue(key, out long version))
            {
                return version;
            }
        }

        return _state.GetVersion(key);
    }

    /// <summary>
    /// Writes the accepted batches as one journal record and starts its sync (a durable group), then adds the group
    /// to the pipeline, in commit order. A failed write faults the merger and answers the group here, except a full
    /// disk or a next segment that cannot be created (<see cref="StoreUnavailableException"/>: nothing was written),
    /// which fails the group alone; a sync that cannot even start is recorded on the group, which then fails in its
    /// turn.
    /// </summary>
    private InFlightGroup? WriteGroup()
    {
        int count = _accepted.Count;
        if (_entries.Length < count)
        {
            _entries = new ReadOnlyMemory<byte>[Math.Max(count, _entries.Length * 2)];
        }

        bool durable = false;
        int commands = 0;
        for (int i = 0; i < count; i++)
        {
            _entries[i] = _accepted[i].Encoded;
            durable |= _accepted[i].Durable;
            commands += _accepted[i].CommandCount;
        }

        long first;
        long timestamp;
        JournalPosition end;
        try
        {
            first = _journal.Append(_entries.AsSpan(0, count), out timestamp, out end);
        }
        catch (StoreUnavailableException e)
        {
            // Nothing was written and the journal is not faulted: the group fails alone, the next one tries again.
            _pending.FailUnanswered(_accepted, _ => e is StoreFullException
                ? new StoreFullException(e.Message, e.InnerException)
                : new StoreUnavailableException(e.Message, e.InnerException));
            return null;
        }
        catch (Exception e)
        {
            Exception cause = CommitFault.JournalFailureCause(e);
            FaultGroup(cause, _ => CommitFault.NotDurable(cause));
            return null;
        }
        finally
        {
            Array.Clear(_entries, 0, count);
        }

        InFlightGroup group = _pipeline.Rent();
        group.First = first;
        group.End = end;
        group.TimestampTicks = timestamp;
        group.Commands = commands;
        group.Batches.AddRange(_accepted);
        if (_options.MaxGroupsInFlight > 1)
        {
            // Only a later group validated while this one is in flight reads them: with one group at a time, none is.
            for (int i = 0; i < count; i++)
            {
                foreach (BatchCommand command in _accepted[i].Batch.Commands)
                {
                    group.Writes[command.Key] = command.Kind == ChangeKind.Put ? first + i : 0;
                }
            }
        }

        if (durable)
        {
            try
            {
                group.NeedsSync = _journal.TryBeginSync(out group.SyncPoint);
            }
            catch (Exception e)
            {
                group.Failure = CommitFault.JournalFailureCause(e);
            }
        }
        else
        {
            // Acknowledged before its fsync: the buffered-mode timer syncs it within the interval (woken if it rests).
            Volatile.Write(ref _bufferedAcknowledged, first + count - 1);
            BufferedTimer?.Wake();
        }

        Volatile.Write(ref _lastGroupBatches, _group.Count);
        _pipeline.Add(group);
        return group;
    }
}
