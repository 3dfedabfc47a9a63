using System.Collections.Concurrent;
using System.Globalization;
using System.Text;
using Folio.Pages;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// <see cref="DocumentStore.ScanFilesAsync"/>: every document read from the files of a store another handle holds,
/// against the store's own scan; a scan held open while the writer rewrites and checkpoints everything many times,
/// and reopens, still reads its checkpoint (its <see cref="ReaderPin"/> keeps the chunks); a pin left by a reader that
/// died holds nothing; and scans taken while writers commit and checkpoints run match a model of the writes at one
/// commit.
/// </summary>
public sealed class StoreFileScanTests
{
    [Fact]
    public async Task Scanning_the_files_of_a_store_held_open_returns_what_the_store_holds()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        for (int i = 0; i < 300; i++)
        {
            await store.PutAsync("people", Id(i), Json(i));
        }

        // A surrogate pair: before U+E000 in UTF-16 order (the store's), after it in UTF-8's.
        await store.PutAsync("people", "\U0001F600a", Json(-1));
        await store.CheckpointAsync();
        await store.PutAsync("people", "\uE000", Json(-2)); // changes after the checkpoint around a checkpointed id
        await store.PutAsync("people", "\U0001F600b", Json(-7));
        for (int i = 0; i < 300; i += 3)
        {
            await store.DeleteAsync("people", Id(i)); // checkpointed documents deleted
        }

        await store.PutAsync("people", Id(3), Json(-3)); // one of them put again
        await store.PutAsync("people", Id(4), Json(-4)); // a checkpointed document overwritten
        await store.PutAsync("people", "k", Json(-5)); // before every checkpointed id
        await store.PutAsync("people", "z", Json(-6)); // after them
        for (int i = 0; i < 40; i++)
        {
            await store.PutAsync("orders", Id(i), Json(i)); // a collection the checkpoint does not have
        }

        await store.DeleteAsync("orders", Id(7));

        List<StoredDocument> read = await ScanAsync(dir.Path);

        List<StoredDocument> expected = [.. store.Scan("orders"), .. store.Scan("people")];
        Assert.Equal(expected.Count, read.Count);
        for (int i = 0; i < expected.Count; i++)
        {
            Assert.Equal(Describe(expected[i]), Describe(read[i]));
        }

        Assert.Equal(39 + 206, read.Count);
        Assert.Empty(Directory.GetFiles(Path.Combine(dir.Path, ReaderPin.FolderName))); // the pin went with the scan
    }

    [Fact]
    public async Task A_scan_of_a_store_without_a_checkpoint_reads_the_journal_and_a_missing_store_is_refused()
    {
        using var dir = new TempDirectory();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            Assert.Empty(await ScanAsync(dir.Path));
            for (int i = 0; i < 5; i++)
            {
                await store.PutAsync("people", Id(4 - i), Json(i));
            }

            List<StoredDocument> read = await ScanAsync(dir.Path);
            Assert.Equal([Id(0), Id(1), Id(2), Id(3), Id(4)], read.Select(d => d.Id));
        }

        await Assert.ThrowsAsync<DirectoryNotFoundException>(
            async () => await ScanAsync(Path.Combine(dir.Path, "nothing")));
        Assert.False(Directory.Exists(Path.Combine(dir.Path, "nothing")));
    }

    [Fact]
    public async Task A_scan_held_open_reads_its_checkpoint_while_the_writer_rewrites_it_checkpoints_and_reopens()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        using var logs = new CapturingLoggerFactory();
        options.LoggerFactory = logs;
        DocumentStore store = DocumentStore.Open(dir.Path, options);
        try
        {
            const int Count = 3000;
            for (int i = 0; i < Count; i++)
            {
                await store.PutAsync("items", Id(i), Json(i));
            }

            await store.CheckpointAsync();
            await store.PutAsync("items", Id(5), Json(-5)); // one change in the journal after the checkpoint
            List<string> expected = [.. store.Scan("items").Select(Describe)];
            var pinnedChunks = store.Pages.Chunks.Select(c => c.Id).ToHashSet();

            await using IAsyncEnumerator<StoredDocument> scan = DocumentStore.ScanFilesAsync(dir.Path)
                .GetAsyncEnumerator();
            var read = new List<string>();
            for (int i = 0; i < 10 && await scan.MoveNextAsync(); i++)
            {
                read.Add(Describe(scan.Current));
            }

            // Every document rewritten and checkpointed, again and again: without the pin the scan's chunks are
            // freed after two checkpoints and reused by the next.
            for (int round = 0; round < 3; round++)
            {
                await RewriteAllAsync(store, Count, round);
            }

            Assert.True(pinnedChunks.IsSubsetOf(store.Pages.Chunks.Select(c => c.Id)), "the pinned chunks are kept");
            Assert.Contains(logs.Lines, line => line.Id.Id == 5006 && line.Message.Contains("pinned them",
                StringComparison.Ordinal)); // and the operator is told why the space is not reused

            // The writer closes (a checkpoint) and opens again: the chunks its newest checkpoint no longer lists stay
            // out of its free space while the pin lives.
            await store.DisposeAsync();
            store = DocumentStore.Open(dir.Path, options);
            for (int round = 3; round < 6; round++)
            {
                await RewriteAllAsync(store, Count, round);
            }

            while (await scan.MoveNextAsync())
            {
                read.Add(Describe(scan.Current));
            }

            Assert.Equal(expected, read);
            await scan.DisposeAsync();

            // With the pin gone, the next checkpoints free the chunks it held.
            long before = store.Pages.UsedBytes - store.Pages.FreeBytes;
            await RewriteAllAsync(store, Count, 6);
            await RewriteAllAsync(store, Count, 7);
            Assert.False(pinnedChunks.Overlaps(store.Pages.Chunks.Select(c => c.Id)), "the pinned chunks are freed");
            long after = store.Pages.UsedBytes - store.Pages.FreeBytes;
            Assert.True(after < before, $"{after} bytes in chunks after the pin went, {before} before");
        }
        finally
        {
            await store.DisposeAsync();
        }
    }

    [Fact]
    public async Task A_pin_left_by_a_reader_that_died_is_deleted_and_holds_nothing()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 2000; i++)
        {
            await store.PutAsync("items", Id(i), Json(i));
        }

        await store.CheckpointAsync();
        var chunks = store.Pages.Chunks.ToList();
        string folder = Path.Combine(dir.Path, ReaderPin.FolderName);
        Directory.CreateDirectory(folder);
        string stale = Path.Combine(folder, "dead" + ReaderPin.Extension);
        await File.WriteAllBytesAsync(stale, ReaderPin.Encode(store.Pages.Current.Generation, chunks)); // no lock
        string damaged = Path.Combine(folder, "damaged" + ReaderPin.Extension);
        await File.WriteAllBytesAsync(damaged, [1, 2, 3]);

        await RewriteAllAsync(store, 2000, 0);
        Assert.False(File.Exists(stale), "the dead reader's pin is deleted");
        Assert.False(File.Exists(damaged));
        await RewriteAllAsync(store, 2000, 1);
        await RewriteAllAsync(store, 2000, 2);
        Assert.False(chunks.Select(c => c.Id).ToHashSet().Overlaps(store.Pages.Chunks.Select(c => c.Id)),
            "nothing is held for a reader that died");
    }

    [Fact]
    public async Task Scans_taken_while_writers_commit_and_checkpoints_reuse_chunks_match_the_writes_at_one_commit()
    {
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        const int Ids = 1500;
        for (int i = 0; i < Ids; i++)
        {
            await store.PutAsync(Collection(i), Id(i), Json(i));
        }

        var writes = new ConcurrentBag<(long Sequence, int Id, string? Json)>();
        var scans = new ConcurrentBag<List<StoredDocument>>();
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => scans.Count < 3 || store.Pages.Current.Generation < 6, TimeSpan.FromSeconds(60));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            int counter = 0;
            while (!stop.IsCancellationRequested)
            {
                int i = (random.Next(Ids / 2) * 2) + w; // each writer owns half the ids
                bool delete = random.Next(4) == 0;
                byte[] json = Json((w * 10_000_000) + counter++);
                long sequence = delete ? await store.DeleteAsync(Collection(i), Id(i))
                    : await store.PutAsync(Collection(i), Id(i), json);
                writes.Add((sequence, i, delete ? null : Encoding.UTF8.GetString(json)));
            }
        })).ToList();
        Task checkpointer = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync();
                await Task.Delay(1);
            }
        });
        Task scanner = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                var documents = new List<StoredDocument>();
                await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(dir.Path))
                {
                    documents.Add(document);
                    if (documents.Count % 100 == 0)
                    {
                        await Task.Delay(1); // checkpoints run under the scan
                    }
                }

                scans.Add(documents);
            }
        });
        await Task.WhenAll(writers.Append(checkpointer).Append(scanner));

        Assert.True(scans.Count >= 3, $"{scans.Count} scans");
        var ordered = writes.OrderBy(write => write.Sequence).ToList();
        foreach (List<StoredDocument> documents in scans)
        {
            AssertOneCommit(documents, ordered);
        }
    }

    /// <summary>The scan equals the model after some commit S at least its newest document's version (a commit can
    /// be durable, and so scanned, before its writer records it: no upper bound is taken from the writers).</summary>
    private static void AssertOneCommit(List<StoredDocument> documents,
        List<(long Sequence, int Id, string? Json)> writes)
    {
        for (int i = 1; i < documents.Count; i++)
        {
            Assert.True(string.CompareOrdinal(documents[i - 1].Collection + "/" + documents[i - 1].Id,
                documents[i].Collection + "/" + documents[i].Id) < 0, "collection and id order");
        }

        var read = documents.ToDictionary(d => int.Parse(d.Id[1..], CultureInfo.InvariantCulture),
            d => Encoding.UTF8.GetString(d.Json.Span));
        long newest = documents.Count == 0 ? 0 : documents.Max(d => d.Version);
        Dictionary<int, string> model = InitialModel();
        int next = 0;
        while (next < writes.Count && writes[next].Sequence <= newest)
        {
            Apply(model, writes[next++]);
        }

        while (true)
        {
            if (model.Count == read.Count && model.All(entry => read.TryGetValue(entry.Key, out string? json)
                && json == entry.Value))
            {
                return;
            }

            if (next == writes.Count)
            {
                Assert.Fail($"a scan of {read.Count} documents (newest version {newest}) matches the writes after no "
                    + "commit");
            }

            Apply(model, writes[next++]);
        }
    }

    private static Dictionary<int, string> InitialModel()
    {
        var model = new Dictionary<int, string>();
        for (int i = 0; i < 1500; i++)
        {
            model[i] = Encoding.UTF8.GetString(Json(i));
        }

        return model;
    }

    private static void Apply(Dictionary<int, string> model, (long Sequence, int Id, string? Json) write)
    {
        if (write.Json is null)
        {
            model.Remove(write.Id);
        }
        else
        {
            model[write.Id] = write.Json;
        }
    }

    private static async Task RewriteAllAsync(DocumentStore store, int count, int round)
    {
        for (int i = 0; i < count; i++)
        {
            await store.PutAsync("items", Id(i), Json(((round + 1) * 100_000) + i));
        }

        await store.CheckpointAsync();
    }

    private static async Task<List<StoredDocument>> ScanAsync(string folder)
    {
        var documents = new List<StoredDocument>();
        await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(folder))
        {
            documents.Add(document);
        }

        return documents;
    }

    private static string Describe(StoredDocument document) =>
        $"{document.Collection}/{document.Id}@{document.Version} {document.LastModified.UtcTicks} "
        + Encoding.UTF8.GetString(document.Json.Span);

    private static string Collection(int i) => i % 3 == 0 ? "a" : "b";

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"k{i:D4}");

    private static byte[] Json(int i) => Encoding.UTF8.GetBytes(
        string.Create(CultureInfo.InvariantCulture, $"{{\"n\":{i},\"pad\":\"{new string('x', 60)}\"}}"));
}
