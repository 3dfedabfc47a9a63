using System.Diagnostics;
using Folio.Journal;
using System.Runtime.CompilerServices;

namespace Folio.Transactions;

internal sealed partial class TransactionMerger
{
    // Committer-only scratch, reused across groups (only the thread holding the committer role touches them).
    private readonly List<PendingBatch> _group = [];
    private readonly List<PendingBatch> _accepted = [];
    private readonly List<DocumentKey> _conflicts = [];
    private readonly Dictionary<DocumentKey, long> _groupWrites = [];
    private ReadOnlyMemory<byte>[] _entries = new ReadOnlyMemory<byte>[64];

    /// <summary>How long the group fill waits without a new batch before it stops waiting: 20 µs, in Stopwatch ticks.</summary>
    private static readonly long s_fillStallTicks = Stopwatch.Frequency / 50_000;

    /// <summary>A put earlier in the same group: no expectation can match it.</summary>
    private const long PendingPut = -1;

    /// <summary>
    /// Under the committer role: takes one group off the queue, validates it and writes it to the journal, and starts
    /// its sync. Returns the group, which the caller finishes (<see cref="FinishGroup"/>) after giving up the role, or
    /// null when there was nothing to write (nothing pending, every batch failed validation, the pipeline is full, or
    /// the merger is faulted: then every pending batch fails here).
    /// </summary>
    private InFlightGroup? PrepareNextGroup()
    {
        if (IsFaulted)
        {
            FailAllPending();
            return null;
        }

        if (!TryTakePipelineSlot())
        {
            return null; // the pipeline is full: the group completing next re-triggers the committer
        }

        int target = WaitForGroupToFill();
        _writersSeen = (int)Math.Min(int.MaxValue, Volatile.Read(ref _queueDepth)); // in flight plus pending, for the next fill

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
                "An unexpected failure in the committer faulted the store; this commit may or may not be in the journal. Reopen the store to recover.",
                e));
            return null;
        }
        finally
        {
            _group.Clear();
            _accepted.Clear();
            if (written is null)
            {
                ReturnPipelineSlot();
            }
        }
    }

    /// <summary>
    /// Under the role, for a group that never reached the in-flight queue: faults the merger with
    /// <paramref name="cause"/>, answers every batch of the group not answered yet with <paramref name="errorFor"/>(its
    /// position in the group), then fails every pending batch.
    /// </summary>
    /// <remarks>
    /// Throws nothing: the log line and the failed-commits metric go through <see cref="Observe"/>, so a logger or
    /// metrics listener that throws cannot leave a waiter unanswered or the committer role taken.
    /// </remarks>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void FaultGroup(Exception cause, Func<int, StoreFaultedException> errorFor)
    {
        SetFault(cause);
        FailUnanswered(_group, errorFor);
        FailAllPending();
    }

    /// <summary>
    /// Answers every batch of <paramref name="batches"/> not answered yet with <paramref name="errorFor"/>(its index in
    /// the list: for a written group, its offset from the group's first sequence). Throws nothing (see <see cref="FaultGroup"/>).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void FailUnanswered(List<PendingBatch> batches, Func<int, StoreFaultedException> errorFor)
    {
        int failed = 0;
        for (int i = 0; i < batches.Count; i++)
        {
            PendingBatch pending = batches[i];
            if (!pending.Task.IsCompleted)
            {
                Release(pending); // every path that answers a batch releases it just before: unanswered means unreleased
                pending.TrySetException(errorFor(i));
                failed++;
            }
        }

        RecordFailedCommits(failed);
    }

    /// <summary>Adds <paramref name="failed"/> to the failed-commits metric from a failure path (through <see cref="Observe"/>).</summary>
    private void RecordFailedCommits(int failed)
    {
        if (failed > 0)
        {
            Observe(static (self, failed) => self._metrics.FailedCommits.Add(failed), this, failed);
        }
    }

    /// <summary>
    /// Reports a failure to a logger or metrics listener from a failure path, where an observer that throws must not
    /// stop the path from answering its waiters: its exception is dropped (the store is faulted already, and says why).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void Observe<T>(Action<TransactionMerger, T> report, TransactionMerger self, T argument)
    {
        try
        {
            report(self, argument);
        }
#pragma warning disable CA1031 // an observer's failure must not escape a failure path
        catch (Exception)
#pragma warning restore CA1031
        {
        }
    }

    /// <summary>
    /// Lets the writers acknowledged by the previous group come back before taking the next one (see the protocol on
    /// <see cref="TransactionMerger"/>): waits while fewer batches are pending than the fill target (<see cref="FillTarget"/>), at most
    /// <see cref="TransactionMergerOptions.GroupFillWait"/> of the average fsync, and stops early when no new batch
    /// arrived for 20 µs (<see cref="s_fillStallTicks"/>). Spins and yields (no sleep: the waits are tens of microseconds).
    /// </summary>
    private int WaitForGroupToFill()
    {
        long seen = PendingBatches();
        int expected = FillTarget();
        if (expected <= 1 || seen >= expected || _options.GroupFillWait <= 0 || IsFaulted)
        {
            return expected;
        }

        long budget = (long)(Volatile.Read(ref _averageSyncTicks) * _options.GroupFillWait * Stopwatch.Frequency / TimeSpan.TicksPerSecond);
        long now = Stopwatch.GetTimestamp();
        long deadline = now + budget;
        long lastArrival = now;
        var spin = new SpinWait();
        while (now < deadline && now - lastArrival < s_fillStallTicks)
        {
            spin.SpinOnce(sleep1Threshold: -1);
            now = Stopwatch.GetTimestamp();
            long pending = PendingBatches();
            if (pending >= expected)
            {
                return expected;
            }

            if (pending > seen)
            {
                seen = pending;
                lastArrival = now;
            }
        }

        return expected;
    }

    /// <summary>
    /// Takes batches in arrival order while the group stays within the caps: 1024 commands, the byte cap (or the first
    /// batch's size plus the small-batch allowance), and what one journal record holds. The first batch is always taken.
    /// </summary>
    private void TakeGroup(int maxBatches)
    {
        int commands = 0;
        long bytes = 0;
        long byteCap = Math.Min(_options.MaxGroupBytes, _maxRecordPayload);
        while (_queue.TryPeek(out PendingBatch? next))
        {
            if (_group.Count > 0 && (commands + next.CommandCount > _options.MaxGroupCommands || bytes + next.Length + 4 > byteCap || _group.Count >= maxBatches))
            {
                break;
            }

            _queue.TryDequeue(out _);
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

    /// <summary>Checks each batch's preconditions against the committed state plus the writes of earlier batches in the group.</summary>
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
                    if (current != expected)
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
                Release(pending);
                pending.TrySetException(e);
                _metrics.FailedCommits.Add(1);
                continue;
            }

            foreach (BatchCommand command in batch.Commands)
            {
                _groupWrites[command.Key] = command.Kind == ChangeKind.Put ? PendingPut : 0;
            }

            _accepted.Add(pending);
        }
    }

    /// <summary>
    /// Writes the accepted batches as one journal record and starts its sync (a durable group), then adds the group
    /// to the in-flight queue, in commit order. A failed write faults the merger and answers the group here; a sync
    /// that cannot even start is recorded on the group, which then fails in its turn.
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
        catch (Exception e)
        {
            Exception cause = JournalFailureCause(e);
            FaultGroup(cause, _ => FaultedException(cause));
            return null;
        }
        finally
        {
            Array.Clear(_entries, 0, count);
        }

        InFlightGroup group = RentInFlightGroup();
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
                group.Failure = JournalFailureCause(e);
            }
        }
        else
        {
            // Acknowledged before its fsync: the buffered-mode timer syncs it within the interval.
            Volatile.Write(ref _bufferedAcknowledged, first + count - 1);
        }

        Volatile.Write(ref _lastGroupBatches, _group.Count);
        AddInFlight(group);
        return group;
    }

    private void SetFault(Exception cause)
    {
        if (Interlocked.CompareExchange(ref _fault, cause, null) is null)
        {
            int pending = (int)Volatile.Read(ref _queueDepth);
            Observe(static (self, state) => TransactionLog.Faulted(self._logger, state.Pending, state.Cause), this, (Pending: pending, Cause: cause));
        }
    }

    /// <summary>Fails every batch still waiting: the store is faulted. Throws nothing (see <see cref="FaultGroup"/>).</summary>
    private void FailAllPending()
    {
        Exception cause = Volatile.Read(ref _fault)!;
        int failed = 0;
        while (_queue.TryDequeue(out PendingBatch? pending))
        {
            if (pending.TryTake())
            {
                Release(pending);
                pending.TrySetException(FaultedException(cause));
                failed++;
            }
        }

        RecordFailedCommits(failed);
    }

    /// <summary>The I/O failure behind a journal exception: the journal wraps it in a <see cref="StoreFaultedException"/>.</summary>
    private static Exception JournalFailureCause(Exception e) => e is StoreFaultedException { InnerException: { } inner } ? inner : e;

    private static StoreFaultedException FaultedException(Exception cause)
    {
        bool diskFull = cause is IOException io && (io.HResult == 28 || (io.HResult & 0xFFFF) == 0x70 || io.Message.Contains("No space left", StringComparison.OrdinalIgnoreCase));
        string message = diskFull
            ? "The disk is full: the journal could not be written, so this commit is not durable. The store is faulted; free space and reopen it."
            : "A journal write or fsync failed, so this commit is not durable. The store is faulted; reopen it to recover.";
        return new StoreFaultedException(message, cause);
    }
}
