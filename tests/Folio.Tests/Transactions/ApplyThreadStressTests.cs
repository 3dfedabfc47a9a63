using System.Text;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

/// <summary>
/// Groups large enough to be applied on the <see cref="ApplyThread"/> while their committer syncs them, under 64
/// writers, with a reader checking every version it reads: a version is never visible before its group is durable,
/// never goes back, and is visible by the time its commit is acknowledged; the journal holds every acknowledged commit.
/// Until one group has been applied beside its sync, the test holds syncs until every writer waits, so that one does.
/// </summary>
public sealed class ApplyThreadStressTests
{
    private const int Writers = 64;

    [Fact]
    public async Task Commits_applied_beside_their_fsync_are_visible_in_order_and_never_before_they_are_durable()
    {
        using var fixture = new MergerFixture(static o => o.MaxGroupsInFlight = 1);
        DocumentKey[] keys = [.. Enumerable.Range(0, Writers).Select(w => new DocumentKey("c", $"w{w}"))];
        var acknowledged = new long[Writers];
        string? violation = null;
        TimeSpan duration = TimeSpan.FromSeconds(StressDuration.Seconds(3));
        using var stop = new CancellationTokenSource(duration);
        byte[] json = Encoding.UTF8.GetBytes("{}");
        int inCommit = 0;

        Task[] writers = [.. Enumerable.Range(0, Writers).Select(w => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                Interlocked.Increment(ref inCommit);
                CommitResult result = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"w{w}", json));
                Interlocked.Decrement(ref inCommit);
                long seen = fixture.State.GetVersion(keys[w]); // only this writer writes its key
                if (seen != result.Sequence)
                {
                    Interlocked.CompareExchange(ref violation,
                        $"writer {w} read {seen} right after commit {result.Sequence} was acknowledged", null);
                }

                Volatile.Write(ref acknowledged[w], result.Sequence);
            }
        }))];
        // One reader, spinning on a thread of its own: spinning on both cores would keep the thread pool from adding
        // the threads the writers' continuations need while the test host's own threads block on the pool (it adds
        // threads to a starved pool only while the CPU is not saturated).
        Task reader = Task.Factory.StartNew(() =>
        {
            var last = new long[Writers];
            while (!stop.IsCancellationRequested)
            {
                for (int w = 0; w < Writers; w++)
                {
                    long acked = Volatile.Read(ref acknowledged[w]);
                    long version = fixture.State.GetVersion(keys[w]);
                    long durable = fixture.Journal.DurableSequence;
                    string? problem = version < last[w] ? $"went back from {last[w]} to {version}"
                        : version < acked ? $"is {version} after commit {acked} was acknowledged"
                        : version > durable ? $"is {version} before it was durable ({durable})"
                        : null;
                    if (problem is not null)
                    {
                        Interlocked.CompareExchange(ref violation, $"key w{w} {problem}", null);
                    }

                    last[w] = version;
                }
            }
        }, TaskCreationOptions.LongRunning);
        // On a loaded machine the writers may never pile up behind a fast fsync on their own: until a group has been
        // applied beside its sync, hold a sync until every writer waits in a commit, so the group after it is large.
        Task holder = Task.Factory.StartNew(() =>
        {
            while (!stop.IsCancellationRequested && fixture.Merger.GroupsAppliedDuringSync == 0)
            {
                fixture.Files.SyncGateHoldsOne = true;
                ManualResetEventSlim gate = fixture.Files.ArmSyncGate();
                SpinWait.SpinUntil(() => fixture.Files.SyncWaiting.IsSet && Volatile.Read(ref inCommit) == Writers
                    || stop.IsCancellationRequested);
                gate.Set(); // a sync that takes the gate after the run stopped finds it open
            }
        }, TaskCreationOptions.LongRunning);
        Task all = Task.WhenAll([.. writers, reader, holder]);
        await all.WaitAsync(duration + TestDeadline.Hang); // a hang past the run

        Assert.Null(violation);
        Assert.True(fixture.Merger.GroupsAppliedDuringSync > 0,
            "no group was large enough to be applied on the apply thread");
        var lastInJournal = new Dictionary<string, long>();
        foreach ((long sequence, long _, List<BatchCommand> commands) in fixture.ReadBatches())
        {
            lastInJournal[commands[0].Key.Id] = sequence;
        }

        for (int w = 0; w < Writers; w++)
        {
            Assert.Equal(acknowledged[w], lastInJournal.GetValueOrDefault($"w{w}"));
        }
    }
}
