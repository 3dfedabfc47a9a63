using System.Collections.Concurrent;
using System.Diagnostics;
using System.Text;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

public sealed class TransactionMergerTests
{
    /// <summary>
    /// For tests that hold one group's fsync so that later batches queue behind it and form the next group: with the
    /// pipeline (two groups in flight) they would form a group of their own and sync at once.
    /// </summary>
    private static readonly Action<TransactionMergerOptions> OneGroupInFlight = static o => o.MaxGroupsInFlight = 1;

    private static ReadOnlyMemory<byte> Json(string text) => Encoding.UTF8.GetBytes(text);

    [Theory]
    [InlineData(1024, 4 << 20, 1)]
    [InlineData(8, 4 << 20, 1)]
    [InlineData(1024, 600, 1)]
    [InlineData(1024, 4 << 20, 2)]
    [InlineData(8, 4 << 20, 3)]
    public async Task Sixteen_threads_commit_a_thousand_batches_each_exactly_once_in_acknowledgement_order(
        int maxCommands, int maxBytes, int maxGroupsInFlight)
    {
        using var fixture = new MergerFixture(o =>
        {
            o.MaxGroupCommands = maxCommands;
            o.MaxGroupBytes = maxBytes;
            o.MaxPendingBytes = Math.Max(maxBytes, 1 << 20);
            o.SmallBatchAllowance = 0;
            o.MaxGroupsInFlight = maxGroupsInFlight;
        });
        const int Threads = 16;
        const int PerThread = 1000;
        var acks = new ConcurrentDictionary<string, (long Sequence, long Submitted, long Acknowledged)>();
        var clock = Stopwatch.StartNew();

        // Merging must not depend on how the host schedules 16 tasks on its cores (a runner with one free core can
        // run every writer's loop back to back, each commit finishing before the next begins): the first fsync is
        // held until every other writer has its first batch waiting behind it.
        var firstSync = new ManualResetEventSlim();
        fixture.Files.SyncGate = firstSync;
        int waitingBehind = 0;
        var writers = Enumerable.Range(0, Threads).Select(t => Task.Run(async () =>
        {
            for (int i = 0; i < PerThread; i++)
            {
                string id = $"{t}-{i}";
                var batch = new CommitBatch().Put("items", id, Json($"{{\"t\":{t},\"i\":{i}}}"));
                if (i % 7 == 0)
                {
                    batch.Put("items", id + "-extra", Json("{}"));
                }

                long submitted = clock.ElapsedTicks;
                ValueTask<CommitResult> commit = fixture.Merger.CommitAsync(batch);
                if (i == 0 && !commit.IsCompleted)
                {
                    Interlocked.Increment(ref waitingBehind);
                }

                CommitResult result = await commit;
                Assert.True(acks.TryAdd(id, (result.Sequence, submitted, clock.ElapsedTicks)));
            }
        })).ToArray();
        Assert.True(fixture.Files.SyncWaiting.Wait(TestDeadline.Hang), "a committer reached the first fsync");
        var deadline = Stopwatch.StartNew();
        while (Volatile.Read(ref waitingBehind) < Threads - 1 && deadline.Elapsed < TestDeadline.Hang)
        {
            await Task.Delay(1);
        }

        Assert.Equal(Threads - 1, Volatile.Read(ref waitingBehind));
        firstSync.Set();
        await Task.WhenAll(writers);

        var batches = fixture.ReadBatches();
        Assert.Equal(Threads * PerThread, batches.Count);
        Assert.Equal(Enumerable.Range(1, Threads * PerThread).Select(i => (long)i), batches.Select(b => b.Sequence));

        // Every acknowledged batch is in the journal exactly once, at its acknowledged sequence, with its bytes.
        var bySequence = batches.ToDictionary(b => b.Sequence);
        foreach (var (id, ack) in acks)
        {
            var commands = bySequence[ack.Sequence].Commands;
            Assert.Equal(id, commands[0].Key.Id);
            Assert.Equal(Json($"{{\"t\":{id.Split('-')[0]},\"i\":{id.Split('-')[1]}}}").ToArray(),
                commands[0].Value.ToArray());
        }

        Assert.Equal(acks.Count, acks.Values.Select(a => a.Sequence).Distinct().Count());

        // Groups respect the caps.
        foreach (var group in batches.GroupBy(b => b.Record))
        {
            Assert.True(group.Count() == 1 || group.Sum(b => b.Commands.Count) <= maxCommands, "command cap");
            long bytes = group.Sum(b => 4 + 5
                + b.Commands.Sum(c => 1 + 2 + c.Key.Collection.Length + 2 + c.Key.Id.Length + 4 + c.Value.Length));
            Assert.True(group.Count() == 1 || bytes <= maxBytes, $"byte cap: {bytes}");
        }

        int groups = batches.Select(b => b.Record).Distinct().Count();
        Assert.True(groups < batches.Count,
            $"concurrent commits were merged into groups ({groups} groups for {batches.Count} batches)");

        // Journal order is consistent with acknowledgement order: a batch acknowledged before another was submitted
        // has the smaller sequence number.
        var ordered = acks.Values.OrderBy(a => a.Sequence).ToArray();
        long laterAckMin = long.MaxValue;
        for (int i = ordered.Length - 1; i >= 0; i--)
        {
            Assert.True(laterAckMin >= ordered[i].Submitted,
                "a batch with a later sequence was acknowledged before this one was submitted");
            laterAckMin = Math.Min(laterAckMin, ordered[i].Acknowledged);
        }
    }

    [Fact]
    public async Task With_two_groups_in_flight_the_second_syncs_during_the_first_and_is_acknowledged_only_after_it()
    {
        using var fixture = new MergerFixture(static o => o.MaxGroupsInFlight = 2);
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
        fixture.Files.SyncGate = null; // later syncs run at once
        int completedBefore = Volatile.Read(ref fixture.Files.SyncsCompleted);

        // The second group is written and synced while the first one's fsync is held...
        Task<CommitResult> second = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "second", Json("{}")))
            .AsTask();
        Assert.True(
            SpinWait.SpinUntil(() => Volatile.Read(ref fixture.Files.SyncsCompleted) > completedBefore,
            TestDeadline.Hang), "the second group's fsync ran while the first one's was held");
        Assert.Equal(2, fixture.Merger.GroupsInFlight);

        // ...but it is neither acknowledged nor visible to journal readers before the first group is durable.
        await Task.Delay(50);
        Assert.False(second.IsCompleted, "the second group was acknowledged before the first one was durable");
        Assert.False(first!.IsCompleted);
        Assert.Equal(0, fixture.Journal.CommittedSequence);
        Assert.Equal(0, fixture.State.GetVersion(new DocumentKey("c", "second")));

        gate.Set();
        CommitResult firstResult = await first.WaitAsync(TestDeadline.Hang);
        CommitResult secondResult = await second.WaitAsync(TestDeadline.Hang);
        Assert.Equal((1, 2), (firstResult.Sequence, secondResult.Sequence));
        Assert.Equal(2, fixture.Journal.CommittedSequence);
        Assert.Equal([1L, 2L], fixture.ReadBatches().Select(b => b.Record)); // two groups, two records
        Assert.Equal(0, fixture.Merger.GroupsInFlight);
    }

    [Fact]
    public async Task With_two_groups_in_flight_a_failed_fsync_of_the_first_fails_the_second_whose_fsync_succeeded()
    {
        using var fixture = new MergerFixture(static o => o.MaxGroupsInFlight = 2);
        await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "before", Json("{}")));
        fixture.Files.Arm(FileFault.SyncFails); // taken by the next sync, which the gate then holds
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
        fixture.Files.SyncGate = null;
        int completedBefore = Volatile.Read(ref fixture.Files.SyncsCompleted);
        Task<CommitResult> second = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "second", Json("{}")))
            .AsTask();
        Assert.True(
            SpinWait.SpinUntil(() => Volatile.Read(ref fixture.Files.SyncsCompleted) > completedBefore,
            TestDeadline.Hang), "the second group's fsync succeeded");

        gate.Set();
        var firstError = await Assert.ThrowsAsync<StoreFaultedException>(() => first!.WaitAsync(TestDeadline.Hang));
        Assert.IsType<IOException>(firstError.InnerException);
        var secondError = await Assert.ThrowsAsync<StoreFaultedException>(() => second.WaitAsync(TestDeadline.Hang));
        Assert.Contains("may or may not be in the journal", secondError.Message, StringComparison.Ordinal);

        // Nothing after the failed fsync was acknowledged, applied or published; the store is faulted.
        Assert.True(fixture.Merger.IsFaulted);
        Assert.Equal(1, fixture.Journal.CommittedSequence);
        Assert.Equal(0, fixture.State.GetVersion(new DocumentKey("c", "second")));
        await Assert.ThrowsAsync<StoreFaultedException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "later", Json("{}"))).AsTask());
        Assert.Equal(0, fixture.Merger.GroupsInFlight);
    }

    [Fact]
    public async Task A_batch_is_validated_against_the_writes_of_a_group_still_in_flight()
    {
        using var fixture = new MergerFixture(static o => o.MaxGroupsInFlight = 2);
        CommitResult created = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "doc", Json("{}")));
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "doc", Json("{\"v\":1}")).Expect("c", "doc", created.Sequence)).AsTask()));
        fixture.Files.SyncGate = null;

        // The first overwrite is written but not applied: a second one expecting the same version conflicts with it,
        // and one expecting the in-flight version commits after it.
        var stale = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "doc", Json("{\"v\":2}")).Expect("c", "doc", created.Sequence)).AsTask();
        await Assert.ThrowsAsync<ConcurrencyException>(() => stale.WaitAsync(TestDeadline.Hang));
        var chained = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "doc", Json("{\"v\":3}")).Expect("c", "doc", created.Sequence + 1)).AsTask();
        gate.Set();
        Assert.Equal(created.Sequence + 1, (await first!.WaitAsync(TestDeadline.Hang)).Sequence);
        Assert.Equal(created.Sequence + 2, (await chained.WaitAsync(TestDeadline.Hang)).Sequence);
        Assert.Equal(created.Sequence + 2, fixture.State.GetVersion(new DocumentKey("c", "doc")));
    }

    [Fact]
    public async Task In_one_group_conflicting_and_throwing_batches_fail_alone_and_the_others_commit()
    {
        using var fixture = new MergerFixture(OneGroupInFlight);
        fixture.State.Validator = b => b.Commands[0].Key.Id == "bad"
            ? new InvalidDataException("rejected by validation") : null;
        CommitResult seed = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "existing", Json("{\"v\":1}")));

        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
        var good1 = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "a", Json("{}")).Expect("c", "existing", seed.Sequence)).AsTask();
        var stale = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "b", Json("{}")).Expect("c", "existing", seed.Sequence + 100)).AsTask();
        var throwing = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "bad", Json("{}"))).AsTask();
        var good2 = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "existing", Json("{\"v\":2}")).Expect("c", "existing", seed.Sequence)).AsTask();
        var dependsOnGood2 = fixture.Merger.CommitAsync(
            new CommitBatch().Delete("c", "existing").Expect("c", "existing", seed.Sequence)).AsTask();
        var mustNotExist = fixture.Merger.CommitAsync(
            new CommitBatch().Put("c", "new", Json("{}")).Expect("c", "new", 0)).AsTask();
        gate.Set();

        await first!;
        CommitResult a = await good1;
        CommitResult existing = await good2;
        CommitResult created = await mustNotExist;
        var conflict = await Assert.ThrowsAsync<ConcurrencyException>(() => stale);
        Assert.Equal([new DocumentKey("c", "existing")], conflict.Conflicts);
        Assert.Contains("c/existing", conflict.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<InvalidDataException>(() => throwing);
        // good2 changed "existing" earlier in the group
        await Assert.ThrowsAsync<ConcurrencyException>(() => dependsOnGood2);

        var batches = fixture.ReadBatches();
        Assert.Equal(["existing", "first", "a", "existing", "new"], batches.Select(b => b.Commands[0].Key.Id));
        Assert.Equal(batches[2].Record, batches[3].Record);
        Assert.Equal(batches[3].Record, batches[4].Record);
        Assert.Equal(existing.Sequence, fixture.State.GetVersion(new DocumentKey("c", "existing")));
        Assert.Equal(a.Sequence + 1, existing.Sequence);
        Assert.Equal(created.Sequence, fixture.State.GetVersion(new DocumentKey("c", "new")));
        Assert.Equal(0, fixture.State.GetVersion(new DocumentKey("c", "b")));
    }

    [Theory]
    [InlineData(FileFault.WriteFails)]
    [InlineData(FileFault.ShortWrite)]
    [InlineData(FileFault.DiskFull)]
    [InlineData(FileFault.SyncFails)]
    public async Task A_journal_failure_fails_the_group_and_everything_pending_and_faults_the_store(FileFault fault)
    {
        using var fixture = new MergerFixture(OneGroupInFlight);
        CommitResult before = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "before", Json("{}")));

        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
        var pending = Enumerable.Range(0, 20)
            .Select(i => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"p{i}", Json("{}"))).AsTask()).ToList();
        fixture.Files.Arm(fault);
        fixture.Files.SyncGate = null;
        gate.Set();

        await first!; // its sync was already under way before the fault was armed
        var results = await Task.WhenAll(
            pending.Select(async t => (Task: t, Error: await Record.ExceptionAsync(() => t))));
        Assert.All(results, r => Assert.IsType<StoreFaultedException>(r.Error));
        var error = (StoreFaultedException)results[0].Error!;
        Assert.IsType<IOException>(error.InnerException);
        if (fault == FileFault.DiskFull)
        {
            Assert.Contains("disk is full", error.Message, StringComparison.Ordinal);
        }

        // Faulted: later commits fail fast; reads of what was committed keep working.
        Assert.True(fixture.Merger.IsFaulted);
        await Assert.ThrowsAsync<StoreFaultedException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "later", Json("{}"))).AsTask());
        var committed = fixture.ReadBatches();
        Assert.Equal(["before", "first"], committed.Select(b => b.Commands[0].Key.Id));
        Assert.Equal(before.Sequence, fixture.State.GetVersion(new DocumentKey("c", "before")));
        Assert.Equal(0, fixture.State.GetVersion(new DocumentKey("c", "p0")));
    }

    /// <summary><paramref name="groupSize"/> 0: one commit, inline on its caller's thread; 3: a group applied after
    /// its fsync; past <see cref="CommitPipeline.MinBatchesToApplyDuringSync"/>: a group applied on the apply thread
    /// while its fsync runs.</summary>
    [Theory]
    [InlineData(0)]
    [InlineData(3)]
    [InlineData(CommitPipeline.MinBatchesToApplyDuringSync + 4)]
    public async Task A_group_in_the_journal_that_the_state_fails_to_apply_faults_the_store_and_tells_its_waiters(
        int groupSize)
    {
        var fixture = new MergerFixture(OneGroupInFlight);
        try
        {
            await ApplyFailureFaultsTheStore(fixture, groupSize);
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "Dispose completes: the committer role was released");
        }
    }

    private static async Task ApplyFailureFaultsTheStore(MergerFixture fixture, int groupSize)
    {
        string? appliedOn = null;
        fixture.State.ApplyFault = batch =>
        {
            if (batch.Commands[0].Key.Id != "boom")
            {
                return null;
            }

            appliedOn = Thread.CurrentThread.Name;
            return new InvalidOperationException("apply failed");
        };
        await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "before", Json("{}")));

        List<Task<CommitResult>> group;
        if (groupSize > 0)
        {
            // Pool committer: "boom" and its neighbours queue behind a held fsync and commit as one group.
            Task<CommitResult>? first = null;
            var gate = fixture.HoldNextSync(()
                => first = Task.Run(()
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
            IEnumerable<string> ids = Enumerable.Range(0, groupSize)
                .Select(i => i == groupSize / 2 ? "boom" : $"n{i}");
            group = ids.Select(id
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", id, Json("{}"))).AsTask()).ToList();
            gate.Set();
            await first!.WaitAsync(TestDeadline.Hang);
        }
        else
        {
            // Idle merger: the caller commits inline, on its own thread.
            group = [Task.Run(()
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "boom", Json("{}"))).AsTask())];
        }

        foreach (Task<CommitResult> waiter in group)
        {
            var error = await Assert.ThrowsAsync<StoreFaultedException>(() => waiter.WaitAsync(TestDeadline.Hang));
            Assert.IsType<InvalidOperationException>(error.InnerException);
            Assert.Contains("written to the journal", error.Message, StringComparison.Ordinal);
        }

        Assert.Equal(groupSize >= CommitPipeline.MinBatchesToApplyDuringSync, appliedOn == ApplyThread.ThreadName);

        // The store is faulted and says so at once. The group was never published to journal readers (it was not
        // applied), but it is in the journal: reopening replays it.
        Assert.True(fixture.Merger.IsFaulted);
        Assert.IsType<InvalidOperationException>(fixture.Merger.Fault);
        await Assert.ThrowsAsync<StoreFaultedException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "later", Json("{}"))).AsTask()
            .WaitAsync(TestDeadline.Hang));
        Assert.DoesNotContain("boom", fixture.ReadBatches().Select(b => b.Commands[0].Key.Id));
        Assert.Contains("boom", fixture.ReadBatchesAfterReopen().Select(b => b.Commands[0].Key.Id));
    }

    [Fact]
    public async Task Cancellation_before_a_batch_is_taken_removes_it_and_after_it_is_taken_the_commit_is_delivered()
    {
        using var fixture = new MergerFixture(OneGroupInFlight);
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));

        using var cancelWaiting = new CancellationTokenSource();
        var waiting = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "cancelled", Json("{}")),
            cancelWaiting.Token).AsTask();
        var kept = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "kept", Json("{}"))).AsTask();
        cancelWaiting.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting);

        // "first" is already in a group (it is inside the fsync): cancelling its token now changes nothing.
        gate.Set();
        Assert.Equal(1, (await first!).Sequence);
        Assert.Equal(2, (await kept).Sequence);
        Assert.Equal(["first", "kept"], fixture.ReadBatches().Select(b => b.Commands[0].Key.Id));

        using var already = new CancellationTokenSource();
        already.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "x", Json("{}")), already.Token).AsTask());
    }

    [Fact]
    public async Task Submitters_above_the_pending_byte_bound_wait_until_the_committer_frees_room()
    {
        using var fixture = new MergerFixture(o =>
        {
            o.MaxPendingBytes = 4096;
            o.MaxGroupBytes = 4096;
            o.MaxGroupsInFlight = 1;
        });
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", new byte[100])).AsTask()));
        var submitted = Enumerable.Range(0, 12)
            .Select(i => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"b{i}", new byte[1000])).AsTask())
            .ToList();
        await Task.Delay(100);
        Assert.All(submitted, t => Assert.False(t.IsCompleted));
        gate.Set();
        await first!;
        var results = await Task.WhenAll(submitted);
        Assert.Equal(12, results.Select(r => r.Sequence).Distinct().Count());
        Assert.Equal(13, fixture.ReadBatches().Count);
    }

    [Fact]
    public async Task Buffered_commits_are_acknowledged_before_fsync_and_synced_within_the_interval()
    {
        using var fixture = new MergerFixture(o =>
        {
            o.Durability = DurabilityMode.Buffered;
            o.BufferedSyncInterval = TimeSpan.FromMilliseconds(50);
        });
        int syncsBefore = fixture.Files.Syncs;
        CommitResult buffered = await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "b", Json("{}")));
        Assert.Equal(syncsBefore, fixture.Files.Syncs);
        Assert.True(fixture.Journal.CommittedSequence < buffered.Sequence);
        var deadline = DateTime.UtcNow.AddSeconds(10);
        while (fixture.Journal.CommittedSequence < buffered.Sequence && DateTime.UtcNow < deadline)
        {
            await Task.Delay(10);
        }

        Assert.Equal(buffered.Sequence, fixture.Journal.CommittedSequence);
        var durable = new CommitBatch { Durability = DurabilityMode.Durable }.Put("c", "d", Json("{}"));
        CommitResult result = await fixture.Merger.CommitAsync(durable);
        Assert.Equal(result.Sequence, fixture.Journal.CommittedSequence);
    }

    [Fact]
    public async Task An_idle_sync_timer_rests_and_a_buffered_commit_wakes_it_to_sync_within_the_interval()
    {
        using var fixture = new MergerFixture(o =>
        {
            o.Durability = DurabilityMode.Buffered;
            o.BufferedSyncInterval = TimeSpan.FromMilliseconds(20);
        });
        for (int round = 0; round < 3; round++)
        {
            // Nothing buffered for a second's worth of ticks: the timer rests.
            await WaitUntilAsync(() => fixture.Merger.IsSyncTimerResting);

            // A buffered commit wakes it before the commit is acknowledged, and the sync follows within the interval
            // (not the resting second; the bound here is loose for a loaded machine, the wake is what is checked).
            long started = Environment.TickCount64;
            CommitResult buffered = await fixture.Merger.CommitAsync(
                new CommitBatch().Put("c", $"b{round}", Json("{}")));
            Assert.False(fixture.Merger.IsSyncTimerResting);
            await WaitUntilAsync(() => fixture.Journal.CommittedSequence >= buffered.Sequence);
            Assert.InRange(Environment.TickCount64 - started, 0, 5_000);
        }

        // Durable commits alone leave it resting: it has nothing of theirs to sync.
        await WaitUntilAsync(() => fixture.Merger.IsSyncTimerResting);
        var durable = new CommitBatch { Durability = DurabilityMode.Durable }.Put("c", "d", Json("{}"));
        CommitResult result = await fixture.Merger.CommitAsync(durable);
        Assert.Equal(result.Sequence, fixture.Journal.CommittedSequence);
        Assert.True(fixture.Merger.IsSyncTimerResting);

        static async Task WaitUntilAsync(Func<bool> condition)
        {
            var deadline = DateTime.UtcNow.AddSeconds(30);
            while (!condition())
            {
                Assert.True(DateTime.UtcNow < deadline, "the condition did not hold within 30 s");
                await Task.Delay(10);
            }
        }
    }

    [Fact]
    public async Task In_a_durable_store_the_sync_timer_never_syncs_and_fsync_durations_are_the_committers_own()
    {
        using var fixture = new MergerFixture(o =>
        {
            o.BufferedSyncInterval = TimeSpan.FromMilliseconds(2);
            o.MaxGroupsInFlight = 1;
        });

        // A durable group is written and held inside its fsync: appended, not committed, for many timer periods.
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "held", Json("{}"))).AsTask()));
        await Task.Delay(100);
        gate.Set();
        await first!;
        for (int i = 0; i < 20; i++)
        {
            await fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"k{i}", Json("{}")));
        }

        await Task.Delay(50);

        // One fsync per group, all made by the committer; the timer neither synced nor recorded a wait as an fsync.
        Assert.Equal(fixture.Journal.AppendedRecords, fixture.Merger.SyncCount);
        Assert.Equal(21, fixture.Merger.SyncCount);
    }

    [Fact]
    public async Task Bad_batches_are_rejected_with_clear_exceptions_and_the_merger_stays_usable()
    {
        using var fixture = new MergerFixture(segmentSize: 64 * 1024);
        await Assert.ThrowsAsync<ArgumentException>(() => fixture.Merger.CommitAsync(new CommitBatch()).AsTask());
        var tooLarge = await Assert.ThrowsAsync<DocumentTooLargeException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "big", new byte[70_000])).AsTask());
        Assert.Contains("one journal record, which holds at most", tooLarge.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => new CommitBatch().Put("", "x", Json("{}")));
        Assert.Throws<ArgumentException>(() => new CommitBatch().Put("c", "", Json("{}")));
        Assert.Throws<ArgumentOutOfRangeException>(() => new CommitBatch().Expect("c", "x", -1));
        Assert.Equal(1, (await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "ok", Json("{}")))).Sequence);
    }

    [Fact]
    public async Task A_lone_writer_commits_on_its_own_thread_and_after_a_merged_group_the_committer_runs_on_the_pool()
    {
        using var fixture = new MergerFixture(OneGroupInFlight);

        // Idle merger: the caller commits inline; the result is durable when CommitAsync returns.
        Task<CommitResult> lone = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "lone", Json("{}"))).AsTask();
        Assert.True(lone.IsCompletedSuccessfully, "an idle merger commits a lone batch inline");
        Assert.Equal(1, fixture.Journal.CommittedSequence);
        Assert.Equal(1, (await lone).Sequence);

        // A group of several batches: the first waits in fsync while three more queue behind it.
        Task<CommitResult>? first = null;
        var gate = fixture.HoldNextSync(()
            => first = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
        var queued = Enumerable.Range(0, 3)
            .Select(i => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"q{i}", Json("{}"))).AsTask()).ToList();
        gate.Set();
        await first!;
        await Task.WhenAll(queued);
        // q0..q2 merged into one record
        Assert.Equal(1, fixture.ReadBatches().Select(b => b.Record).Distinct().Count(r => r > 2));

        // Under concurrency the caller does not serve others: with the next fsync held, CommitAsync still returns
        // (pending) because the committer runs as a pool work item, not on the caller's thread.
        Task<Task<CommitResult>>? submit = null;
        var held = fixture.HoldNextSync(() => submit = Task.Factory.StartNew(
            () => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "pooled", Json("{}"))).AsTask(),
            CancellationToken.None,
            TaskCreationOptions.None,
            TaskScheduler.Default));
        // times out if the caller were held in fsync
        Task<CommitResult> handedOff = await submit!.WaitAsync(TestDeadline.Hang);
        Assert.False(handedOff.IsCompleted, "the commit is held in the pool committer's fsync, not the caller's");
        held.Set();
        Assert.Equal(6, (await handedOff).Sequence);

        // Once groups hold one batch again, a lone writer is back on the inline path. The waiter is answered before
        // its committer records the group size and releases the role, so wait for the release first.
        Assert.True(SpinWait.SpinUntil(() => !fixture.Merger.IsCommitterActive, TestDeadline.Hang),
            "the pool committer released its role");
        Assert.True(
            fixture.Merger.CommitAsync(new CommitBatch().Put("c", "lone-again", Json("{}"))).AsTask()
            .IsCompletedSuccessfully);
    }

    [Theory]
    [InlineData(-0.1)]
    [InlineData(1.5)]
    [InlineData(double.NaN)]
    public void A_group_fill_wait_outside_zero_to_one_is_rejected_at_open(double fraction)
    {
        using var dir = new TempDirectory();
        using var journal = Folio.Journal.WriteAheadJournal.Open(dir.Path);
        var error = Assert.Throws<ArgumentOutOfRangeException>(()
            => new TransactionMerger(journal, new VersionTable(),
            new TransactionMergerOptions { GroupFillWait = fraction }));
        Assert.Equal(nameof(TransactionMergerOptions.GroupFillWait), error.ParamName);
    }

    [Fact]
    public async Task Dispose_commits_what_is_pending_and_later_commits_throw()
    {
        var fixture = new MergerFixture();
        var tasks = Enumerable.Range(0, 50)
            .Select(i
            => Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"k{i}", Json("{}"))).AsTask())).ToList();
        await Task.WhenAll(tasks);
        fixture.Merger.Dispose();
        fixture.Merger.Dispose();
        await Assert.ThrowsAsync<ObjectDisposedException>(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "late", Json("{}"))).AsTask());
        Assert.Equal(50, fixture.ReadBatches().Count);
        fixture.Dispose();
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_batch_held_back_from_a_full_group_can_be_cancelled_and_the_batches_behind_it_commit_in_order(
        bool disposeWhileHeld)
    {
        // Groups of two commands: the committer takes "a" and "b", and holds "c" back for the next group.
        var fixture = new MergerFixture(o =>
        {
            o.MaxGroupsInFlight = 1;
            o.MaxGroupCommands = 2;
        });
        fixture.Files.SyncGateHoldsOne = true;
        try
        {
            Task<CommitResult>? first = null;
            var firstGate = fixture.HoldNextSync(()
                => first = Task.Run(()
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "first", Json("{}"))).AsTask()));
            var secondGate = new ManualResetEventSlim();
            fixture.Files.SyncWaiting.Reset();
            fixture.Files.SyncGate = secondGate; // holds the next group's fsync, with "c" held back meanwhile

            using var cancelHeld = new CancellationTokenSource();
            Task<CommitResult> a = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "a", Json("{}"))).AsTask();
            Task<CommitResult> b = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "b", Json("{}"))).AsTask();
            Task<CommitResult> held = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "held", Json("{}")),
                cancelHeld.Token).AsTask();
            Task<CommitResult> d = fixture.Merger.CommitAsync(new CommitBatch().Put("c", "d", Json("{}"))).AsTask();
            firstGate.Set();
            Assert.True(fixture.Files.SyncWaiting.Wait(TestDeadline.Hang), "the group of a and b reached its fsync");

            Task? dispose = null;
            if (disposeWhileHeld)
            {
                // A close commits what is pending, the held batch included, once the fsync is let go.
                dispose = Task.Run(fixture.Merger.Dispose);
            }
            else
            {
                cancelHeld.Cancel();
                await Assert.ThrowsAnyAsync<OperationCanceledException>(() => held.WaitAsync(TestDeadline.Hang));
            }

            secondGate.Set();
            Assert.Equal(1, (await first!.WaitAsync(TestDeadline.Hang)).Sequence);
            Assert.Equal(2, (await a.WaitAsync(TestDeadline.Hang)).Sequence);
            Assert.Equal(3, (await b.WaitAsync(TestDeadline.Hang)).Sequence);
            if (disposeWhileHeld)
            {
                Assert.Equal(4, (await held.WaitAsync(TestDeadline.Hang)).Sequence);
                Assert.Equal(5, (await d.WaitAsync(TestDeadline.Hang)).Sequence);
                await dispose!.WaitAsync(TestDeadline.Hang);
                Assert.Equal(["first", "a", "b", "held", "d"],
                    fixture.ReadBatches().Select(x => x.Commands[0].Key.Id));
            }
            else
            {
                Assert.Equal(4, (await d.WaitAsync(TestDeadline.Hang)).Sequence);
                Assert.Equal(["first", "a", "b", "d"], fixture.ReadBatches().Select(x => x.Commands[0].Key.Id));
                Assert.Equal(5, (await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "after", Json("{}"))))
                    .Sequence);
            }
        }
        finally
        {
            Assert.True(fixture.DisposeWithin(TestDeadline.Hang), "the merger closes");
        }
    }

    [Fact]
    public async Task A_committed_batch_is_not_kept_alive_by_the_queue_it_waited_in()
    {
        // A batch a caller no longer holds must be garbage once it is committed (with its command list and entry),
        // not kept by the pending queue's slot until the queue moves on (which a queue that was peeked does).
        using var fixture = new MergerFixture();
        WeakReference[] committed = new WeakReference[3];
        for (int i = 0; i < committed.Length; i++)
        {
            committed[i] = await CommitUntracked(fixture.Merger, $"k{i}");
        }

        // A few more, fewer than a queue segment holds, so every batch above went through the same segment.
        for (int i = 0; i < 5; i++)
        {
            await fixture.Merger.CommitAsync(new CommitBatch().Put("c", $"more{i}", Json("{}")));
        }

        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        for (int i = 0; i < committed.Length; i++)
        {
            Assert.False(committed[i].IsAlive, $"committed batch {i} is still reachable");
        }
    }

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static async Task<WeakReference> CommitUntracked(TransactionMerger merger, string id)
    {
        var batch = new CommitBatch().Put("c", id, Json("{\"a\":1}"));
        var reference = new WeakReference(batch);
        await merger.CommitAsync(batch);
        return reference;
    }
}
