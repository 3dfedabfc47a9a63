using System.Collections.Concurrent;
using System.Diagnostics;
using Folio.Diagnostics;

namespace Folio.Transactions;

/// <summary>
/// The batches submitted and not yet answered, in arrival order, with the counters that bound them.
/// <para>
/// Owners. Submitters (any thread) reserve a batch's bytes (<see cref="TryReserveBytes"/>: a CAS loop, so the bound on
/// pending bytes holds exactly) and enqueue it (<see cref="Enqueue"/>: the depth is counted before the batch enters the
/// lock-free queue, so it never undercounts a queued batch). The committer, the one thread holding the committer role,
/// alone takes batches off (<see cref="TryTakeNext"/>) and holds back the one that did not fit its group
/// (<see cref="HoldBack"/>): the held batch stays queued in every other sense, ahead of the queue, until the next group
/// takes it. It is written only by the role's holder (the role's interlocked hand-off orders one holder's write before
/// the next holder's read) and read by other threads only through <see cref="IsEmpty"/> (a volatile read), the hint
/// the role's hand-off re-checks after its fences. The queue is never peeked: <see cref="ConcurrentQueue{T}.TryPeek"/>
/// marks a segment preserved for observation, after which its dequeued slots keep their batches (every batch's
/// command list and entry) alive until the segment is dropped, and new segments stop growing past 32 slots. Whoever
/// answers a batch (the committer for a failed precondition, the thread completing its group, the caller's
/// cancellation callback, a fault path) does it here (<see cref="TryAnswer"/>,
/// <see cref="TryFail"/>): the batch's one-way answer CAS picks one of them, which releases the batch (depth and bytes
/// down, its buffer back to the pool, a waiting submitter woken), sets the caller's result, and then counts it
/// answered. So a batch counts in <see cref="Depth"/> from its submission until it is about to be answered, queued or
/// in a group, and in the unanswered count until its caller's wait is complete.
/// </para>
/// <para>
/// Draining. <see cref="WhenAllAnsweredAsync"/> publishes a signal (an interlocked exchange, a full fence) and then
/// reads the unanswered count; an answer decrements the count (interlocked, a full fence) and then reads the signal.
/// Whichever runs second sees the other's write, so the last answer never misses a waiting disposer.
/// </para>
/// <para>
/// <see cref="Depth"/> is a hint (a Volatile read): the group fill and the queue-depth metric use it, no correctness
/// depends on it. A submitter that finds the byte bound full waits on a semaphore that every release signals while a
/// waiter is counted (<see cref="WaitForBytesAsync"/>, with a timeout, so a signal given between a waiter's count and
/// its wait delays it at most that long).
/// </para>
/// </summary>
internal sealed class PendingQueue(long maxPendingBytes, FolioMetrics metrics) : IDisposable
{
    private readonly ConcurrentQueue<PendingBatch> _queue = new();
    private readonly SemaphoreSlim _bytesReleased = new(0);
    private long _pendingBytes;
    private long _depth;
    private long _unanswered;
    private int _bytesWaiters;
    private TaskCompletionSource? _allAnswered;
    private PendingBatch? _held;

    /// <summary>Batches submitted and not yet answered (queued or in a group).</summary>
    public long Depth => Volatile.Read(ref _depth);

    /// <summary>Whether no batch is queued, held back included (a moment later one may be).</summary>
    public bool IsEmpty => Volatile.Read(ref _held) is null && _queue.IsEmpty;

    /// <summary>Counts a batch's bytes as pending unless that would pass the bound (a batch alone always
    /// fits).</summary>
    public bool TryReserveBytes(int length)
    {
        long current = Volatile.Read(ref _pendingBytes);
        while (current == 0 || current + length <= maxPendingBytes)
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

    /// <summary>Waits until a batch is released (or <paramref name="timeout"/> passes), to try the bound
    /// again.</summary>
    public async Task WaitForBytesAsync(TimeSpan timeout, CancellationToken cancellationToken)
    {
        Interlocked.Increment(ref _bytesWaiters);
        try
        {
            await _bytesReleased.WaitAsync(timeout, cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            Interlocked.Decrement(ref _bytesWaiters);
        }
    }

    /// <summary>Queues a batch whose bytes are reserved.</summary>
    public void Enqueue(PendingBatch pending)
    {
        Interlocked.Increment(ref _unanswered);
        Interlocked.Increment(ref _depth);
        _queue.Enqueue(pending);
    }

    /// <summary>Takes the oldest queued batch (committer only): the one held back, else the queue's head.</summary>
    public bool TryTakeNext(out PendingBatch pending)
    {
        if (_held is { } held)
        {
            Volatile.Write(ref _held, null);
            pending = held;
            return true;
        }

        return _queue.TryDequeue(out pending!);
    }

    /// <summary>Puts back the batch <see cref="TryTakeNext"/> just returned, to be taken first next time (committer
    /// only; at most one is held).</summary>
    public void HoldBack(PendingBatch pending)
    {
        Debug.Assert(_held is null, "one batch is held back at most");
        Volatile.Write(ref _held, pending);
    }

    /// <summary>
    /// Completes the batch's wait with <paramref name="result"/> unless another thread answered it: releases it first,
    /// then sets the result (continuations run on the pool, not on this thread).
    /// </summary>
    public bool TryAnswer(PendingBatch pending, CommitResult result)
    {
        if (!pending.TryClaimAnswer())
        {
            return false;
        }

        Release(pending);
        pending.SetResult(result);
        CountAnswered();
        return true;
    }

    /// <summary>Fails the batch's wait with <paramref name="error"/> unless another thread answered it.</summary>
    public bool TryFail(PendingBatch pending, Exception error)
    {
        if (!pending.TryClaimAnswer())
        {
            return false;
        }

        Release(pending);
        pending.SetException(error);
        CountAnswered();
        return true;
    }

    /// <summary>Completes when every batch submitted so far is answered (a drain waits on it, then looks
    /// again).</summary>
    public Task WhenAllAnsweredAsync()
    {
        var signal = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        Interlocked.Exchange(ref _allAnswered, signal);
        if (Volatile.Read(ref _unanswered) == 0)
        {
            signal.TrySetResult();
        }

        return signal.Task;
    }

    private void CountAnswered()
    {
        if (Interlocked.Decrement(ref _unanswered) == 0 && Volatile.Read(ref _allAnswered) is { } signal)
        {
            signal.TrySetResult();
        }
    }

    /// <summary>A batch leaves the pending set, just before it is answered: takes its bytes off the bound and wakes a
    /// waiting submitter.</summary>
    private void Release(PendingBatch pending)
    {
        Interlocked.Decrement(ref _depth);
        Interlocked.Add(ref _pendingBytes, -pending.Length);
        pending.Registration.Dispose();
        if (Volatile.Read(ref _bytesWaiters) > 0)
        {
            _bytesReleased.Release();
        }
    }

    /// <summary>
    /// Answers every batch of <paramref name="batches"/> not answered yet with <paramref name="errorFor"/>(its index in
    /// the list: for a written group, its offset from the group's first sequence). Throws nothing: the failed-commits
    /// metric goes through <see cref="ObserverGuard"/>.
    /// </summary>
    public void FailUnanswered(List<PendingBatch> batches, Func<int, Exception> errorFor)
    {
        int failed = 0;
        for (int i = 0; i < batches.Count; i++)
        {
            PendingBatch pending = batches[i];
            if (!pending.IsAnswered && TryFail(pending, errorFor(i)))
            {
                failed++;
            }
        }

        RecordFailed(failed);
    }

    /// <summary>Fails every queued batch with <see cref="CommitFault.NotDurable"/>(<paramref name="cause"/>) (committer
    /// only: the store is faulted). Throws nothing.</summary>
    public void FailAll(Exception cause)
    {
        int failed = 0;
        while (TryTakeNext(out PendingBatch pending))
        {
            if (pending.TryTake() && TryFail(pending, CommitFault.NotDurable(cause)))
            {
                failed++;
            }
        }

        RecordFailed(failed);
    }

    /// <summary>Adds <paramref name="failed"/> to the failed-commits metric from a failure path.</summary>
    public void RecordFailed(int failed)
    {
        if (failed > 0)
        {
            ObserverGuard.Run(static state => state.Metrics.FailedCommits.Add(state.Failed),
                (Metrics: metrics, Failed: failed));
        }
    }

    public void Dispose() => _bytesReleased.Dispose();
}
