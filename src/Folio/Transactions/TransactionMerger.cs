using Folio.Diagnostics;
using Folio.Journal;
using Microsoft.Extensions.Logging;

namespace Folio.Transactions;

/// <summary>
/// Group commit: many concurrent callers submit batches; few durable journal writes happen.
/// <para>
/// Parts, each with one owner: <see cref="PendingQueue"/> (submitted batches; submitters enqueue, the committer
/// dequeues), <see cref="GroupCommitter"/> (the committer role's work: take, validate, write a group),
/// <see cref="GroupFillPolicy"/> (pure: how long a group fills), <see cref="CommitPipeline"/> (groups between their
/// write and their completion, completed in commit order under its lock), <see cref="BufferedSync"/> (the buffered-mode
/// timer), <see cref="CommitFault"/> and <see cref="SyncStatistics"/> (shared, set and recorded with interlocked
/// operations). This type owns the submission path and the hand-off of the committer role.
/// </para>
/// <para>
/// Protocol. <see cref="CommitAsync"/> encodes the batch on the caller's thread, waits (asynchronously) while too many
/// bytes are pending, and enqueues it. The submitter that then finds no active committer takes the role (a CAS on
/// <see cref="_committerActive"/> from 0 to 1). When the merger is idle (the previous group held one batch: commits
/// are arriving one at a time) it commits that one group inline, on its own thread, and returns a completed task: a
/// lone writer pays no thread hand-off, so it runs at the speed of the bare journal. Under concurrency the role runs
/// as a thread-pool work item instead, so a caller never serves others for long and the writers' continuations keep
/// the pool's threads (committing inline whenever the role was free shrank groups: a writer arriving just after a
/// group committed alone held one of the few pool threads in fdatasync). A pool work item commits at most
/// <see cref="TransactionMergerOptions.MaxGroupsPerTurn"/> groups before re-queueing itself; an inline caller commits
/// one group and hands any rest to a work item.
/// </para>
/// <para>
/// Hand-off. Releasing the role stores 0 (a full fence) and then re-checks for pending batches and a free pipeline
/// slot; completing a group frees its slot and then re-checks for pending batches and a free role (also after a full
/// fence). Whichever runs second sees the other's write, so a batch enqueued while the role was taken or the pipeline
/// full is never stranded. With one group in flight (the default) the pool committer keeps the role through each
/// group's fsync and completion, as submitters arriving meanwhile have nothing to do but wait; with more, it gives the
/// role up right after the group's write, so another thread prepares the next group while this one syncs.
/// </para>
/// <para>
/// Faults. A failed journal write or fsync faults the merger: the group and every pending batch fail with
/// <see cref="StoreFaultedException"/> carrying the cause, later submissions fail fast, and nothing is acknowledged
/// that is not durable. A group that reached the journal but that the state failed to apply faults the merger too: its
/// waiters are told their commits are in the journal. So does any other exception inside the committer: the role is
/// always released, no waiter is left without an answer.
/// </para>
/// </summary>
internal sealed class TransactionMerger : IDisposable, IAsyncDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly TransactionMergerOptions _options;
    private readonly FolioMetrics _metrics;
    private readonly PendingQueue _pending;
    private readonly CommitFault _fault;
    private readonly SyncStatistics _syncs;
    private readonly CommitPipeline _pipeline;
    private readonly GroupCommitter _committer;
    private readonly BufferedSync _bufferedSync;
    private readonly TaskCompletionSource _disposeCompleted = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly int _maxRecordPayload;
    private int _committerActive;
    private int _disposed;

    public TransactionMerger(WriteAheadJournal journal, ICommitState state, TransactionMergerOptions options)
    {
        options.Validate();
        _journal = journal;
        _options = options;
        ILogger logger = GuardedLogger.Create<TransactionMerger>(options.LoggerFactory);
        PendingQueue? pending = null;
        _metrics = new FolioMetrics(options.MeterFactory, () => pending?.Depth ?? 0);
        _pending = pending = new PendingQueue(options.MaxPendingBytes, _metrics);
        _fault = new CommitFault(logger, () => _pending.Depth);
        _syncs = new SyncStatistics(_metrics);
        _maxRecordPayload = (int)Math.Min(int.MaxValue, journal.MaxRecordSize - JournalFormat.RecordHeaderSize);
        _pipeline = new CommitPipeline(journal, state, options, logger, _metrics, _pending, _fault, _syncs);
        _committer = new GroupCommitter(journal, state, options, _metrics, _pending, _pipeline, _fault, _syncs,
            _maxRecordPayload);
        _bufferedSync = new BufferedSync(journal, _committer, _pipeline, _fault, _syncs, options.BufferedSyncInterval);
        _committer.BufferedTimer = _bufferedSync;
    }

    /// <summary>Whether the buffered-mode timer rests because nothing buffered came for a while (tests).</summary>
    internal bool IsSyncTimerResting => _bufferedSync.IsResting;

    /// <summary>Whether a journal failure faulted the merger.</summary>
    public bool IsFaulted => _fault.IsFaulted;

    /// <summary>The failure that faulted the merger, or null.</summary>
    public Exception? Fault => _fault.Cause;

    /// <summary>Whether a committer holds the role now (tests and diagnostics; a moment later it may differ).</summary>
    public bool IsCommitterActive => Volatile.Read(ref _committerActive) != 0;

    /// <summary>Journal fsyncs made by commits and by the buffered-mode timer.</summary>
    public long SyncCount => _syncs.Count;

    /// <summary>Total time spent in the fsyncs counted by <see cref="SyncCount"/> (diagnostics and
    /// benchmarks).</summary>
    public TimeSpan TotalSyncDuration => _syncs.Total;

    /// <summary>Duration of the latest fsync.</summary>
    public TimeSpan LastSyncDuration => _syncs.Last;

    /// <summary>Exponentially weighted average (weight 1/8 per sample) of fsync durations.</summary>
    public TimeSpan AverageSyncDuration => _syncs.Average;

    /// <summary>Groups written and not yet completed (diagnostics and tests).</summary>
    public int GroupsInFlight => _pipeline.GroupsInFlight;

    /// <summary>Groups handed to the apply thread while their fsync ran (tests: a workload reaches that
    /// path).</summary>
    public long GroupsAppliedDuringSync => _pipeline.GroupsAppliedDuringSync;

    /// <summary>
    /// Commits <paramref name="batch"/> atomically with other concurrent batches, under one fsync per group.
    /// </summary>
    /// <param name="batch">The batch; not changed until the commit completes.</param>
    /// <param name="cancellationToken">Cancels the commit while it is still waiting for a group; once the batch is in a
    /// group it commits and the result is delivered regardless.</param>
    /// <returns>The batch's commit sequence number.</returns>
    /// <exception cref="ConcurrencyException">A precondition failed; the batch had no effect.</exception>
    /// <exception cref="StoreFaultedException">The journal failed; the batch is not durable.</exception>
    /// <exception cref="ArgumentException">The batch is empty.</exception>
    /// <exception cref="DocumentTooLargeException">The batch is larger than a journal record can hold.</exception>
    public ValueTask<CommitResult> CommitAsync(CommitBatch batch, CancellationToken cancellationToken = default)
    {
        PendingBatch? pending = Submit(batch, cancellationToken, out ValueTask<CommitResult> otherwise);
        return pending is null ? otherwise : pending.AsValueTask();
    }

    /// <summary>
    /// <see cref="CommitAsync"/> for a caller that needs only the commit's sequence number: the batch itself is what
    /// the caller awaits, so a commit allocates no task (the raw API's single writes).
    /// </summary>
    /// <param name="batch">The batch; not changed until the commit completes.</param>
    /// <param name="cancellationToken">As for <see cref="CommitAsync"/>.</param>
    /// <returns>The batch's commit sequence number.</returns>
    public ValueTask<long> CommitSequenceAsync(CommitBatch batch, CancellationToken cancellationToken = default)
    {
        PendingBatch? pending = Submit(batch, cancellationToken, out ValueTask<CommitResult> otherwise);
        return pending is not null ? pending.AsSequenceTask() : SequenceOf(otherwise);
    }

    private static async ValueTask<long> SequenceOf(ValueTask<CommitResult> commit) =>
        (await commit.ConfigureAwait(false)).Sequence;

    /// <summary>
    /// Checks and encodes the batch and queues it: returns it, for the caller to await, or null with
    /// <paramref name="otherwise"/> to await instead (cancelled already, or waiting for room under the byte bound).
    /// </summary>
    private PendingBatch? Submit(CommitBatch batch, CancellationToken cancellationToken,
        out ValueTask<CommitResult> otherwise)
    {
        ArgumentNullException.ThrowIfNull(batch);
        if (Volatile.Read(ref _disposed) != 0)
        {
            ThrowHelper.ThrowObjectDisposed(nameof(TransactionMerger));
        }

        _fault.ThrowIfFaulted();
        if (batch.Commands.Count == 0)
        {
            ThrowHelper.ThrowArgument(nameof(batch), "A batch holds at least one command.");
        }

        if (cancellationToken.IsCancellationRequested)
        {
            otherwise = ValueTask.FromCanceled<CommitResult>(cancellationToken);
            return null;
        }

        ReadOnlyMemory<byte> encoded = BatchEncoding.Encode(batch);
        if (encoded.Length > _maxRecordPayload)
        {
            ThrowSaveTooLarge(batch.Commands.Count, encoded.Length);
        }

        bool durable = (batch.Durability ?? _options.Durability) == DurabilityMode.Durable;
        var pending = new PendingBatch(batch, encoded, durable);
        if (!_pending.TryReserveBytes(encoded.Length))
        {
            otherwise = EnqueueAfterBackpressureAsync(pending, cancellationToken);
            return null;
        }

        Enqueue(pending, cancellationToken);
        otherwise = default;
        return pending;
    }

    /// <summary>
    /// A batch is atomic and is written as one journal record, so all its documents together must fit one: a save of
    /// several documents can exceed that although each is under the document size limit.
    /// </summary>
    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private void ThrowSaveTooLarge(int commands, int length) =>
        throw new DocumentTooLargeException(
            $"The commit's {commands} changes take {length} bytes, but one commit is written atomically as one " +
                $"journal record, which holds at most {_maxRecordPayload} bytes (DocumentStoreOptions.SegmentSize " +
                $"less its headers). Nothing was written. Split the changes over several commits (SaveChangesAsync " +
                $"or WriteAsync calls), or raise SegmentSize.",
            length,
            _maxRecordPayload);

    private async ValueTask<CommitResult> EnqueueAfterBackpressureAsync(PendingBatch pending,
        CancellationToken cancellationToken)
    {
        while (!_pending.TryReserveBytes(pending.Length))
        {
            // Wait until the committer frees some bytes (each release signals), then try again.
            TryBecomeCommitter(mayCommitInline: false);
            await _pending.WaitForBytesAsync(TimeSpan.FromMilliseconds(50), cancellationToken)
                .ConfigureAwait(false);
            _fault.ThrowIfFaulted();
        }

        Enqueue(pending, cancellationToken);
        return await pending.AsValueTask().ConfigureAwait(false);
    }

    private void Enqueue(PendingBatch pending, CancellationToken cancellationToken)
    {
        if (cancellationToken.CanBeCanceled)
        {
            pending.Registration = cancellationToken.UnsafeRegister(
                static (state, token) =>
                {
                    var (merger, batch) = ((TransactionMerger, PendingBatch))state!;
                    if (batch.TryCancel()
                        && merger._pending.TryFail(batch, new TaskCanceledException(null, null, token)))
                    {
                        GuardedInstruments.Add(merger._metrics.FailedCommits, 1);
                    }
                },
                (this, pending));
        }

        _pending.Enqueue(pending);
        TryBecomeCommitter(mayCommitInline: true);
    }

    /// <summary>
    /// Takes the committer role unless it is taken (CAS). When <paramref name="mayCommitInline"/> and the merger is
    /// idle (the previous group held at most one batch, none in flight), commits one group on the caller's thread;
    /// otherwise runs the role as a thread-pool work item.
    /// </summary>
    private void TryBecomeCommitter(bool mayCommitInline)
    {
        // A full pipeline has nothing for a committer to do: the group completing next re-checks the queue (after a
        // full fence, as the caller's enqueue is one), so skipping here strands nothing and saves a work item per
        // group.
        if (_pipeline.IsFull
            || Volatile.Read(ref _committerActive) != 0
            || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
        {
            return;
        }

        if (mayCommitInline && _committer.LastGroupBatches <= 1 && _pipeline.GroupsInFlight == 0)
        {
            CommitInline();
        }
        else
        {
            ThreadPool.UnsafeQueueUserWorkItem(static self => self.RunCommitter(), this, preferLocal: false);
        }
    }

    /// <summary>Commits one group on the caller's thread, entered holding the role (see <see cref="RunCommitter"/> for
    /// when it is given up).</summary>
    private void CommitInline()
    {
        bool holdingRole = true;
        try
        {
            // answers its group on every path; the finally is for what nothing can answer (OOM)
            InFlightGroup? group = _committer.PrepareNextGroup();
            if (_options.MaxGroupsInFlight > 1)
            {
                holdingRole = false;
                ReleaseRole();
            }

            if (group is not null)
            {
                _pipeline.Finish(group);
                if (!holdingRole)
                {
                    RetriggerAfterFinish();
                }
            }
        }
        finally
        {
            if (holdingRole)
            {
                ReleaseRole();
            }
        }
    }

    /// <summary>
    /// The pool-side committer, entered holding the role: at most
    /// <see cref="TransactionMergerOptions.MaxGroupsPerTurn"/>
    /// groups, then it re-queues itself. One group in flight: the role is kept through each group's fsync and
    /// completion. Overlap: the role is given up right after the group's write and taken again after the group
    /// finishes while batches are pending.
    /// </summary>
    private void RunCommitter()
    {
        bool overlap = _options.MaxGroupsInFlight > 1;
        bool holdingRole = true;
        try
        {
            for (int groups = 1; ; groups++)
            {
                InFlightGroup? group = _committer.PrepareNextGroup();
                if (overlap)
                {
                    holdingRole = false;
                    ReleaseRole();
                }

                if (group is not null)
                {
                    _pipeline.Finish(group);
                }

                if (!overlap)
                {
                    if (groups >= _options.MaxGroupsPerTurn || _pending.IsEmpty)
                    {
                        return; // the finally gives the role up, re-queueing the committer if batches are pending
                    }

                    continue;
                }

                // The re-check after freeing a slot (see the hand-off protocol), done here so the role stays on this
                // thread.
                Interlocked.MemoryBarrier();
                if (_pending.IsEmpty)
                {
                    return;
                }

                if (groups >= _options.MaxGroupsPerTurn)
                {
                    // a new work item: one caller's turn serves others for a bounded time
                    TryBecomeCommitter(mayCommitInline: false);
                    return;
                }

                if (_pipeline.IsFull || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
                {
                    return;
                }

                holdingRole = true;
            }
        }
        finally
        {
            if (holdingRole)
            {
                ReleaseRole();
            }
        }
    }

    /// <summary>After a group finished outside the role: a full fence between freeing its slot and reading the role
    /// (<see cref="ReleaseRole"/> does the mirror image), then a committer if batches are waiting.</summary>
    private void RetriggerAfterFinish()
    {
        Interlocked.MemoryBarrier();
        if (!_pending.IsEmpty)
        {
            TryBecomeCommitter(mayCommitInline: false);
        }
    }

    /// <summary>
    /// Gives up the committer role. Stores 0 first (a full fence) and then re-checks the queue and the pipeline, so a
    /// batch enqueued just before the release (whose submitter saw the role taken) is picked up by a new work item
    /// rather than stranded; when the pipeline is full, the group completing next re-checks instead.
    /// </summary>
    private void ReleaseRole()
    {
        Interlocked.Exchange(ref _committerActive, 0);
        if (_pending.IsEmpty || _pipeline.IsFull || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
        {
            return;
        }

        ThreadPool.UnsafeQueueUserWorkItem(static self => self.RunCommitter(), this, preferLocal: false);
    }

    /// <summary>
    /// Closes the merger, blocking: stops the buffered-sync timer, commits what is pending (on this thread when no
    /// committer is active, else waiting for the committers' answers), lets the groups in flight finish, and syncs the
    /// journal. Later submissions throw <see cref="ObjectDisposedException"/>. A second call returns at once.
    /// </summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }

        try
        {
            _bufferedSync.Dispose();
            while (true)
            {
                // Every batch answered (the committers already running answer them), whatever the answer.
                _pending.WhenAllAnsweredAsync().Wait();
                if (!DrainStep())
                {
                    break;
                }

                Thread.Yield(); // a committer is between answering its last group and giving up the role
            }

            CloseAfterDrain();
        }
        finally
        {
            _disposeCompleted.TrySetResult();
        }
    }

    /// <summary>
    /// Closes the merger without blocking a thread: waits for the buffered-sync timer's callback to end, then awaits
    /// the waiters of every pending batch and every group in flight (the committers already running finish them),
    /// and syncs the journal. A second call awaits the first.
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            await _disposeCompleted.Task.ConfigureAwait(false);
            return;
        }

        try
        {
            await _bufferedSync.DisposeAsync().ConfigureAwait(false);
            while (true)
            {
                // Every batch answered (the committers already running answer them), whatever the answer.
                await _pending.WhenAllAnsweredAsync().ConfigureAwait(false);
                if (!DrainStep())
                {
                    break;
                }

                // A committer is between answering its last group and giving up the role: yield to the thread
                // pool, never to the caller's SynchronizationContext (Task.Yield would post there, and a caller
                // blocked on a sync Dispose would then wait for itself).
                await Task.CompletedTask.ConfigureAwait(ConfigureAwaitOptions.ForceYielding);
            }

            CloseAfterDrain();
        }
        finally
        {
            _disposeCompleted.TrySetResult();
        }
    }

    /// <summary>
    /// One step of the drain, once every batch is answered: false when the merger is quiet (nothing queued, no
    /// committer, no group in flight). Otherwise, when batches are queued (only cancelled ones can be left by now) and
    /// no committer holds the role, takes it, takes them off, and gives it back; true to look again.
    /// </summary>
    private bool DrainStep()
    {
        if (!_pending.IsEmpty && Interlocked.CompareExchange(ref _committerActive, 1, 0) == 0)
        {
            InFlightGroup? group = null;
            try
            {
                group = _committer.PrepareNextGroup();
            }
            finally
            {
                Interlocked.Exchange(ref _committerActive, 0);
            }

            if (group is not null)
            {
                _pipeline.Finish(group);
            }

            return true;
        }

        return !_pending.IsEmpty || Volatile.Read(ref _committerActive) != 0 || _pipeline.GroupsInFlight != 0;
    }

    /// <summary>After the drain: syncs (and so publishes) what was appended, and releases the apply thread, the metrics
    /// and the queue's semaphore.</summary>
    private void CloseAfterDrain()
    {
        if (!IsFaulted)
        {
            try
            {
                _journal.Sync();
            }
            catch (StoreFaultedException)
            {
            }
        }

        _pipeline.Dispose();
        _metrics.Dispose();
        _pending.Dispose();
    }
}
