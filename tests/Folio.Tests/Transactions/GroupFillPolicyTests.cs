using FsCheck.Xunit;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

/// <summary>The group fill's decisions, with made-up counters and times (<see cref="GroupFillPolicy"/> reads no
/// clock).</summary>
public sealed class GroupFillPolicyTests
{
    private const long Stall = 20;

    [Theory]
    [InlineData(1, 48, 10, 0, 0, 58)] // one group at a time: the last group's writers plus the stragglers
    [InlineData(1, 0, 0, 500, 500, 0)]
    [InlineData(1, int.MaxValue, 5, 0, 0, int.MaxValue)] // saturates instead of wrapping
    [InlineData(2, 9, 9, 64, 10, 32)] // a pipeline of two: the writers seen, split in two groups
    [InlineData(2, 9, 9, 10, 65, 33)] // the larger of the writers seen at the last take and now, rounded up
    [InlineData(4, 0, 0, 1, 0, 1)]
    public void The_target_is_the_writers_expected_back(int depth, int lastGroup, int stragglers, long writersSeen,
        long queueDepth, int expected)
    {
        Assert.Equal(expected, GroupFillPolicy.Target(depth, lastGroup, stragglers, writersSeen, queueDepth));
    }

    [Theory]
    [InlineData(0, 1, 0.25, false, false)] // a target of one never waits
    [InlineData(10, 10, 0.25, false, false)] // reached
    [InlineData(3, 10, 0, false, false)] // waiting turned off
    [InlineData(3, 10, 0.25, true, false)] // faulted
    [InlineData(3, 10, 0.25, false, true)]
    public void A_fill_waits_only_for_a_target_not_reached(long pending, int target, double fraction, bool faulted,
        bool waits)
    {
        Assert.Equal(waits, GroupFillPolicy.ShouldWait(pending, target, fraction, faulted));
    }

    [Fact]
    public void The_budget_is_the_fraction_of_the_average_fsync_in_stopwatch_ticks()
    {
        long budget = GroupFillPolicy.Budget(TimeSpan.FromMilliseconds(1), 0.25);
        Assert.Equal(System.Diagnostics.Stopwatch.Frequency / 4000, budget);
    }

    [Fact]
    public void A_fill_stops_when_the_target_is_reached()
    {
        var fill = new GroupFillPolicy(now: 0, pending: 2, target: 5, budgetTicks: 1000, stallTicks: Stall);
        Assert.True(fill.KeepWaiting(1, 3));
        Assert.True(fill.KeepWaiting(2, 4));
        Assert.False(fill.KeepWaiting(3, 5));
    }

    [Fact]
    public void A_fill_stops_after_the_stall_time_without_a_new_batch_and_each_arrival_restarts_it()
    {
        var fill = new GroupFillPolicy(now: 0, pending: 2, target: 50, budgetTicks: 1000, stallTicks: Stall);
        Assert.True(fill.KeepWaiting(Stall - 1, 2));
        Assert.True(fill.KeepWaiting(Stall + 5, 3)); // an arrival just in time restarts the stall clock
        Assert.True(fill.KeepWaiting((2 * Stall) + 4, 3));
        Assert.False(fill.KeepWaiting((2 * Stall) + 5, 3));
    }

    [Fact]
    public void A_fill_stops_at_its_deadline_however_steadily_batches_arrive()
    {
        var fill = new GroupFillPolicy(now: 100, pending: 0, target: 1000, budgetTicks: 50, stallTicks: Stall);
        long now = 100;
        int pending = 0;
        while (fill.KeepWaiting(now, pending))
        {
            now += 5;
            pending++;
            Assert.True(now <= 150, "the wait outlived its budget");
        }

        Assert.Equal(150, now);
    }

    /// <summary>Whatever the arrivals, a fill never waits past its deadline nor past a stall, and always stops at the
    /// target.</summary>
    [Property(MaxTest = 300)]
    public void A_fill_never_outlives_its_deadline_or_a_stall(byte[] steps, byte target, byte budget)
    {
        var fill = new GroupFillPolicy(now: 0, pending: 0, target: target + 2, budgetTicks: budget, stallTicks: Stall);
        long now = 0;
        long pending = 0;
        long lastArrival = 0;
        foreach (byte step in steps)
        {
            now += step % 16;
            if (step >= 128)
            {
                pending++;
                lastArrival = now;
            }

            bool keep = fill.KeepWaiting(now, pending);
            bool expected = pending < target + 2 && now < budget && now - lastArrival < Stall;
            Assert.Equal(expected, keep);
            if (!keep)
            {
                return;
            }
        }
    }
}
