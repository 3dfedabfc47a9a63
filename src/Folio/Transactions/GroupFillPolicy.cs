using System.Diagnostics;

namespace Folio.Transactions;

/// <summary>
/// How long the committer lets a group fill before it takes it. Pure: it reads no clock and no shared state (the
/// committer passes the counters and times it read), so it is unit-tested with made-up numbers.
/// <para>
/// fdatasync dominates a group's cost, so before taking the next group the committer lets the writers it just
/// acknowledged come back: while fewer batches are pending than the fill target (<see cref="Target"/>), it waits
/// (spinning and yielding, never sleeping: the waits are tens of microseconds) up to a fraction of the average fsync
/// (<see cref="TransactionMergerOptions.GroupFillWait"/>), and stops as soon as the target is reached or no new batch
/// arrived for <see cref="StallTicks"/>. The counters it gets are hints read one after another: a stale value costs at
/// most one short wait or one smaller group, never correctness.
/// </para>
/// </summary>
internal struct GroupFillPolicy
{
    /// <summary>How long the fill waits without a new batch before it stops: 20 µs, in Stopwatch ticks.</summary>
    public static readonly long StallTicks = Stopwatch.Frequency / 50_000;

    private readonly int _target;
    private readonly long _deadline;
    private readonly long _stallTicks;
    private long _seen;
    private long _lastArrival;

    /// <summary>Starts a fill at <paramref name="now"/> with <paramref name="pending"/> batches pending.</summary>
    /// <param name="now">The time (Stopwatch ticks).</param>
    /// <param name="pending">Batches pending now.</param>
    /// <param name="target">The fill target (<see cref="Target"/>).</param>
    /// <param name="budgetTicks">The longest wait (<see cref="Budget"/>).</param>
    /// <param name="stallTicks">How long without an arrival ends the wait.</param>
    public GroupFillPolicy(long now, long pending, int target, long budgetTicks, long stallTicks)
    {
        _target = target;
        _deadline = now + budgetTicks;
        _stallTicks = stallTicks;
        _seen = pending;
        _lastArrival = now;
    }

    /// <summary>
    /// How many pending batches the fill waits for. One group at a time: as many as the previous group held (its
    /// writers coming back) plus the stragglers, the batches that arrived after it was taken and waited through its
    /// fsync (counted before its acknowledgements, when none of its writers can be back yet). Without them the target
    /// settled at the previous group's size, and the same few late writers missed every group. With a pipeline of N
    /// groups: the writers seen at once (batches in flight plus pending, the larger of now and the previous take)
    /// divided by N, so the writers settle into N groups that alternate, each preparing and syncing while the others
    /// sync, instead of one group that holds everybody while the pipeline idles.
    /// </summary>
    public static int Target(int maxGroupsInFlight, int lastGroupBatches, int stragglers, long writersSeen, long depth)
    {
        if (maxGroupsInFlight == 1)
        {
            return (int)Math.Min(int.MaxValue, (long)lastGroupBatches + stragglers);
        }

        long writers = Math.Max(writersSeen, depth);
        return (int)Math.Min(int.MaxValue, (writers + maxGroupsInFlight - 1) / maxGroupsInFlight);
    }

    /// <summary>Whether to wait at all: a target above one not reached yet, a positive wait fraction, no
    /// fault.</summary>
    public static bool ShouldWait(long pending, int target, double groupFillWait, bool faulted) =>
        target > 1 && pending < target && groupFillWait > 0 && !faulted;

    /// <summary>The longest wait in Stopwatch ticks: <paramref name="groupFillWait"/> of the average fsync.</summary>
    public static long Budget(TimeSpan averageSync, double groupFillWait) =>
        (long)(averageSync.Ticks * groupFillWait * Stopwatch.Frequency / TimeSpan.TicksPerSecond);

    /// <summary>
    /// Whether to keep waiting at <paramref name="now"/> with <paramref name="pending"/> batches pending: not once the
    /// target is reached, the deadline passed, or <see cref="StallTicks"/> went by since the last new batch.
    /// </summary>
    public bool KeepWaiting(long now, long pending)
    {
        if (pending >= _target)
        {
            return false;
        }

        if (pending > _seen)
        {
            _seen = pending;
            _lastArrival = now;
        }

        return now < _deadline && now - _lastArrival < _stallTicks;
    }
}
