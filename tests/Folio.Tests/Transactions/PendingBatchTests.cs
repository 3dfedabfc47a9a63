using System.Runtime.CompilerServices;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

/// <summary>
/// Where a commit's answer sends the continuation of the caller awaiting it. The answering thread is usually another
/// caller's (the first waiter commits), which goes back to that caller's code next; if that code blocks, a continuation
/// left in the thread's local queue waits for it while every other pool thread finds work elsewhere (measured from the
/// outside: a caller sleeping after its await held other callers' acknowledgments for up to a second).
/// </summary>
public sealed class PendingBatchTests
{
    private static readonly AsyncLocal<string> s_flowed = new();

    private static PendingBatch NewBatch()
    {
        CommitBatch batch = new CommitBatch().Put("people", "a", "{}"u8.ToArray());
        return new PendingBatch(batch, BatchEncoding.Encode(batch), durable: true);
    }

    private static void Answer(PendingBatch pending)
    {
        Assert.True(pending.TryClaimAnswer());
        pending.SetResult(new CommitResult(7, 1));
    }

    [Fact]
    public async Task An_answer_given_on_a_pool_thread_that_then_blocks_still_wakes_the_waiting_caller()
    {
        PendingBatch pending = NewBatch();
        ValueTask<CommitResult> waiting = pending.AsValueTask();
        int woken = 0;
        int answeredOn = 0;
        // What an await with ConfigureAwait(false) registers: no context, no execution context to flow.
        Register(waiting, () => Volatile.Write(ref woken, Environment.CurrentManagedThreadId), flowContext: false,
            captureContext: false);

        Assert.True(await LocalQueueTrap.RunAsync(() =>
        {
            answeredOn = Environment.CurrentManagedThreadId;
            Answer(pending);
        }, () => Volatile.Read(ref woken) != 0),
            "the continuation waited in the blocked answering thread's local queue");
        Assert.NotEqual(answeredOn, woken); // never inline: the answering thread may hold the committer role
    }

    [Fact]
    public async Task A_continuation_that_flows_its_execution_context_runs_in_the_callers_context_not_the_answerers()
    {
        PendingBatch pending = NewBatch();
        ValueTask<CommitResult> waiting = pending.AsValueTask();
        string? seen = null;
        s_flowed.Value = "caller";
        Register(waiting, () => Volatile.Write(ref seen, s_flowed.Value ?? "none"), flowContext: true,
            captureContext: false);
        s_flowed.Value = "other";

        Assert.True(await LocalQueueTrap.RunAsync(() =>
        {
            s_flowed.Value = "answerer";
            Answer(pending);
        }, () => Volatile.Read(ref seen) is not null));
        Assert.Equal("caller", seen);
    }

    [Fact]
    public async Task A_continuation_registered_after_the_answer_still_runs_with_the_callers_context()
    {
        PendingBatch pending = NewBatch();
        ValueTask<CommitResult> waiting = pending.AsValueTask();
        Answer(pending);
        var seen = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        s_flowed.Value = "late caller";
        // The awaiter registers with the source even when the answer came first (an await checks IsCompleted before
        // it registers, so this is the race where the answer lands between the two).
        Register(waiting, () => seen.SetResult(s_flowed.Value ?? "none"), flowContext: true, captureContext: false);
        s_flowed.Value = "other";

        Assert.Equal("late caller", await seen.Task.WaitAsync(TestDeadline.Hang));
    }

    [Fact]
    public async Task A_caller_awaiting_under_a_synchronization_context_is_resumed_through_that_context()
    {
        PendingBatch pending = NewBatch();
        ValueTask<CommitResult> waiting = pending.AsValueTask();
        var context = new RecordingContext();
        var resumedOn = new TaskCompletionSource<SynchronizationContext?>(
            TaskCreationOptions.RunContinuationsAsynchronously);
        SynchronizationContext? previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(context);
        try
        {
            // A plain await (continueOnCapturedContext: true), as UI code or classic ASP.NET would write it.
            Register(waiting, () => resumedOn.SetResult(SynchronizationContext.Current), flowContext: false,
                captureContext: true);
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }

        await Task.Run(() => Answer(pending));
        Assert.Same(context, await resumedOn.Task.WaitAsync(TestDeadline.Hang));
        Assert.Equal(1, context.Posts);
    }

    /// <summary>Registers <paramref name="continuation"/> as an awaiter does: with or without the caller's execution
    /// context (OnCompleted or UnsafeOnCompleted) and scheduling context (ConfigureAwait).</summary>
#pragma warning disable CA2012, CA2007 // the test registers with the value task's source directly, as an awaiter does
    private static void Register(ValueTask<CommitResult> waiting, Action continuation, bool flowContext,
        bool captureContext)
    {
        ConfiguredValueTaskAwaitable<CommitResult>.ConfiguredValueTaskAwaiter awaiter =
            waiting.ConfigureAwait(captureContext).GetAwaiter();
        if (flowContext)
        {
            awaiter.OnCompleted(continuation);
        }
        else
        {
            awaiter.UnsafeOnCompleted(continuation);
        }
    }
#pragma warning restore CA2012, CA2007

    /// <summary>Runs what is posted to it on a pool thread with itself as the current context, and counts the
    /// posts.</summary>
    private sealed class RecordingContext : SynchronizationContext
    {
        private int _posts;

        public int Posts => Volatile.Read(ref _posts);

        public override void Post(SendOrPostCallback callback, object? state)
        {
            Interlocked.Increment(ref _posts);
            ThreadPool.QueueUserWorkItem(_ =>
            {
                SetSynchronizationContext(this);
                callback(state);
            });
        }
    }
}
