using System.Threading.Tasks.Sources;

namespace Folio.Transactions;

/// <summary>
/// A submitted batch waiting for its group, and the source of the value task its caller awaits (no Task is allocated:
/// a write through <see cref="DocumentStore.PutAsync"/> costs this one object).
/// <para>
/// Owners. <see cref="_state"/> moves once, by CAS, from Waiting to either Taken (the committer put it in a group; it
/// will complete with the group's outcome, whatever the caller's token does) or Cancelled (the caller's token fired
/// first; the committer skips it). <see cref="_answered"/> moves once, by CAS, from 0 to 1: the one thread that wins
/// it (<see cref="PendingQueue.TryAnswer"/>, <see cref="PendingQueue.TryFail"/>) releases the batch and then sets the
/// result or the exception. The value task may be awaited once, as any value task.
/// </para>
/// <para>
/// Continuations. Never on the answering thread, which may hold the committer role or the pipeline's lock, and never
/// in its local queue either: that thread is usually another caller's (the first waiter commits) and goes back to
/// that caller's code next, which may block, and a pool thread steals from another's local queue only when it finds
/// no other work, so under load a continuation left there waited as long as the block. <see cref="OnCompleted"/>
/// keeps the caller's continuation in <see cref="_continuation"/> and registers <see cref="QueueContinuation"/> with
/// the core, which runs it inline at the answer (inside the caller's execution context when that flows) to queue the
/// continuation to the pool's global queue. The fields are written before the core's registration CAS publishes
/// the callback and read by the callback the core invokes after it sees it: the core's own publication of its
/// continuation state. A caller with a scheduling context (a UI thread's, a custom scheduler) is resumed through it
/// by the core, which always posts.
/// </para>
/// </summary>
internal sealed class PendingBatch : IValueTaskSource<CommitResult>, IValueTaskSource<long>
{
    private const int Waiting = 0;
    private const int Taken = 1;
    private const int Cancelled = 2;

    private static readonly Action<object?> s_queueContinuation = QueueContinuation;

    private ManualResetValueTaskSourceCore<CommitResult> _core;
    private Action<object?>? _continuation;
    private object? _continuationState;
    private bool _flowContext;
    private int _state;
    private int _answered;
    private readonly ReadOnlyMemory<byte> _encoded;

    public PendingBatch(CommitBatch batch, ReadOnlyMemory<byte> encoded, bool durable)
    {
        Batch = batch;
        _encoded = encoded;
        Durable = durable;
        CommandCount = batch.Commands.Count;
    }

    public CommitBatch Batch { get; }

    /// <summary>The length of the encoded entry.</summary>
    public int Length => _encoded.Length;

    public int CommandCount { get; }

    public bool Durable { get; }

    public CancellationTokenRegistration Registration { get; set; }

    /// <summary>The batch's journal entry (<see cref="BatchEncoding"/>); the committed state keeps its values as slices
    /// of it, so it is never reused.</summary>
    public ReadOnlyMemory<byte> Encoded => _encoded;

    /// <summary>Whether a thread has taken the answer (it is set, or about to be).</summary>
    public bool IsAnswered => Volatile.Read(ref _answered) != 0;

    /// <summary>The commit, as the caller awaits it.</summary>
    public ValueTask<CommitResult> AsValueTask() => new(this, _core.Version);

    /// <summary>The commit's sequence number, as the caller awaits it.</summary>
    public ValueTask<long> AsSequenceTask() => new(this, _core.Version);

    /// <summary>The committer takes the batch into a group unless it was cancelled.</summary>
    public bool TryTake() => Interlocked.CompareExchange(ref _state, Taken, Waiting) == Waiting;

    /// <summary>The caller's token fired: cancel unless already taken.</summary>
    public bool TryCancel() => Interlocked.CompareExchange(ref _state, Cancelled, Waiting) == Waiting;

    /// <summary>Takes the right to answer (once); the winner calls <see cref="SetResult"/> or
    /// <see cref="SetException"/>.</summary>
    public bool TryClaimAnswer() => Interlocked.CompareExchange(ref _answered, 1, 0) == 0;

    /// <summary>Completes the caller's wait with <paramref name="result"/> (after
    /// <see cref="TryClaimAnswer"/>).</summary>
    public void SetResult(CommitResult result) => _core.SetResult(result);

    /// <summary>Fails the caller's wait with <paramref name="error"/> (after <see cref="TryClaimAnswer"/>).</summary>
    public void SetException(Exception error) => _core.SetException(error);

    CommitResult IValueTaskSource<CommitResult>.GetResult(short token) => _core.GetResult(token);

    ValueTaskSourceStatus IValueTaskSource<CommitResult>.GetStatus(short token) => _core.GetStatus(token);

    void IValueTaskSource<CommitResult>.OnCompleted(Action<object?> continuation, object? state, short token,
        ValueTaskSourceOnCompletedFlags flags) =>
        OnCompleted(continuation, state, token, flags);

    long IValueTaskSource<long>.GetResult(short token) => _core.GetResult(token).Sequence;

    ValueTaskSourceStatus IValueTaskSource<long>.GetStatus(short token) => _core.GetStatus(token);

    void IValueTaskSource<long>.OnCompleted(Action<object?> continuation, object? state, short token,
        ValueTaskSourceOnCompletedFlags flags) =>
        OnCompleted(continuation, state, token, flags);

    private void OnCompleted(Action<object?> continuation, object? state, short token,
        ValueTaskSourceOnCompletedFlags flags)
    {
        if ((flags & ValueTaskSourceOnCompletedFlags.UseSchedulingContext) != 0 && HasSchedulingContext())
        {
            // The caller's context (a UI thread's, a custom scheduler) runs the continuation: the core posts to it.
            _core.OnCompleted(continuation, state, token, flags);
            return;
        }

        _continuation = continuation;
        _continuationState = state;
        _flowContext = (flags & ValueTaskSourceOnCompletedFlags.FlowExecutionContext) != 0;
        _core.OnCompleted(s_queueContinuation, this, token, flags);
    }

    private static bool HasSchedulingContext() =>
        (SynchronizationContext.Current is { } context && context.GetType() != typeof(SynchronizationContext))
        || TaskScheduler.Current != TaskScheduler.Default;

    /// <summary>Runs on the answering thread (inside the caller's execution context when it flows): queues the
    /// caller's continuation to the pool's global queue, never the answering thread's local queue.</summary>
    private static void QueueContinuation(object? state)
    {
        var batch = (PendingBatch)state!;
        Action<object?> continuation = batch._continuation!;
        object? continuationState = batch._continuationState;
        if (batch._flowContext)
        {
            ThreadPool.QueueUserWorkItem(continuation, continuationState, preferLocal: false);
        }
        else
        {
            ThreadPool.UnsafeQueueUserWorkItem(continuation, continuationState, preferLocal: false);
        }
    }
}
