using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary><see cref="DocumentStore.WriteAsync"/>: several raw puts and deletes, with expectations, as one
/// commit.</summary>
public sealed class WriteBatchTests
{
    /// <summary>A caller that goes on with its batch while the commit is in flight (a new put, a changed precondition
    /// or durability, its buffers filled with new bytes) changes nothing the commit reads: before the store took its
    /// own copy, the commit's apply read the grown command list and faulted the store for every caller.</summary>
    [Fact]
    public async Task A_batch_and_its_buffers_changed_while_the_commit_is_in_flight_change_nothing_it_commits()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.FileSystem = files;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int round = 0; round < 20; round++)
        {
            // Another commit holds its fsync, so this batch waits in the queue for the next group.
            files.SyncGateHoldsOne = true;
            (ManualResetEventSlim gate, Task<long> holder) = files.HoldNextSync(()
                => Task.Run(() => store.PutAsync("c", $"holder{round}", "{}"u8.ToArray()).AsTask()));

            byte[] buffer = Encoding.UTF8.GetBytes($"{{\"round\":{round}}}");
            var batch = new CommitBatch().Put("c", $"a{round}", buffer).Put("c", $"b{round}", buffer);
            ValueTask<CommitResult> commit = store.WriteAsync(batch);
            Assert.False(commit.IsCompleted);
            batch.Put("c", $"late{round}", "{}"u8.ToArray()).Delete("c", $"a{round}").Expect("c", $"b{round}", 99);
            batch.Durability = DurabilityMode.Buffered;
            Array.Fill(buffer, (byte)'!'); // not JSON any more
            gate.Set();
            await holder.WaitAsync(TestDeadline.Hang);
            CommitResult result = await commit.AsTask().WaitAsync(TestDeadline.Hang);

            foreach (string id in new[] { $"a{round}", $"b{round}" })
            {
                StoredDocument document = store.Get("c", id)!.Value;
                Assert.Equal($"{{\"round\":{round}}}", Encoding.UTF8.GetString(document.Json.Span));
                Assert.Equal(result.Sequence, document.Version);
            }

            Assert.Null(store.Get("c", $"late{round}"));
        }

        Assert.False(store.IsFaulted);
        var reused = new CommitBatch().Put("c", "reused", "{}"u8.ToArray());
        await store.WriteAsync(reused);
        await store.WriteAsync(reused.Put("c", "reused-too", "{}"u8.ToArray())); // reused once returned
        Assert.NotNull(store.Get("c", "reused-too"));
    }

    [Fact]
    public async Task A_batch_commits_every_put_and_delete_as_one_commit_or_nothing_when_an_expectation_fails()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        long first = await store.PutAsync("C", "old", "{\"n\":0}"u8.ToArray());

        CommitResult result = await store.WriteAsync(new CommitBatch()
            .Put("C", "a", "{\"n\":1}"u8.ToArray())
            .Put("D", "b", "{\"n\":2}"u8.ToArray())
            .Delete("C", "old")
            .Expect("C", "old", first)
            .Expect("C", "a", 0));
        Assert.Equal(first + 1, result.Sequence);
        Assert.Equal(result.Sequence, store.Get("C", "a")!.Value.Version);
        Assert.Equal(result.Sequence, store.Get("D", "b")!.Value.Version);
        Assert.Null(store.Get("C", "old"));

        // One failed expectation: nothing of the batch is written.
        var conflict = await Assert.ThrowsAsync<ConcurrencyException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "x", "{}"u8.ToArray())
            .Expect("C", "a", first)).AsTask());
        Assert.Equal([new DocumentKey("C", "a")], conflict.Conflicts);
        Assert.Null(store.Get("C", "x"));

        // Two expectations of one document cannot both hold: it is named once.
        conflict = await Assert.ThrowsAsync<ConcurrencyException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "x", "{}"u8.ToArray())
            .Expect("C", "a", result.Sequence)
            .Expect("C", "a", first)).AsTask());
        Assert.Equal([new DocumentKey("C", "a")], conflict.Conflicts);
        Assert.Null(store.Get("C", "x"));
        Assert.Equal(result.Sequence, store.LastCommittedSequence);

        var changes = new List<DocumentChange>();
        await foreach (DocumentChange change in store.Changes.ReadAsync(result.Sequence))
        {
            changes.Add(change);
            if (changes.Count == 3)
            {
                break;
            }
        }

        Assert.Equal([ChangeKind.Put, ChangeKind.Put, ChangeKind.Delete], changes.Select(c => c.Kind));
        Assert.All(changes, c => Assert.Equal(result.Sequence, c.Sequence));
    }

    [Fact]
    public async Task Bad_batches_are_refused_before_anything_is_written_and_the_store_stays_usable()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await Assert.ThrowsAsync<ArgumentNullException>(() => store.WriteAsync(null!).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(new CommitBatch()).AsTask());
        ArgumentException expectOnly = await Assert.ThrowsAsync<ArgumentException>(
            () => store.WriteAsync(new CommitBatch().Expect("C", "x", 0)).AsTask());
        Assert.Contains("expectations alone write nothing", expectOnly.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "ok", "{}"u8.ToArray()).Put("C", "bad\uD800", "{}"u8.ToArray())).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "ok", "{}"u8.ToArray()).Put("C", "utf8", new byte[] { (byte)'"', 0xFF, (byte)'"' })).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "ok", "{}"u8.ToArray()).Put("C", "json", "{"u8.ToArray())).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "ok", "{}"u8.ToArray()).Expect("C", "\uDC00", 0)).AsTask());
        await Assert.ThrowsAsync<DocumentTooLargeException>(() => store.WriteAsync(new CommitBatch()
            .Put("C", "big", Encoding.UTF8.GetBytes($"\"{new string('x', 70 * 1024)}\""))).AsTask());
        byte[] large = Encoding.UTF8.GetBytes($"\"{new string('x', 60 * 1024)}\""); // each fits; 20 do not
        var tooMuch = new CommitBatch();
        for (int i = 0; i < 20; i++)
        {
            tooMuch.Put("C", $"large{i}", large);
        }

        DocumentTooLargeException together = await Assert.ThrowsAsync<DocumentTooLargeException>(
            () => store.WriteAsync(tooMuch).AsTask());
        Assert.Contains("Split the changes over several commits", together.Message, StringComparison.Ordinal);
        Assert.Equal(0, store.LastCommittedSequence);
        Assert.Equal(1,
            (await store.WriteAsync(
            new CommitBatch { Durability = DurabilityMode.Buffered }.Put("C", "ok", "{}"u8.ToArray()))).Sequence);
    }

    [Fact]
    public async Task Committed_documents_are_unchanged_when_the_caller_reuses_its_buffers_after_the_commit()
    {
        using var dir = new TempDirectory();
        byte[] buffer = new byte[16];
        var expected = new Dictionary<string, string>();
        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            // One buffer, refilled for every write once the previous commit has completed (as a caller renting from
            // a pool does): what the store holds must be what each commit carried, before and after a checkpoint.
            for (int i = 0; i < 20; i++)
            {
                string json = $"{{\"n\":{i,6}}}";
                Encoding.UTF8.GetBytes(json, buffer);
                var batch = new CommitBatch().Put("C", $"w{i:D2}", buffer.AsMemory(0, json.Length));
                await store.WriteAsync(batch);
                expected[$"w{i:D2}"] = json;
            }

            // A put copies the bytes before it returns: the buffer may be refilled before the put is awaited.
            for (int i = 20; i < 40; i++)
            {
                string json = $"{{\"n\":{i,6}}}";
                Encoding.UTF8.GetBytes(json, buffer);
                ValueTask<long> put = store.PutAsync("C", $"w{i:D2}", buffer.AsMemory(0, json.Length));
                buffer.AsSpan().Fill((byte)'y');
                await put;
                expected[$"w{i:D2}"] = json;
            }

            buffer.AsSpan().Fill((byte)'x');
            AssertHolds(store);
            await store.CheckpointAsync();
            AssertHolds(store);
        }

        await using (var reopened = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            AssertHolds(reopened);
        }

        void AssertHolds(DocumentStore store)
        {
            foreach ((string id, string json) in expected)
            {
                Assert.Equal(json, Encoding.UTF8.GetString(store.Get("C", id)!.Value.Json.Span));
            }

            Assert.Equal(expected.Values, store.Scan("C").Select(d => Encoding.UTF8.GetString(d.Json.Span)));
        }
    }
}
