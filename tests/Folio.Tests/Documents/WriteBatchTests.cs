using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary><see cref="DocumentStore.WriteAsync"/>: several raw puts and deletes, with expectations, as one
/// commit.</summary>
public sealed class WriteBatchTests
{
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
        Assert.Equal(0, store.LastCommittedSequence);
        Assert.Equal(1,
            (await store.WriteAsync(
            new CommitBatch { Durability = DurabilityMode.Buffered }.Put("C", "ok", "{}"u8.ToArray()))).Sequence);
    }
}
