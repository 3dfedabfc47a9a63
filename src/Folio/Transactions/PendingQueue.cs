using System.Collections.Concurrent;
using Folio.Diagnostics;

namespace Folio.Transactions;

/// <summary>
/// The batches submitted and not yet answered, in arrival order, with the counters that bound them.
/// <para>
/// Owners. Submitters (any thread) reserve a batch's bytes (<see cref="TryReserveBytes"/>: a CAS loop, so the bound on
/// pending bytes holds exactly) and enqueue it (<see cref="Enqueue"/>: the depth is counted before the batch enters the
/// lock-free queue, so it never undercounts a queued batch). The committer, the one thread holding the committer role,
/// alone peeks and dequeues. Whoever answers a batch (the committer for a failed precondition, the thread completing
/// its group, the caller's cancellation callback, a fault path) releases it first (<see cref="Release"/>: depth and
/// bytes down, its buffer back to the pool, a waiting submitter woken) and then completes its task;
/// <see cref="PendingBatch"/>'s one-way state CAS (taken, or cancelled) lets exactly one of them. So a batch counts in
/// <see cref="Depth"/> from its submission until it is answered, queued or in a group.
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
    private int _bytesWaiters;

    /// <summary>Batches submitted and not yet answered (queued or in a group).</summary>
    public long Depth => Volatile.Read(ref _depth);

    /// <summary>Whether no batch is queued (a moment later one may be).</summary>
    public bool IsEmpty => _queue.IsEmpty;

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
        Interlocked.Increment(ref _depth);
        _queue.Enqueue(pending);
    }

    /// <summary>The oldest queued batch (committer only).</summary>
    public bool TryPeek(out PendingBatch pending) => _queue.TryPeek(out pending!);

    /// <summary>Takes the oldest queued batch off the queue (committer only).</summary>
    public bool TryDequeue(out PendingBatch pending) => _queue.TryDequeue(out pending!);

    /// <summary>A batch leaves the pending set, just before it is answered: frees its bytes and wakes a waiting
    /// submitter.</summary>
    public void Release(PendingBatch pending)
    {
        Interlocked.Decrement(ref _depth);
        Interlocked.Add(ref _pendingBytes, -pending.Length);
        pending.Registration.Dispose();
        pending.ReturnBuffer();
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
    public void FailUnanswered(List<PendingBatch> batches, Func<int, StoreFaultedException> errorFor)
    {
        int failed = 0;
        for (int i = 0; i < batches.Count; i++)
        {
            PendingBatch pending = batches[i];
            if (!pending.Task.IsCompleted)
            {
                // every path that answers a batch releases it just before: unanswered means unreleased
                Release(pending);
                pending.TrySetException(errorFor(i));
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
        while (_queue.TryDequeue(out PendingBatch? pending))
        {
            if (pending.TryTake())
            {
                Release(pending);
                pending.TrySetException(CommitFault.NotDurable(cause));
                failed++;
            }
        }

        RecordFailed(failed);
    }

    /// <summary>Adds the tasks not yet completed of the queued batches to <paramref name="waiting"/> (a
    /// snapshot).</summary>
    public void CollectUnanswered(List<Task> waiting)
    {
        foreach (PendingBatch pending in _queue)
        {
            if (!pending.Task.IsCompleted)
            {
                waiting.Add(pending.Task);
            }
        }
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
