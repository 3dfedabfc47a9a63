using System.Collections.Concurrent;
using System.Diagnostics;
using Folio.Diagnostics;
using Folio.Journal;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Folio.Transactions;

/// <summary>
/// Group commit: many concurrent callers submit batches; few durable journal writes happen.
/// <para>
/// Protocol. <see cref="CommitAsync"/> encodes the batch on the caller's thread, waits (asynchronously) while too many
/// bytes are pending, and enqueues a <see cref="PendingBatch"/> on a lock-free <see cref="ConcurrentQueue{T}"/>.
/// The submitter that then finds no active committer takes the role (a CAS on <see cref="_committerActive"/> from
/// 0 to 1). When the merger is idle (the previous group held one batch: commits are arriving one at a time) it
/// commits that one group inline, on its own thread, and returns a completed task: a lone writer pays no thread
/// hand-off, so it runs at the speed of the bare journal. Under concurrency (the previous group held several
/// batches) the role runs as a thread-pool work item instead, so a caller never serves others for long and the
/// writers' continuations keep the pool's threads. Either way the committer takes pending batches in arrival order
/// (skipping cancelled ones) up to the group caps, validates each against the committed state plus the writes of
/// the batches before it in the group, writes the accepted ones as one journal record, makes it durable with one
/// fdatasync (unless every batch in the group is buffered), applies them to the state and completes every waiter
/// in commit order. A pool work item commits at most <see cref="TransactionMergerOptions.MaxGroupsPerTurn"/>
/// groups before re-queueing itself; an inline caller commits one group and hands any rest to a work item.
/// Releasing the role stores 0 and then re-checks the queue, so a batch enqueued just before the release is never
/// stranded.
/// </para>
/// <para>
/// Pipeline. The role covers taking, validating and writing a group and starting its sync; the fdatasync and the
/// in-order completion run after the role is given up (TransactionMerger.Pipeline.cs has that protocol). With
/// <see cref="TransactionMergerOptions.MaxGroupsInFlight"/> = 1 (the default) the next group waits for the slot, so
/// groups commit one at a time; above 1 the next group is written and synced while earlier fsyncs are in flight.
/// </para>
/// <para>
/// Group fill. fdatasync dominates a group's cost, so before taking the next group the committer lets the writers
/// it just acknowledged come back: while fewer batches are pending than the fill target (the previous group's size
/// plus the batches that arrived during its fsync; see FillTarget), it waits (spinning and yielding, never sleeping) up to <see cref="TransactionMergerOptions.GroupFillWait"/> of the average fsync,
/// and stops as soon as the count is reached or no new batch arrived for 20 µs. <see cref="_lastGroupBatches"/> is
/// written by the committer only and read by submitters and the committer (Volatile); it is a hint, so a stale
/// value costs at most one hand-off or one short wait, never correctness.
/// </para>
/// <para>
/// Faults. A failed journal write or fsync faults the merger: the group and every pending batch fail with
/// <see cref="StoreFaultedException"/> carrying the cause, later submissions fail fast, and nothing is acknowledged
/// that is not durable (a failed fsync is never retried as if it had succeeded). A group that reached the journal but
/// that the state failed to apply faults the merger too: its waiters are told their commits are in the journal. So does
/// any other exception inside the committer: the role is always released, no waiter is left without an answer. The
/// failure path itself throws nothing: its log line and failed-commits metric go through a guard that drops an
/// observer's exception (a logger or metrics listener that throws there once left waiters unanswered and, on the
/// pool or the buffered-sync timer, ended the process).
/// </para>
/// </summary>
internal sealed partial class TransactionMerger : IDisposable, IAsyncDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly ICommitState _state;
    private readonly TransactionMergerOptions _options;
    private readonly ILogger _logger;
    private readonly FolioMetrics _metrics;
    private readonly ConcurrentQueue<PendingBatch> _queue = new();
    private readonly SemaphoreSlim _pendingBytesChanged = new(0);
    private readonly Timer? _bufferedSyncTimer;
    private readonly TaskCompletionSource _disposeCompleted = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly int _maxRecordPayload;
    private int _committerActive;
    private int _lastGroupBatches;
    private long _pendingBytes;
    private long _queueDepth;
    private int _bytesWaiters;
    private Exception? _fault;
    private int _disposed;
    private long _syncCount;
    private long _bufferedAcknowledged;
    private long _syncTicksTotal;
    private long _lastSyncTicks;
    private long _averageSyncTicks;

    public TransactionMerger(WriteAheadJournal journal, ICommitState state, TransactionMergerOptions options)
    {
        options.Validate();
        _journal = journal;
        _state = state;
        _options = options;
        _logger = options.LoggerFactory?.CreateLogger<TransactionMerger>() ?? NullLogger<TransactionMerger>.Instance;
        _metrics = new FolioMetrics(options.MeterFactory, () => Volatile.Read(ref _queueDepth));
        _maxRecordPayload = (int)Math.Min(int.MaxValue, journal.MaxRecordSize - JournalFormat.RecordHeaderSize);
        _bufferedSyncTimer = new Timer(static self => ((TransactionMerger)self!).OnTimer(), this, options.BufferedSyncInterval, options.BufferedSyncInterval);
    }

    /// <summary>Whether a journal failure faulted the merger.</summary>
    public bool IsFaulted => Volatile.Read(ref _fault) is not null;

    /// <summary>The failure that faulted the merger, or null.</summary>
    public Exception? Fault => Volatile.Read(ref _fault);

    /// <summary>Whether a committer holds the role now (tests and diagnostics; a moment later it may differ).</summary>
    public bool IsCommitterActive => Volatile.Read(ref _committerActive) != 0;

    /// <summary>Journal fsyncs made by commits and by the buffered-mode timer.</summary>
    public long SyncCount => Volatile.Read(ref _syncCount);

    /// <summary>Total time spent in the fsyncs counted by <see cref="SyncCount"/> (diagnostics and benchmarks).</summary>
    public TimeSpan TotalSyncDuration => TimeSpan.FromTicks(Volatile.Read(ref _syncTicksTotal));

    /// <summary>Duration of the latest fsync.</summary>
    public TimeSpan LastSyncDuration => TimeSpan.FromTicks(Volatile.Read(ref _lastSyncTicks));

    /// <summary>Exponentially weighted average (weight 1/8 per sample) of fsync durations.</summary>
    public TimeSpan AverageSyncDuration => TimeSpan.FromTicks(Volatile.Read(ref _averageSyncTicks));

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
        ArgumentNullException.ThrowIfNull(batch);
        if (Volatile.Read(ref _disposed) != 0)
        {
            ThrowHelper.ThrowObjectDisposed(nameof(TransactionMerger));
        }

        ThrowIfFaulted();
        if (batch.Commands.Count == 0)
        {
            ThrowHelper.ThrowArgument(nameof(batch), "A batch holds at least one command.");
        }

        if (cancellationToken.IsCancellationRequested)
        {
            return ValueTask.FromCanceled<CommitResult>(cancellationToken);
        }

        byte[] encoded = BatchEncoding.Encode(batch, out int length);
        if (length > _maxRecordPayload)
        {
            System.Buffers.ArrayPool<byte>.Shared.Return(encoded);
            ThrowSaveTooLarge(batch.Commands.Count, length);
        }

        bool durable = (batch.Durability ?? _options.Durability) == DurabilityMode.Durable;
        var pending = new PendingBatch(batch, encoded, length, durable);
        if (!TryReserveBytes(length))
        {
            return EnqueueAfterBackpressureAsync(pending, cancellationToken);
        }

        Enqueue(pending, cancellationToken);
        return new ValueTask<CommitResult>(pending.Task);
    }

    /// <summary>
    /// A batch is atomic and is written as one journal record, so all its documents together must fit one: a save of
    /// several documents can exceed that although each is under the document size limit.
    /// </summary>
    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private void ThrowSaveTooLarge(int commands, int length) =>
        throw new DocumentTooLargeException(
            $"The save's {commands} changes take {length} bytes, but one save is written atomically as one journal record, which holds at most {_maxRecordPayload} bytes (DocumentStoreOptions.SegmentSize less its headers). Nothing was written. Save the documents over several SaveChangesAsync calls, or raise SegmentSize.",
            length,
            _maxRecordPayload);

    /// <summary>Counts a batch's bytes as pending unless that would pass the bound (a batch alone always fits).</summary>
    private bool TryReserveBytes(int length)
    {
        long current = Volatile.Read(ref _pendingBytes);
        while (current == 0 || current + length <= _options.MaxPendingBytes)
        {
            long seen = Interlocked.CompareExchange(ref _pendingBytes, current + length, current);
            if (seen == current)
            {
                return true;
            }

            current = seen;
        }

        return false;
    }

    private async ValueTask<CommitResult> EnqueueAfterBackpressureAsync(PendingBatch pending, CancellationToken cancellationToken)
    {
        try
        {
            while (!TryReserveBytes(pending.Length))
            {
                // Wait until the committer frees some bytes (each release signals), then try again.
                Interlocked.Increment(ref _bytesWaiters);
                try
                {
                    TryBecomeCommitter(mayCommitInline: false);
                    await _pendingBytesChanged.WaitAsync(TimeSpan.FromMilliseconds(50), cancellationToken).ConfigureAwait(false);
                }
                finally
                {
                    Interlocked.Decrement(ref _bytesWaiters);
                }

                ThrowIfFaulted();
            }
        }
        catch
        {
            pending.ReturnBuffer();
            throw;
        }

        Enqueue(pending, cancellationToken);
        return await pending.Task.ConfigureAwait(false);
    }

    private void Enqueue(PendingBatch pending, CancellationToken cancellationToken)
    {
        if (cancellationToken.CanBeCanceled)
        {
            pending.Registration = cancellationToken.UnsafeRegister(
                static (state, token) =>
                {
                    var (merger, batch) = ((TransactionMerger, PendingBatch))state!;
                    if (batch.TryCancel())
                    {
                        merger.Release(batch);
                        batch.TrySetCanceled(token);
                        merger._metrics.FailedCommits.Add(1);
                    }
                },
                (this, pending));
        }

        Interlocked.Increment(ref _queueDepth);
        _queue.Enqueue(pending);
        TryBecomeCommitter(mayCommitInline: true);
    }

    /// <summary>
    /// Takes the committer role unless it is taken (CAS). When <paramref name="mayCommitInline"/> and the merger is
    /// idle (the previous group held at most one batch), commits one group on the caller's thread; otherwise runs the
    /// role as a thread-pool work item.
    /// </summary>
    /// <remarks>
    /// Measured (docs/measurements.md, "Group commit"): committing inline only when idle removes two thread hand-offs
    /// per commit for a lone writer (its commits ran 1.22x the raw write + fdatasync loop with the work item, 1.01-1.07x
    /// inline). Committing inline whenever the role was free shrank groups under load (16 writers: 8 batches per
    /// group instead of 13; 64 writers: 28 instead of 50), because a writer arriving just after a group committed alone
    /// and held one of the few pool threads in fdatasync; hence the idle condition.
    /// </remarks>
    private void TryBecomeCommitter(bool mayCommitInline)
    {
        // A full pipeline has nothing for a committer to do: the group completing next re-checks the queue (after a
        // full fence, as the caller's enqueue is one), so skipping here strands nothing and saves a work item per group.
        if (Volatile.Read(ref _inFlightCount) >= _options.MaxGroupsInFlight
            || Volatile.Read(ref _committerActive) != 0
            || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
        {
            return;
        }

        if (mayCommitInline && Volatile.Read(ref _lastGroupBatches) <= 1 && Volatile.Read(ref _inFlightCount) == 0)
        {
            CommitInline();
        }
        else
        {
            ThreadPool.UnsafeQueueUserWorkItem(static self => self.RunCommitter(), this, preferLocal: false);
        }
    }

    /// <summary>Commits one group on the caller's thread, entered holding the role (see <see cref="RunCommitter"/> for when it is given up).</summary>
    private void CommitInline()
    {
        bool holdingRole = true;
        try
        {
            InFlightGroup? group = PrepareNextGroup(); // answers its group on every path; the finally is for what nothing can answer (OOM)
            if (_options.MaxGroupsInFlight > 1)
            {
                holdingRole = false;
                ReleaseRole();
            }

            if (group is not null)
            {
                FinishGroup(group, retrigger: !holdingRole);
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
    /// The pool-side committer, entered holding the role: at most <see cref="TransactionMergerOptions.MaxGroupsPerTurn"/>
    /// groups, then it re-queues itself. One group in flight (the default): the role is kept through each group's fsync
    /// and completion, as submitters arriving meanwhile have nothing to do but wait (measured: giving it up let them
    /// take it and queue work items, and 64 writers reached 55% of the fsync-bound ceiling instead of 66-67%). Overlap:
    /// the role is given up right after the group's write (so another thread can prepare the next group while this one
    /// syncs) and taken again after the group finishes while batches are pending.
    /// </summary>
    private void RunCommitter()
    {
        bool overlap = _options.MaxGroupsInFlight > 1;
        bool holdingRole = true;
        try
        {
            for (int groups = 1; ; groups++)
            {
                InFlightGroup? group = PrepareNextGroup();
                if (overlap)
                {
                    holdingRole = false;
                    ReleaseRole();
                }

                if (group is not null)
                {
                    FinishGroup(group, retrigger: false);
                }

                if (!overlap)
                {
                    if (groups >= _options.MaxGroupsPerTurn || _queue.IsEmpty)
                    {
                        return; // the finally gives the role up, re-queueing the committer if batches are pending
                    }

                    continue;
                }

                // The re-check after freeing a slot (see the pipeline protocol), done here so the role stays on this thread.
                Interlocked.MemoryBarrier();
                if (_queue.IsEmpty)
                {
                    return;
                }

                if (groups >= _options.MaxGroupsPerTurn)
                {
                    TryBecomeCommitter(mayCommitInline: false); // a new work item: one caller's turn serves others for a bounded time
                    return;
                }

                if (Volatile.Read(ref _inFlightCount) >= _options.MaxGroupsInFlight || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
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

    /// <summary>
    /// Gives up the committer role. Stores 0 first (a full fence) and then re-checks the queue and the pipeline, so a
    /// batch enqueued just before the release (whose submitter saw the role taken) is picked up by a new work item
    /// rather than stranded; when the pipeline is full, the group completing next re-checks instead.
    /// </summary>
    private void ReleaseRole()
    {
        Interlocked.Exchange(ref _committerActive, 0);
        if (_queue.IsEmpty || Volatile.Read(ref _inFlightCount) >= _options.MaxGroupsInFlight || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
        {
            return;
        }

        ThreadPool.UnsafeQueueUserWorkItem(static self => self.RunCommitter(), this, preferLocal: false);
    }

    private void ThrowIfFaulted()
    {
        Exception? fault = Volatile.Read(ref _fault);
        if (fault is not null)
        {
            throw new StoreFaultedException("The store is faulted (the inner exception is the cause); commits fail until it is reopened.", fault);
        }
    }

    /// <summary>A batch leaves the pending set: free its bytes and wake a submitter waiting on backpressure.</summary>
    private void Release(PendingBatch pending)
    {
        Interlocked.Decrement(ref _queueDepth);
        Interlocked.Add(ref _pendingBytes, -pending.Length);
        pending.Registration.Dispose();
        pending.ReturnBuffer();
        if (Volatile.Read(ref _bytesWaiters) > 0)
        {
            _pendingBytesChanged.Release();
        }
    }

    /// <summary>
    /// Records one fsync's duration. Two syncs can finish at once (a commit group and the buffered-mode timer): the
    /// average is updated with a CAS loop so no sample is lost; the latest duration is last-writer-wins.
    /// </summary>
    private void RecordSync(TimeSpan elapsed)
    {
        _metrics.SyncDuration.Record(elapsed.TotalMilliseconds);
        long ticks = elapsed.Ticks;
        Volatile.Write(ref _lastSyncTicks, ticks);
        Interlocked.Add(ref _syncTicksTotal, ticks);
        if (Interlocked.Increment(ref _syncCount) == 1)
        {
            Volatile.Write(ref _averageSyncTicks, ticks);
            return;
        }

        long current = Volatile.Read(ref _averageSyncTicks);
        while (true)
        {
            long next = current + ((ticks - current) / 8);
            long seen = Interlocked.CompareExchange(ref _averageSyncTicks, next, current);
            if (seen == current)
            {
                return;
            }

            current = seen;
        }
    }

    /// <summary>
    /// The timer: syncs buffered commits, then lets an idle journal record its durable mark. One tick at a time: a timer
    /// does not wait for its previous callback, and each sync in flight holds one of the segment's sync slots (the
    /// slots are counted for <see cref="TransactionMergerOptions.MaxMaxGroupsInFlight"/> groups, one rotation and one
    /// timer sync), so a tick that finds the previous one still running does nothing.
    /// </summary>
    private void OnTimer()
    {
        if (Interlocked.Exchange(ref _timerRunning, 1) != 0)
        {
            return;
        }

        try
        {
            SyncBuffered();
            if (Volatile.Read(ref _disposed) == 0 && !IsFaulted)
            {
                _journal.MarkDurableIfIdle();
            }
        }
        catch (ObjectDisposedException)
        {
        }
        finally
        {
            Volatile.Write(ref _timerRunning, 0);
        }
    }

    private int _timerRunning;

    /// <summary>
    /// The buffered-mode timer: fsyncs the journal when a group was acknowledged before its fsync and is still not
    /// published, then publishes the applied groups that sync covers (never a group still in flight: the merger owns
    /// publication, see the pipeline protocol). Durable groups are synced by the committer, so in a store whose
    /// commits are all durable the timer never syncs.
    /// </summary>
    private void SyncBuffered()
    {
        if (Volatile.Read(ref _disposed) != 0 || IsFaulted || _journal.CommittedSequence >= Volatile.Read(ref _bufferedAcknowledged))
        {
            return;
        }

        TimeSpan elapsed = TimeSpan.Zero;
        bool synced;
        try
        {
            long started = Stopwatch.GetTimestamp();
            synced = _journal.TryBeginSync(out JournalSyncPoint point);
            if (synced)
            {
                _journal.CompleteSync(point);
                elapsed = Stopwatch.GetElapsedTime(started);
            }

            lock (_completionLock)
            {
                PublishDurableLocked();
            }
        }
        catch (Exception e) when (e is StoreFaultedException or ObjectDisposedException)
        {
            if (e is StoreFaultedException)
            {
                SetFault(e.InnerException ?? e);
            }

            return;
        }

        try
        {
            if (synced)
            {
                RecordSync(elapsed);
            }
        }
        catch (Exception e)
        {
            SetFault(e); // as in the committer: an unexpected failure faults the store (an exception here would end the process)
        }
    }

    /// <summary>
    /// Closes the merger, blocking: pending batches are committed (on this thread when no committer is active), groups in
    /// flight finish, and the journal is synced. Later submissions throw <see cref="ObjectDisposedException"/>.
    /// </summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }

        try
        {
            _bufferedSyncTimer?.Dispose();

            // Drain: commit whatever is pending (as the committer, or by waiting for the active one).
            var spin = new SpinWait();
            while (!_queue.IsEmpty || Volatile.Read(ref _committerActive) != 0 || Volatile.Read(ref _inFlightCount) != 0)
            {
                if (!TryCommitOneGroupWhileDraining())
                {
                    spin.SpinOnce();
                }
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
            if (_bufferedSyncTimer is not null)
            {
                await _bufferedSyncTimer.DisposeAsync().ConfigureAwait(false);
            }

            while (true)
            {
                Task[] waiting = UnansweredBatches();
                if (waiting.Length > 0)
                {
                    // Answered with an exception (a conflict, a fault, a cancellation) is answered: no throw here.
                    await Task.WhenAll(waiting).ConfigureAwait(ConfigureAwaitOptions.SuppressThrowing);
                    continue;
                }

                // Only answered batches can be left queued here (cancelled ones no committer dequeued yet): take them off.
                if (TryCommitOneGroupWhileDraining())
                {
                    continue;
                }

                if (_queue.IsEmpty && Volatile.Read(ref _committerActive) == 0 && Volatile.Read(ref _inFlightCount) == 0)
                {
                    break;
                }

                await Task.Yield(); // a committer is between answering its last group and giving up the role
            }

            CloseAfterDrain();
        }
        finally
        {
            _disposeCompleted.TrySetResult();
        }
    }

    /// <summary>
    /// While disposing: when batches are queued and no committer holds the role, takes it, commits one group on this
    /// thread and gives the role back. False when there was nothing to do or another thread holds the role.
    /// </summary>
    private bool TryCommitOneGroupWhileDraining()
    {
        if (_queue.IsEmpty || Interlocked.CompareExchange(ref _committerActive, 1, 0) != 0)
        {
            return false;
        }

        InFlightGroup? group = null;
        try
        {
            group = PrepareNextGroup();
        }
        finally
        {
            Interlocked.Exchange(ref _committerActive, 0);
        }

        if (group is not null)
        {
            FinishGroup(group, retrigger: false);
        }

        return true;
    }

    /// <summary>The tasks not yet completed of the batches still queued and of the groups in flight (a snapshot).</summary>
    private Task[] UnansweredBatches()
    {
        var waiting = new List<Task>();
        foreach (PendingBatch pending in _queue)
        {
            if (!pending.Task.IsCompleted)
            {
                waiting.Add(pending.Task);
            }
        }

        lock (_completionLock)
        {
            foreach (InFlightGroup group in _inFlight)
            {
                foreach (PendingBatch pending in group.Batches)
                {
                    if (!pending.Task.IsCompleted)
                    {
                        waiting.Add(pending.Task);
                    }
                }
            }
        }

        return [.. waiting];
    }

    /// <summary>After the drain: syncs (and so publishes) what was appended, and releases the metrics and the semaphore.</summary>
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

        _syncThread?.Dispose();
        _metrics.Dispose();
        _pendingBytesChanged.Dispose();
    }
}
