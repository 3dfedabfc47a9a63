using System.Collections.Concurrent;
using System.Text;
using System.Text.Json;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Cancellation through the public API, as callers with request timeouts use it: a write's token cancels it only while
/// it waits for a commit group, so a write that throws <see cref="OperationCanceledException"/> was not committed and
/// one that returns was, however late its token fired. Tokens fire before the call, after a random delay on a timer,
/// or from another thread racing the commit; writes are puts, atomic two-document batches, deletes and session saves;
/// checkpoints run throughout. The check is made on the running store and again after a reopen.
/// </summary>
public sealed class WriteCancellationTests
{
    private const string Puts = "P";
    private const string Pairs = "Q";

    [Fact]
    public async Task A_write_cancelled_at_any_moment_is_either_refused_and_absent_or_acknowledged_and_present()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointThreshold = 128 * 1024;
        options.CheckpointInterval = TimeSpan.FromMilliseconds(20);
        var acknowledged = new ConcurrentQueue<(int Kind, string Id)>();
        var refused = new ConcurrentQueue<(int Kind, string Id)>();
        long lateAcknowledged = 0; // returned although the token had fired: it was taken into a group first
        long refusedInFlight = 0; // refused by a token that was not cancelled before the call
        double seconds = StressDuration.Seconds(2);
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Interlocked.Read(ref lateAcknowledged) < 20 || Interlocked.Read(ref refusedInFlight) < 20,
            TimeSpan.FromSeconds(60));

        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            Task[] writers = [.. Enumerable.Range(0, 16).Select(w => Task.Run(async () =>
            {
                var random = new Random(w);
                var live = new List<string>(); // this writer's acknowledged puts, not deleted
                for (int i = 0; !stop.IsCancellationRequested; i++)
                {
                    string id = $"w{w:D2}-{i:D6}";
                    int kind = random.Next(4);
                    if (kind == 2 && live.Count == 0)
                    {
                        kind = 0;
                    }

                    if (kind == 2)
                    {
                        int at = random.Next(live.Count);
                        id = live[at];
                        live[at] = live[^1];
                        live.RemoveAt(live.Count - 1);
                    }

                    using var cancel = new CancellationTokenSource();
                    int mode = random.Next(4);
                    Task racer = Task.CompletedTask;
                    if (mode == 1)
                    {
                        cancel.CancelAfter(TimeSpan.FromTicks(random.Next(1, 5_000)));
                    }
                    else if (mode == 2)
                    {
                        int spins = random.Next(1, 20_000);
                        racer = Task.Run(() =>
                        {
                            Thread.SpinWait(spins);
                            cancel.Cancel();
                        });
                    }
                    else if (mode == 3)
                    {
                        cancel.Cancel();
                    }

                    try
                    {
                        await WriteAsync(store, kind, id, i, cancel.Token);
                        acknowledged.Enqueue((kind, id));
                        if (kind == 0 || kind == 1)
                        {
                            live.Add(id);
                        }

                        if (cancel.IsCancellationRequested)
                        {
                            Interlocked.Increment(ref lateAcknowledged);
                        }
                    }
                    catch (OperationCanceledException)
                    {
                        refused.Enqueue((kind, id));
                        if (kind == 2)
                        {
                            live.Add(id); // not deleted: still there, and may be deleted later
                        }

                        if (mode is 1 or 2)
                        {
                            Interlocked.Increment(ref refusedInFlight);
                        }
                    }

                    await racer;
                }
            }))];
            // The writers run until the timer stops them (the run's length, extended by at most 60 s) and then finish.
            await Task.WhenAll(writers).WaitAsync(TimeSpan.FromSeconds(seconds + 60) + TestDeadline.Hang);
            AssertOutcomes(store, acknowledged, refused);
        }

        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            AssertOutcomes(reopened, acknowledged, refused);
        }

        Assert.True(Interlocked.Read(ref lateAcknowledged) >= 20,
            $"only {lateAcknowledged} writes were acknowledged after their token fired");
        Assert.True(Interlocked.Read(ref refusedInFlight) >= 20,
            $"only {refusedInFlight} writes were refused by a token not cancelled before the call");
    }

    [Fact]
    public async Task A_session_whose_save_was_cancelled_writes_its_changes_once_when_saved_again()
    {
        using var dir = new TempDirectory();
        // No checkpoint, so the change feed still holds every write at the end.
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.ManualCheckpoints());
        const int Writers = 8;
        const int Rounds = 300;
        const int IdsPerWriter = 20;
        long retried = 0;
        Task[] writers = [.. Enumerable.Range(0, Writers).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            for (int i = 0; i < Rounds; i++)
            {
                string id = $"w{w}-{i % IdsPerWriter}";
                await using DocumentSession session = store.OpenSession();
                Counter counter = await session.LoadAsync<Counter>(id) ?? new Counter { Id = id };
                counter.N++;
                if (counter.N == 1)
                {
                    session.Store(counter);
                }

                using var cancel = new CancellationTokenSource();
                if (random.Next(2) == 0)
                {
                    cancel.CancelAfter(TimeSpan.FromTicks(random.Next(1, 3_000)));
                }
                else
                {
                    cancel.Cancel();
                }

                try
                {
                    await session.SaveChangesAsync(cancel.Token);
                }
                catch (OperationCanceledException)
                {
                    Interlocked.Increment(ref retried);
                    await session.SaveChangesAsync(); // the same changes, still pending
                }

                long saved = session.GetVersion(counter);
                await session.SaveChangesAsync(); // nothing left to write
                StoredDocument stored = store.Get(nameof(Counter), id) ?? throw new InvalidOperationException(id);
                Assert.Equal(saved, stored.Version);
                Assert.Equal(counter.N, JsonDocument.Parse(stored.Json).RootElement.GetProperty("N").GetInt64());
            }
        }))];
        await Task.WhenAll(writers).WaitAsync(TestDeadline.Hang);
        Assert.True(Interlocked.Read(ref retried) > 100, $"only {retried} saves were cancelled");

        // Every round wrote its id exactly once: a cancelled save that had committed would show twice.
        var writes = new Dictionary<string, int>(StringComparer.Ordinal);
        await foreach (DocumentChange change in store.Changes.ReadAsync(1, store.LastCommittedSequence))
        {
            Assert.Equal(ChangeKind.Put, change.Kind);
            writes[change.Id] = writes.GetValueOrDefault(change.Id) + 1;
        }

        Assert.Equal(Writers * IdsPerWriter, writes.Count);
        Assert.All(writes, pair => Assert.Equal(Rounds / IdsPerWriter, pair.Value));
    }

    private static async Task WriteAsync(DocumentStore store, int kind, string id, int value,
        CancellationToken cancellationToken)
    {
        switch (kind)
        {
            case 0:
                await store.PutAsync(Puts, id, Json(id, value), cancellationToken: cancellationToken);
                break;
            case 1:
                var batch = new CommitBatch();
                batch.Put(Puts, id, Json(id, value));
                batch.Put(Pairs, id, Json(id, -value));
                await store.WriteAsync(batch, cancellationToken);
                break;
            case 2:
                await store.DeleteAsync(Puts, id, cancellationToken: cancellationToken);
                break;
            default:
                await using (DocumentSession session = store.OpenSession())
                {
                    session.Store(new Counter { Id = id, N = value });
                    await session.SaveChangesAsync(cancellationToken);
                }

                break;
        }
    }

    private static void AssertOutcomes(DocumentStore store, IEnumerable<(int Kind, string Id)> acknowledged,
        IEnumerable<(int Kind, string Id)> refused)
    {
        // Each id is written by one writer, put at most once and deleted at most once after its put was acknowledged,
        // so an acknowledged delete leaves it absent and an acknowledged put present unless a later delete says so.
        var deleted = new HashSet<string>(StringComparer.Ordinal);
        foreach ((int kind, string id) in acknowledged)
        {
            if (kind == 2)
            {
                deleted.Add(id);
                Assert.True(store.Get(Puts, id) is null, $"{id}: its delete was acknowledged, yet it is there");
            }
        }

        foreach ((int kind, string id) in acknowledged)
        {
            switch (kind)
            {
                case 0:
                    Assert.True(deleted.Contains(id) || store.Get(Puts, id) is not null,
                        $"{id}: its put was acknowledged, yet it is missing");
                    break;
                case 1:
                    Assert.True(deleted.Contains(id) || store.Get(Puts, id) is not null,
                        $"{id}: its batch was acknowledged, yet its first document is missing");
                    Assert.True(store.Get(Pairs, id) is not null,
                        $"{id}: its batch was acknowledged, yet its second document is missing");
                    break;
                case 3:
                    Assert.True(store.Get(nameof(Counter), id) is not null,
                        $"{id}: its session's save was acknowledged, yet it is missing");
                    break;
            }
        }

        foreach ((int kind, string id) in refused)
        {
            if (kind == 2)
            {
                Assert.True(deleted.Contains(id) || store.Get(Puts, id) is not null,
                    $"{id}: its delete was cancelled, yet it is gone");
                continue;
            }

            Assert.True(store.Get(Puts, id) is null && store.Get(Pairs, id) is null
                && store.Get(nameof(Counter), id) is null, $"{id}: its write was cancelled, yet it is there");
        }
    }

    private static byte[] Json(string id, int value) => Encoding.UTF8.GetBytes($"{{\"id\":\"{id}\",\"v\":{value}}}");

    private sealed class Counter
    {
        public string? Id { get; set; }

        public long N { get; set; }
    }
}
