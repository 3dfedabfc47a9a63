using Folio.Diagnostics;

namespace Folio.Transactions;

/// <summary>
/// Durations of the journal fsyncs the merger made, for diagnostics, the sync-duration metric and the group fill's
/// budget (a fraction of the average fsync).
/// <para>
/// Owners. Written by whichever thread finished a sync: the thread completing a commit group, or the buffered-sync
/// timer, so two can record at once. The count and total are <see cref="Interlocked"/> adds, the average is updated
/// with a CAS loop so no sample is lost, the latest duration is last-writer-wins; readers use Volatile reads and may
/// see a count and a total of different moments (diagnostics only).
/// </para>
/// </summary>
internal sealed class SyncStatistics(FolioMetrics metrics)
{
    private long _count;
    private long _totalTicks;
    private long _lastTicks;
    private long _averageTicks;

    /// <summary>Fsyncs recorded.</summary>
    public long Count => Volatile.Read(ref _count);

    /// <summary>Total time in the fsyncs recorded.</summary>
    public TimeSpan Total => TimeSpan.FromTicks(Volatile.Read(ref _totalTicks));

    /// <summary>Duration of the latest fsync.</summary>
    public TimeSpan Last => TimeSpan.FromTicks(Volatile.Read(ref _lastTicks));

    /// <summary>Exponentially weighted average (weight 1/8 per sample) of fsync durations.</summary>
    public TimeSpan Average => TimeSpan.FromTicks(Volatile.Read(ref _averageTicks));

    /// <summary>Records one fsync's duration.</summary>
    public void Record(TimeSpan elapsed)
    {
        GuardedInstruments.Record(metrics.SyncDuration, elapsed.TotalMilliseconds);
        long ticks = elapsed.Ticks;
        Volatile.Write(ref _lastTicks, ticks);
        Interlocked.Add(ref _totalTicks, ticks);
        if (Interlocked.Increment(ref _count) == 1)
        {
            Volatile.Write(ref _averageTicks, ticks);
            return;
        }

        long current = Volatile.Read(ref _averageTicks);
        while (true)
        {
            long next = current + ((ticks - current) / 8);
            long seen = Interlocked.CompareExchange(ref _averageTicks, next, current);
            if (seen == current)
            {
                return;
            }

            current = seen;
        }
    }
}
