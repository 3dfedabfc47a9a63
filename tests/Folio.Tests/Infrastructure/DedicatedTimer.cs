namespace Folio.Tests.Infrastructure;

/// <summary>
/// Stops stress loops from a thread of its own. A <see cref="CancellationTokenSource"/> timer and an awaited
/// <see cref="Task.Delay(TimeSpan)"/> both need a thread-pool thread (and an awaiting test its xunit context thread) to
/// run, and loops whose awaits complete synchronously can keep those busy: a buffered writer that was to stop after
/// three seconds once wrote for ten minutes.
/// </summary>
internal static class DedicatedTimer
{
    /// <summary>
    /// A token source cancelled after <paramref name="delay"/>, and then, while <paramref name="extendWhile"/> holds, a
    /// while longer (at most <paramref name="maxExtension"/>): polled every 50 ms on a dedicated background thread.
    /// </summary>
    public static CancellationTokenSource CancelAfter(TimeSpan delay, Func<bool>? extendWhile = null,
        TimeSpan maxExtension = default)
    {
        var source = new CancellationTokenSource();
        var thread = new Thread(() =>
        {
            Thread.Sleep(delay);
            var extension = System.Diagnostics.Stopwatch.StartNew();
            while (extendWhile is not null && extendWhile() && extension.Elapsed < maxExtension)
            {
                Thread.Sleep(50);
            }

            try
            {
                source.Cancel();
            }
            catch (ObjectDisposedException)
            {
            }
        })
        {
            IsBackground = true,
            Name = "DedicatedTimer",
        };
        thread.Start();
        return source;
    }
}
