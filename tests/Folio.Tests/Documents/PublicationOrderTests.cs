using System.Diagnostics;
using System.Text;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// The publication order: a commit reaches journal readers (the change feed) only once it is durable and applied, so
/// a change-feed consumer never sees a change that is not on disk, nor one that <see cref="DocumentStore.Get"/> does
/// not show yet. Rotations (small segments), overlapping groups and the buffered-mode timer each once published a
/// group whose fsync was still in flight.
/// </summary>
public sealed class PublicationOrderTests
{
    public static TheoryData<int, bool> Pipelines => new()
    {
        { 1, false },
        { 2, false },
        { 2, true },
        { 4, true },
        { 6, true }, // the most groups in flight, with a 1 ms buffered-sync timer: every sync slot of a segment in use
    };

    [Theory]
    [MemberData(nameof(Pipelines))]
    public async Task The_change_feed_shows_only_commits_that_are_durable_and_already_visible_to_reads(
        int groupsInFlight, bool mixedDurability)
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions
        {
            SegmentSize = 64 * 1024,
            MaxDocumentSize = 8 * 1024,
            MaxGroupBytes = 16 * 1024,
            MaxGroupsInFlight = groupsInFlight,
            Durability = mixedDurability ? DurabilityMode.Buffered : DurabilityMode.Durable,
            BufferedSyncInterval = TimeSpan.FromMilliseconds(1),
        };
        await using var store = DocumentStore.Open(dir.Path, options);
        WriteAheadJournal journal = store.Journal;

        // Every id is written once, so a change in the feed must be readable with exactly its version.
        var clock = Stopwatch.StartNew();
        var duration = TimeSpan.FromSeconds(1.5);
        long written = 0;
        var writers = Enumerable.Range(0, 8).Select(w => Task.Run(async () =>
        {
            string padding = new('x', 200 + (w * 50));
            for (int n = 0; clock.Elapsed < duration
                || (journal.SegmentCount <= 12 && clock.Elapsed < TestDeadline.Hang / 2); n++)
            {
                await using var session = store.OpenSession();
                if (mixedDurability && w % 2 == 0)
                {
                    session.Durability = DurabilityMode.Durable;
                }

                session.Store(new User { Name = padding }, $"w{w}-{n}");
                await session.SaveChangesAsync();
                Interlocked.Increment(ref written);
            }
        })).ToList();

        string? violation = null;
        long seen = 0;
        using var readerStop = new CancellationTokenSource();
        Task reader = Task.Run(async () =>
        {
            try
            {
                await foreach (DocumentChange change in store.Changes.ReadAsync(1, readerStop.Token))
                {
                    seen++;
                    long durable = journal.DurableSequence;
                    StoredDocument? current = store.Get(change.Collection, change.Id);
                    if (change.Sequence > durable)
                    {
                        violation ??= $"change {change.Sequence} was published while only {durable} was durable";
                    }

                    if (current is null || current.Value.Version != change.Sequence)
                    {
                        violation ??= $"change {change.Sequence} ({change.Id}) was published before Get showed it " +
                            $"({(current is null ? "null" : current.Value.Version.ToString())})";
                    }
                }
            }
            catch (OperationCanceledException)
            {
            }
        });

        await Task.WhenAll(writers);
        await WaitUntilAsync(() => Volatile.Read(ref seen) >= Volatile.Read(ref written));
        readerStop.Cancel();
        await reader.WaitAsync(TestDeadline.Hang);
        Assert.Null(violation);
        Assert.True(journal.SegmentCount > 10, $"{journal.SegmentCount} segments: the test must cross many rotations");
        Assert.Equal(written, seen);
    }

    /// <summary>
    /// A group of many batches is applied to the index (on the apply thread) while its fsync runs: when that fsync
    /// fails, none of the group's documents may become visible (by id, by range, or in the visible sequence), and
    /// the commit acknowledged before it stays readable.
    /// </summary>
    [Fact]
    public async Task A_group_applied_during_an_fsync_that_fails_never_becomes_visible()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.FileSystem = files;
        options.CollectionName = static _ => "users";
        await using var store = DocumentStore.Open(dir.Path, options);
        long before = await store.PutAsync("users", "before", "{}"u8.ToArray());

        using var gate = new ManualResetEventSlim();
        files.SyncGateHoldsOne = true;
        files.SyncGate = gate;
        // may commit inline
        Task<long> first = Task.Run(() => store.PutAsync("users", "first", "{}"u8.ToArray()).AsTask());
        Assert.True(files.SyncWaiting.Wait(TimeSpan.FromSeconds(30)), "the first group reached its fsync");
        int size = CommitPipeline.MinBatchesToApplyDuringSync + 8;
        var group = Enumerable.Range(0, size)
            .Select(i => store.PutAsync("users", $"g/{i:D2}", "{}"u8.ToArray()).AsTask()).ToList();
        // the first group's sync is past its fault check: the next sync, the group's, fails
        files.Arm(FileFault.SyncFails);
        gate.Set();

        long firstSequence = await first;
        foreach (Task<long> put in group)
        {
            await Assert.ThrowsAsync<StoreFaultedException>(() => put);
        }

        Assert.True(store.IsFaulted);
        Assert.Equal(firstSequence, store.LastCommittedSequence);
        Assert.NotNull(store.Get("users", "before"));
        Assert.NotNull(store.Get("users", "first"));
        for (int i = 0; i < size; i++)
        {
            Assert.Null(store.Get("users", $"g/{i:D2}"));
        }

        await using DocumentSession session = store.OpenSession();
        Assert.Equal(2, await session.CountAsync<Users>());
        Assert.Equal(before + 1, firstSequence);
    }

    private sealed class Users
    {
    }

    [Fact]
    public async Task A_rotation_does_not_publish_a_group_whose_own_sync_is_still_in_flight()
    {
        using var fixture = new MergerFixture(o => o.MaxGroupsInFlight = 2, segmentSize: 4096);
        await fixture.Merger.CommitAsync(new CommitBatch().Put("c", "before", Encoding.UTF8.GetBytes("{}")));
        long before = fixture.Journal.CommittedSequence;

        // Group A's fsync is held; group B does not fit in the segment, so its write rotates (and syncs) A's segment.
        fixture.Files.SyncGateHoldsOne = true;
        Task<CommitResult>? a = null;
        var gate = fixture.HoldNextSync(()
            => a = Task.Run(()
            => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "a", Encoding.UTF8.GetBytes("{}"))).AsTask()));
        try
        {
            byte[] large = Encoding.UTF8.GetBytes($"{{\"p\":\"{new string('x', 3940)}\"}}");
            Task<CommitResult> b = Task.Run(()
                => fixture.Merger.CommitAsync(new CommitBatch().Put("c", "b", large)).AsTask());
            await WaitUntilAsync(() => fixture.Journal.SegmentCount >= 2
                && fixture.Journal.LastAppendedSequence >= before + 2);

            // A is durable now (the rotation synced it) but neither applied nor acknowledged: no reader may see it.
            Assert.True(fixture.Journal.DurableSequence > before);
            Assert.False(a!.IsCompleted);
            Assert.Equal(before, fixture.Journal.CommittedSequence);
            Assert.DoesNotContain("a", fixture.ReadBatches().Select(x => x.Commands[0].Key.Id));

            gate.Set();
            await Task.WhenAll(a, b).WaitAsync(TestDeadline.Hang);
            Assert.Equal(["before", "a", "b"], fixture.ReadBatches().Select(x => x.Commands[0].Key.Id));
        }
        finally
        {
            gate.Set();
        }
    }

    private static async Task WaitUntilAsync(Func<bool> condition)
    {
        var deadline = Stopwatch.StartNew();
        while (!condition())
        {
            Assert.True(deadline.Elapsed < TestDeadline.Hang, "the condition never became true");
            await Task.Delay(1);
        }
    }
}
