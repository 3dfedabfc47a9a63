using System.Collections.Concurrent;
using System.Diagnostics.Metrics;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

public sealed class TransactionMetricsTests
{
    [Fact]
    public async Task Commits_groups_group_sizes_and_fsync_durations_are_published_on_the_Folio_meter()
    {
        using var meters = new TestMeterFactory();
        var measurements = new ConcurrentDictionary<string, ConcurrentQueue<double>>();
        using MeterListener listener = meters.Listen();
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _)
            => measurements.GetOrAdd(instrument.Name, _ => new()).Enqueue(value));
        listener.SetMeasurementEventCallback<int>((instrument, value, _, _)
            => measurements.GetOrAdd(instrument.Name, _ => new()).Enqueue(value));
        listener.SetMeasurementEventCallback<double>((instrument, value, _, _)
            => measurements.GetOrAdd(instrument.Name, _ => new()).Enqueue(value));
        listener.Start();

        using var fixture = new MergerFixture(o => o.MeterFactory = meters);
        await Task.WhenAll(
            Enumerable.Range(0, 200)
            .Select(i
            => Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"k{i}", "{}"u8.ToArray())).AsTask())));
        await Assert.ThrowsAsync<ConcurrencyException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "k1", "{}"u8.ToArray()).Expect("c", "k1", 0))
            .AsTask());
        listener.RecordObservableInstruments();

        Assert.Equal("Folio", Assert.Single(meters.Meters).Name);
        Assert.Equal(200, measurements["folio.commits"].Sum());
        Assert.Equal(1, measurements["folio.commits.failed"].Sum());
        double groups = measurements["folio.commit.groups"].Sum();
        Assert.InRange(groups, 1, 200);
        Assert.Equal(200, measurements["folio.commit.group.batches"].Sum());
        Assert.Equal(groups, measurements["folio.commit.group.batches"].Count);
        Assert.Equal(200, measurements["folio.commit.group.commands"].Sum());
        Assert.True(measurements["folio.journal.fsync.duration"].Count >= groups);
        Assert.All(measurements["folio.journal.fsync.duration"], d => Assert.True(d >= 0));
        Assert.Equal(0, measurements["folio.commit.queue.depth"].Last());
    }

    /// <summary>A listener's callback is the application's code, run on the committer's thread: one that throws loses
    /// its measurement, and commits go on (before, the committer faulted the store, and every reopen faulted again at
    /// the next measurement).</summary>
    [Theory]
    [InlineData("folio.commit.groups")] // recorded before the group is acknowledged
    [InlineData("folio.journal.fsync.duration")] // recorded between the fsync and the acknowledgements
    [InlineData("folio.commit.group.batches")]
    public async Task A_metrics_listener_that_throws_loses_its_measurement_and_commits_go_on(string instrumentName)
    {
        using var meters = new TestMeterFactory();
        using MeterListener listener = meters.Listen();
        int thrown = 0;
        listener.SetMeasurementEventCallback<long>((instrument, _, _, _) => ThrowFor(instrument));
        listener.SetMeasurementEventCallback<int>((instrument, _, _, _) => ThrowFor(instrument));
        listener.SetMeasurementEventCallback<double>((instrument, _, _, _) => ThrowFor(instrument));
        listener.Start();

        var fixture = new MergerFixture(o => o.MeterFactory = meters);
        try
        {
            for (int i = 1; i <= 3; i++)
            {
                CommitResult result = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"k{i}",
                    "{}"u8.ToArray())).AsTask().WaitAsync(TestDeadline.Hang);
                Assert.Equal(i, result.Sequence);
            }

            Assert.False(fixture.Merger.IsFaulted);
            Assert.True(Volatile.Read(ref thrown) >= 3, $"the listener threw {thrown} times");
            Assert.Equal(3, fixture.Journal.CommittedSequence);
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "Dispose completes");
        }

        void ThrowFor(Instrument instrument)
        {
            if (instrument.Name == instrumentName)
            {
                Interlocked.Increment(ref thrown);
                throw new InvalidOperationException("listener bug");
            }
        }
    }

    [Fact]
    public async Task A_metrics_listener_that_throws_on_the_sync_timer_loses_its_measurement_and_the_syncs_go_on()
    {
        using var meters = new TestMeterFactory();
        using MeterListener listener = meters.Listen(static instrument
            => instrument.Name == "folio.journal.fsync.duration");
        int thrown = 0;
        listener.SetMeasurementEventCallback<double>((_, _, _, _) =>
        {
            Interlocked.Increment(ref thrown);
            throw new InvalidOperationException("listener bug");
        });
        listener.Start();

        var fixture = new MergerFixture(o =>
        {
            o.MeterFactory = meters;
            o.Durability = DurabilityMode.Buffered;
            o.BufferedSyncInterval = TimeSpan.FromMilliseconds(20);
        });
        try
        {
            // Buffered: acknowledged after the write; the timer's fsync then records its duration and the listener
            // throws, on every fsync.
            for (int i = 1; i <= 2; i++)
            {
                Assert.Equal(i, (await fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"k{i}",
                    "{}"u8.ToArray())).AsTask().WaitAsync(TestDeadline.Hang)).Sequence);
                long expected = i;
                Assert.True(SpinWait.SpinUntil(() => fixture.Journal.DurableSequence >= expected, TestDeadline.Hang),
                    "the timer's fsync made the commit durable");
            }

            // The fsync publishes its durable sequence before it records its duration: wait for the second record.
            Assert.True(SpinWait.SpinUntil(() => Volatile.Read(ref thrown) >= 2, TestDeadline.Hang),
                $"the listener threw {thrown} times");
            Assert.False(fixture.Merger.IsFaulted);
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "Dispose completes");
        }
    }

    [Theory]
    [InlineData("metrics listener")] // throws on folio.commits.failed, recorded for the group and the pending batches
    [InlineData("logger")] // throws on the "store is faulted" line, written before any waiter is answered
    public async Task An_observer_that_throws_while_a_journal_failure_faults_the_store_leaves_no_waiter_unanswered(
        string observer)
    {
        using var meters = new TestMeterFactory();
        using MeterListener listener = meters.Listen(static instrument => instrument.Name == "folio.commits.failed");
        listener.SetMeasurementEventCallback<long>((_, _, _, _) => throw new InvalidOperationException("listener bug"));
        if (observer == "metrics listener")
        {
            listener.Start();
        }

        var logs = new CapturingLoggerFactory { ThrowFor = id => observer == "logger" && id.Id == 2002 };
        var fixture = new MergerFixture(o =>
        {
            o.MeterFactory = meters;
            o.LoggerFactory = logs;
            o.MaxGroupCommands = 4; // small groups: batches stay queued behind the failing group
            o.MaxGroupsInFlight = 1;
        });
        try
        {
            Task<CommitResult>? first = null;
            var gate = fixture.HoldNextSync(()
                => first = Task.Run(()
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", "{}"u8.ToArray())).AsTask()));
            var pending = Enumerable.Range(0, 20)
                .Select(i
                    => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"p{i}", "{}"u8.ToArray())).AsTask()
                    .WaitAsync(TestDeadline.Hang))
                .ToList();
            fixture.Files.Arm(FileFault.SyncFails);
            fixture.Files.SyncGate = null;
            gate.Set();

            Assert.Equal(1, (await first!).Sequence);
            foreach (Task<CommitResult> commit in pending)
            {
                // not a TimeoutException: answered
                var error = await Assert.ThrowsAsync<StoreFaultedException>(() => commit);
                Assert.IsType<IOException>(error.InnerException);
            }

            Assert.IsType<IOException>(fixture.Merger.Fault);
            // The fault is published before the thread that set it logs it: wait for the line rather than race it.
            Assert.True(SpinWait.SpinUntil(() => logs.Lines.Any(line => line.Id.Id == 2002), TestDeadline.Hang),
                "the fault was logged");
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "Dispose completes: the committer role was released");
        }
    }

    [Fact]
    public async Task A_logger_that_throws_when_the_buffered_sync_timer_faults_the_store_does_not_end_the_process()
    {
        var logs = new CapturingLoggerFactory { ThrowFor = static id => id.Id == 2002 };
        var fixture = new MergerFixture(o =>
        {
            o.LoggerFactory = logs;
            o.Durability = DurabilityMode.Buffered;
            o.BufferedSyncInterval = TimeSpan.FromMilliseconds(20);
        });
        try
        {
            fixture.Files.Arm(FileFault.SyncFails);
            Assert.Equal(1,
                (await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "k", "{}"u8.ToArray())).AsTask().WaitAsync(
                TestDeadline.Hang)).Sequence);
            Assert.True(SpinWait.SpinUntil(() => fixture.Merger.IsFaulted, TestDeadline.Hang),
                "the timer's failed fsync faulted the store");
            Assert.IsType<IOException>(fixture.Merger.Fault);
            // The fault is published before the thread that set it logs it: wait for the line rather than race it.
            Assert.True(SpinWait.SpinUntil(() => logs.Lines.Any(line => line.Id.Id == 2002), TestDeadline.Hang),
                "the fault was logged");
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "Dispose completes");
        }
    }
}
