using System.Diagnostics;

namespace Folio.Tests.Infrastructure;

/// <summary>
/// Answers something on a pool thread that then blocks, as a caller's code may once its own commit returns (the first
/// waiter commits, so the thread that answers other callers is a caller's), and reports whether what the answer
/// wakes ran anyway. While it runs, it keeps the pool's global queue from ever being empty (work items that spin a
/// few microseconds and queue themselves again): a pool thread steals from another thread's local queue only when its
/// own and the global queue are empty, so a continuation the answer left in the blocked thread's local queue stays
/// there until the block ends, and one it queued globally runs within a few items. Other tests' work is delayed by
/// at most the items ahead of it while a trap runs (a few milliseconds when the continuation is found).
/// </summary>
internal static class LocalQueueTrap
{
    private const int FloodItems = 64;

    /// <summary>How long the answering thread blocks waiting for <c>woken</c> before the trap calls it stuck.</summary>
    private static readonly TimeSpan s_patience = TimeSpan.FromSeconds(10);

    /// <summary>Runs <paramref name="answer"/> on a pool thread, then blocks that thread until
    /// <paramref name="woken"/> is true or 10 s pass; returns whether it became true.</summary>
    public static Task<bool> RunAsync(Action answer, Func<bool> woken)
    {
        var flood = new Flood();
        flood.Start();
        var result = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        ThreadPool.UnsafeQueueUserWorkItem<object?>(_ =>
        {
            try
            {
                answer();
                bool seen = SpinWait.SpinUntil(woken, s_patience);
                flood.Stop();
                result.SetResult(seen);
            }
            catch (Exception e)
            {
                flood.Stop();
                result.SetException(e);
            }
        }, null, preferLocal: false);
        return result.Task;
    }

    private sealed class Flood
    {
        private volatile bool _stopped;

        public void Start()
        {
            for (int i = 0; i < FloodItems; i++)
            {
                ThreadPool.UnsafeQueueUserWorkItem(static flood => flood.Run(), this, preferLocal: false);
            }
        }

        public void Stop() => _stopped = true;

        private void Run()
        {
            if (_stopped)
            {
                return;
            }

            long until = Stopwatch.GetTimestamp() + Stopwatch.Frequency / 50_000;
            while (Stopwatch.GetTimestamp() < until)
            {
                Thread.SpinWait(20);
            }

            ThreadPool.UnsafeQueueUserWorkItem(static flood => flood.Run(), this, preferLocal: false);
        }
    }
}
