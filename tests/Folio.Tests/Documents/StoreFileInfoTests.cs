using System.Collections.Concurrent;
using System.Globalization;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// <see cref="DocumentStore.ReadInfoAsync"/>: a store described from its files while another handle holds it, against
/// the store's own <see cref="DocumentStore.GetInfo"/>, and against a model of the writes while writers commit and
/// checkpoints purge the journal under the reader.
/// </summary>
public sealed class StoreFileInfoTests
{
    [Fact]
    public async Task Reading_the_files_of_a_store_held_open_describes_it_as_the_store_does()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        for (int i = 0; i < 300; i++)
        {
            await store.PutAsync("people", Id(i), Json(i));
        }

        await store.CheckpointAsync();
        for (int i = 0; i < 300; i += 3)
        {
            await store.DeleteAsync("people", Id(i)); // checkpointed documents deleted
        }

        await store.PutAsync("people", Id(3), Json(-3)); // and one of them put again
        await store.PutAsync("people", Id(4), Json(-4)); // a checkpointed document overwritten
        for (int i = 0; i < 40; i++)
        {
            await store.PutAsync("orders", Id(i), Json(i)); // a collection the checkpoint does not have
        }

        await store.PutAsync("people", "new", Json(0));
        await store.DeleteAsync("orders", Id(7));

        StoreInfo expected = store.GetInfo();
        StoreInfo read = await DocumentStore.ReadInfoAsync(dir.Path);

        Assert.Equal(expected.Collections, read.Collections);
        Assert.Equal([new CollectionInfo("orders", 39), new CollectionInfo("people", 202)], read.Collections);
        Assert.Equal(expected.LastCommittedSequence, read.LastCommittedSequence);
        Assert.Equal(expected.CheckpointGeneration, read.CheckpointGeneration);
        Assert.Equal(expected.CheckpointSequence, read.CheckpointSequence);
        Assert.Equal(expected.JournalFirstSequence, read.JournalFirstSequence);
        Assert.Equal(expected.JournalBytes, read.JournalBytes);
        Assert.Equal(expected.DataFileBytes, read.DataFileBytes);
        Assert.Equal(expected.Chunks, read.Chunks);
        Assert.Equal(expected.FillRate, read.FillRate);
        Assert.Equal(expected with { Collections = read.Collections }, read);
    }

    [Fact]
    public async Task Free_space_between_chunks_is_reported_apart_from_the_fill_rate_and_compaction_gives_it_back()
    {
        // After checkpoints that rewrote every leaf, the chunks left behind are free space the fill rate does not
        // count: an operator reading only "fill rate 100 %" took a file twice its data for a full one.
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CompactionFillRate = 0; // no background pass: the file changes only when the test says
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        for (int round = 0; round < 3; round++)
        {
            var batch = new CommitBatch();
            for (int i = 0; i < 2_000; i++)
            {
                batch.Put("people", Id(i), Json((round * 10_000) + i)); // every leaf rewritten each round
            }

            await store.WriteAsync(batch);
            await store.CheckpointAsync();
        }

        StoreInfo info = store.GetInfo();
        Assert.Equal(1, info.FillRate); // every live chunk is full of live pages...
        Assert.True(info.DataFileFreeBytes > info.DataFileBytes / 3, $"{info}"); // ...and the file is mostly free
        Assert.Equal(info.DataFileFreeBytes, (await DocumentStore.ReadInfoAsync(dir.Path)).DataFileFreeBytes);

        CompactionResult compacted = await store.CompactAsync();
        StoreInfo after = store.GetInfo();
        Assert.True(after.DataFileFreeBytes < info.DataFileFreeBytes, $"{info} then {after}");
        Assert.True(after.DataFileBytes < info.DataFileBytes, $"{info} then {after}");
        Assert.Equal(compacted.DataFileBytesAfter, after.DataFileBytes);
    }

    [Fact]
    public async Task A_store_that_never_checkpointed_is_described_from_its_journal_and_a_missing_one_is_refused()
    {
        using var dir = new TempDirectory();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            StoreInfo empty = await DocumentStore.ReadInfoAsync(dir.Path);
            Assert.Empty(empty.Collections);
            Assert.Equal(0, empty.LastCommittedSequence);
            for (int i = 0; i < 5; i++)
            {
                await store.PutAsync("people", Id(i), Json(i));
            }

            StoreInfo read = await DocumentStore.ReadInfoAsync(dir.Path);
            Assert.Equal([new CollectionInfo("people", 5)], read.Collections);
            Assert.Equal(5, read.LastCommittedSequence);
            Assert.Equal(0, read.CheckpointGeneration);
        }

        await Assert.ThrowsAsync<DirectoryNotFoundException>(
            () => DocumentStore.ReadInfoAsync(Path.Combine(dir.Path, "nothing")));
        Assert.False(Directory.Exists(Path.Combine(dir.Path, "nothing")));
    }

    [Fact]
    public async Task A_damaged_page_the_description_needs_is_reported_not_retried_forever()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointOnClose = false;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 20; i++)
            {
                await store.PutAsync("people", Id(i), Json(i));
            }

            await store.CheckpointAsync(); // one chunk right after the two header slots: the tree and the catalog
            await store.PutAsync("people", Id(3), Json(-3)); // a change after it, so the tree is searched
        }

        FileDamage.FlipByte(Path.Combine(dir.Path, "data.folio"), 8192 + 64 + 40, 0x01);
        StoreCorruptedException error = await Assert.ThrowsAnyAsync<StoreCorruptedException>(
            () => DocumentStore.ReadInfoAsync(dir.Path));
        Assert.Contains("data.folio", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Descriptions_read_while_writers_commit_and_checkpoints_purge_match_the_writes_up_to_them()
    {
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        const int Ids = 300;
        var writes = new ConcurrentBag<(long Sequence, int Id, bool Live)>();
        var reads = new ConcurrentBag<StoreInfo>();
        // Past the duration, until a few descriptions were read and one of them after a second checkpoint.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => reads.Count < 5 || !reads.Any(read => read.CheckpointGeneration > 1), TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            while (!stop.IsCancellationRequested)
            {
                int i = (random.Next(Ids / 2) * 2) + w; // each writer owns half the ids
                bool delete = random.Next(3) == 0;
                long sequence = delete ? await store.DeleteAsync("items", Id(i))
                    : await store.PutAsync("items", Id(i), Json(i));
                writes.Add((sequence, i, !delete));
            }
        })).ToList();
        Task checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync(); // each purges the journal segments it covers
                await Task.Delay(2);
            }
        });
        Task reader = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                reads.Add(await DocumentStore.ReadInfoAsync(dir.Path));
            }
        });
        await Task.WhenAll(writers.Append(checkpointer).Append(reader));

        var ordered = writes.OrderBy(write => write.Sequence).ToList();
        Assert.True(reads.Count >= 5, $"{reads.Count} descriptions read");
        Assert.Contains(reads, read => read.CheckpointGeneration > 1);
        foreach (StoreInfo read in reads)
        {
            var live = new HashSet<int>();
            foreach ((_, int id, bool alive) in ordered.TakeWhile(w => w.Sequence <= read.LastCommittedSequence))
            {
                if (alive)
                {
                    live.Add(id);
                }
                else
                {
                    live.Remove(id);
                }
            }

            long counted = read.Collections.SingleOrDefault(c => c.Name == "items")?.Documents ?? 0;
            Assert.True(live.Count == counted, $"at sequence {read.LastCommittedSequence} (checkpoint "
                + $"{read.CheckpointGeneration} at {read.CheckpointSequence}): {counted} counted, "
                + $"{live.Count} written");
        }
    }

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"k{i:D4}");

    private static byte[] Json(int i) =>
        Encoding.UTF8.GetBytes(string.Create(CultureInfo.InvariantCulture, $"{{\"n\":{i}}}"));
}
