using System.Text;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Backups;

/// <summary>
/// The scrub (<see cref="DocumentStore.VerifyAsync"/>): it reads every page and journal record back from disk while
/// the store serves traffic, reports each damaged chunk or segment by file and offset, and goes on past the first.
/// </summary>
public sealed class StoreVerifyTests
{
    [Fact]
    public async Task A_healthy_store_verifies_while_writers_commit_and_reports_its_progress()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"), options);
        await FillAsync(store, 3000);
        await store.CheckpointAsync();
        await FillAsync(store, 500);

        using var stop = new CancellationTokenSource();
        Task writer = Task.Run(async () =>
        {
            int n = 0;
            while (!stop.IsCancellationRequested)
            {
                await store.PutAsync("people", $"live{n++ % 100}", "{\"live\":true}"u8.ToArray());
            }
        });
        var reports = new List<VerifyProgress>();
        var progress = new SynchronousProgress<VerifyProgress>(reports.Add);
        VerifyResult result = await store.VerifyAsync(progress);
        stop.Cancel();
        await writer;

        Assert.True(result.IsHealthy, string.Join("\n", result.Problems));
        Assert.True(result.Chunks >= 1);
        Assert.True(result.Pages > 10);
        Assert.True(result.JournalSegments >= 2);
        Assert.True(result.JournalRecords >= 500);
        Assert.NotEmpty(reports);
        Assert.Equal(result.Bytes, reports[^1].Bytes);
        Assert.True(reports[^1].Bytes <= reports[^1].TotalBytes + (256 * 1024));
    }

    [Fact]
    public async Task A_flipped_bit_in_a_page_and_in_a_journal_record_are_both_reported()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        await using DocumentStore store = OpenCheckpointedOnDemand(folder);
        await FillAsync(store, 2000);
        await store.CheckpointAsync(); // one chunk right after the two header slots
        await FillAsync(store, 2000); // journal segments after the checkpoint

        string dataFile = Path.Combine(folder, "data.folio");
        FileDamage.FlipByte(dataFile, 8192 + 64 + 100, 0x10);
        string firstSegment = Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal").Order().First();
        FileDamage.FlipByte(firstSegment, 64 + 60, 0x10);

        VerifyResult result = await store.VerifyAsync();
        Assert.False(result.IsHealthy);
        Assert.Equal(2, result.Problems.Count);
        Assert.Contains(result.Problems, p => p.Contains("data.folio", StringComparison.Ordinal)
            && p.Contains("at offset 8256", StringComparison.Ordinal));
        Assert.Contains(result.Problems, p => p.Contains(Path.GetFileName(firstSegment), StringComparison.Ordinal)
            && p.Contains("checksum", StringComparison.Ordinal));
        Assert.True(result.JournalSegments >= 2, "the scrub went on past the damaged segment");
    }

    [Fact]
    public async Task Damaged_chunks_among_many_are_each_reported_in_chunk_order_and_every_other_page_is_checked()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        await using DocumentStore store = OpenCheckpointedOnDemand(folder);
        for (int c = 0; c < 12; c++)
        {
            // One collection per checkpoint: each chunk stays live, so the checkpoint lists twelve or more.
            for (int i = 0; i < 200; i++)
            {
                await store.PutAsync($"c{c:D2}", $"doc{i:D4}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
            }

            await store.CheckpointAsync();
        }

        List<Folio.Pages.ChunkInfo> chunks = store.Pages.ReadChunkTable(store.Pages.Current);
        Assert.True(chunks.Count >= 12, $"{chunks.Count} chunks");
        var reports = new List<VerifyProgress>();
        VerifyResult healthy = await store.VerifyAsync(new SynchronousProgress<VerifyProgress>(reports.Add));
        Assert.True(healthy.IsHealthy, string.Join("\n", healthy.Problems));
        Assert.Equal(chunks.Count, healthy.Chunks);
        for (int i = 1; i < reports.Count; i++)
        {
            Assert.True(reports[i].Bytes > reports[i - 1].Bytes, "progress only grows");
        }

        // The first page of a late chunk and of an early one (damaged in that order).
        Folio.Pages.ChunkInfo[] damaged = [chunks[^2], chunks[1]];
        foreach (Folio.Pages.ChunkInfo chunk in damaged)
        {
            FileDamage.FlipByte(Path.Combine(folder, "data.folio"), chunk.FileOffset + 64 + 40, 0x04);
        }

        VerifyResult result = await store.VerifyAsync();
        Assert.Equal(2, result.Problems.Count);
        Assert.Contains($"chunk {chunks[1].Id} page", result.Problems[0], StringComparison.Ordinal);
        Assert.Contains($"chunk {chunks[^2].Id} page", result.Problems[1], StringComparison.Ordinal);
        Assert.Equal(healthy.Pages - chunks[1].PageCount - chunks[^2].PageCount, result.Pages);

        VerifyResult files = await DocumentStore.VerifyFilesAsync(folder);
        Assert.Equal(result.Problems, files.Problems);
        Assert.Equal(result.Pages, files.Pages);
    }

    [Fact]
    public async Task The_files_of_a_store_held_open_verify_healthy_while_writers_commit_and_checkpoints_free_chunks()
    {
        // The scrub of the files races the writer: chunks it listed are freed and reused, segments purged; none of
        // that may be reported as damage.
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.PagesPerChunk = 4;
        string folder = Path.Combine(dir.Path, "store");
        await using DocumentStore store = DocumentStore.Open(folder, options);
        await FillAsync(store, 4000);
        await store.CheckpointAsync();
        using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(seconds));
        Task writer = Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                await store.PutAsync("people", $"p{n * 7 % 4000}", "{\"live\":true}"u8.ToArray());
                if (n % 5 == 0)
                {
                    await store.CheckpointAsync();
                }
            }
        });
        var results = new List<VerifyResult>();
        while (!stop.IsCancellationRequested || results.Count < 3)
        {
            results.Add(await DocumentStore.VerifyFilesAsync(folder));
        }

        await writer;
        Assert.All(results, result => Assert.True(result.IsHealthy, string.Join("\n", result.Problems)));
        Assert.All(results, result => Assert.True(result.Chunks >= 1 && result.Pages >= 1 && result.JournalRecords > 0,
            $"{result}"));
    }

    [Fact]
    public async Task The_files_of_a_closed_store_report_a_flipped_bit_in_a_page_and_in_a_journal_record()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointOnClose = false;
        string folder = Path.Combine(dir.Path, "store");
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await FillAsync(store, 2000);
            await store.CheckpointAsync(); // one chunk right after the two header slots
            await FillAsync(store, 2000); // journal segments after the checkpoint
        }

        VerifyResult healthy = await DocumentStore.VerifyFilesAsync(folder);
        Assert.True(healthy.IsHealthy, string.Join("\n", healthy.Problems));
        string dataFile = Path.Combine(folder, "data.folio");
        FileDamage.FlipByte(dataFile, 8192 + 64 + 100, 0x10);
        string firstSegment = Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal").Order().First();
        FileDamage.FlipByte(firstSegment, 64 + 60, 0x10);

        var reports = new List<VerifyProgress>();
        VerifyResult result = await DocumentStore.VerifyFilesAsync(folder,
            new SynchronousProgress<VerifyProgress>(reports.Add));
        Assert.Equal(2, result.Problems.Count);
        Assert.Contains(result.Problems, p => p.Contains("data.folio", StringComparison.Ordinal)
            && p.Contains("at offset 8256", StringComparison.Ordinal));
        Assert.Contains(result.Problems, p => p.Contains(Path.GetFileName(firstSegment), StringComparison.Ordinal));
        Assert.True(result.JournalSegments >= 2, "the scrub went on past the damaged segment");
        Assert.True(result.JournalRecords > 1000, $"{result.JournalRecords} entries checked after the damage");
        Assert.Equal(result.Bytes, reports[^1].Bytes);
    }

    [Fact]
    public async Task The_files_of_a_closed_store_report_damage_to_the_last_journal_record_its_durable_mark_covers()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        await using (DocumentStore store = DocumentStore.Open(folder,
            TestStoreOptions.KeepingJournal(TestStoreOptions.TinySegments())))
        {
            await FillAsync(store, 300);
        }

        // The last record of the newest segment, with nothing after it: bytes like a torn append's, but the clean
        // close's durable mark says the record was durable.
        string newest = Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal").Order().Last();
        (long last, JournalFormat.RecordHeader header) = JournalTestExtensions.SegmentRecords(newest)[^1];
        FileDamage.FlipByte(newest, last + header.Length - 2, 0x10);
        VerifyResult result = await DocumentStore.VerifyFilesAsync(folder);
        string problem = Assert.Single(result.Problems);
        Assert.Contains(Path.GetFileName(newest), problem, StringComparison.Ordinal);
        Assert.Contains("durable mark", problem, StringComparison.Ordinal);
        Assert.True(last > JournalFormat.SegmentHeaderSize, "the segment holds more than one record");
    }

    [Fact]
    public async Task A_scrub_is_cancelled_and_the_store_stays_usable()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"),
            TestStoreOptions.TinySegments());
        await FillAsync(store, 500);
        using var cancel = new CancellationTokenSource();
        cancel.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => store.VerifyAsync(null, cancel.Token).AsTask());
        Assert.True((await store.VerifyAsync()).IsHealthy);
        await store.PutAsync("people", "after", "{}"u8.ToArray());
    }

    /// <summary>A store with tiny segments that checkpoints only when asked (so its chunks are where a test puts
    /// them).</summary>
    private static DocumentStore OpenCheckpointedOnDemand(string folder)
    {
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        return DocumentStore.Open(folder, options);
    }

    private static async Task FillAsync(DocumentStore store, int count)
    {
        for (int i = 0; i < count; i++)
        {
            string json = $"{{\"n\":{i},\"pad\":\"{new string('q', 100)}\"}}";
            await store.PutAsync(i % 3 == 0 ? "orders" : "people", $"doc{i % 1500:D5}", Encoding.UTF8.GetBytes(json));
        }
    }
}
