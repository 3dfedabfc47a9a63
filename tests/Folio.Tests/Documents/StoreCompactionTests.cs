using System.Text;
using Folio.Pages;
using Folio.Tests.Infrastructure;
using Folio.Tests.Pages;

namespace Folio.Tests.Documents;

/// <summary>
/// Compaction of the data file: sparse chunks' live pages (overflow values too) move into new chunks, the emptied
/// chunks are freed and the file's free tail is given back, every document stays as it was, and background compaction
/// keeps a steadily overwritten store's file bounded while writers commit and readers scan.
/// </summary>
public sealed class StoreCompactionTests
{
    [Fact]
    public async Task Compacting_rewrites_sparse_chunks_gives_the_space_back_and_keeps_every_document()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CompactionFillRate = 0; // on demand only
        string folder = Path.Combine(dir.Path, "store");
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        long before;
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await WriteSparseChunksAsync(store, model);
            before = new FileInfo(Path.Combine(folder, "data.folio")).Length;
            double fillBefore = store.Pages.LastCheckpoint.FillRate;
            Assert.True(fillBefore < DocumentStoreOptions.DefaultCompactionFillRate, $"fill {fillBefore}");
            CompactionResult result = await store.CompactAsync();
            Assert.True(result.ChunksRewritten > 0, $"{result}");
            Assert.True(result.PagesRewritten > 0, $"{result}");
            Assert.Equal(before, result.DataFileBytesBefore);
            Assert.True(result.FillRate >= DocumentStoreOptions.DefaultCompactionFillRate, $"{result}");
            Assert.True(result.DataFileBytesAfter <= before + (8 * 1024), $"{result}");
            PageStoreModel.AssertLiveCountsMatchTheTrees(store.Pages);
            AssertHolds(store, model);
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }

        await AssertReopenedHoldsAsync(folder, options, model);
    }

    [Fact]
    public async Task Compacting_moves_the_last_chunk_forward_and_gives_the_end_of_the_file_back()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CompactionFillRate = 0;
        string folder = Path.Combine(dir.Path, "store");
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await PutAsync(store, model, Enumerable.Range(0, 3000), round: 0);
            await store.CheckpointAsync(); // chunk A at the start
            await PutAsync(store, model, Enumerable.Range(0, 3000), round: 1);
            await store.CheckpointAsync(); // chunk B after it; A dead
            await PutAsync(store, model, [5], round: 2);
            await store.CheckpointAsync(); // A's extent freed
            await PutAsync(store, model, Enumerable.Range(0, 3000).Where(i => i % 10 != 0), round: 3);
            await store.CheckpointAsync(); // chunk D in A's extent; B, at the end, superseded
            long before = store.Pages.FileLength;

            CompactionResult result = await store.CompactAsync();
            Assert.True(result.ChunksRewritten >= 1, $"{result}");
            Assert.True(result.DataFileBytesAfter < before * 2 / 3, $"{result}");
            Assert.Equal(result.DataFileBytesAfter, new FileInfo(Path.Combine(folder, "data.folio")).Length);
            PageStoreModel.AssertLiveCountsMatchTheTrees(store.Pages);
            AssertHolds(store, model);
        }

        await AssertReopenedHoldsAsync(folder, options, model);
    }

    [Fact]
    public async Task Compacting_covers_the_commits_not_yet_checkpointed_so_no_later_checkpoint_undoes_it()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options(); // no background checkpoints
        options.CompactionFillRate = 0;
        string folder = Path.Combine(dir.Path, "store");
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await PutAsync(store, model, Enumerable.Range(0, 3000), round: 0);
            await store.CheckpointAsync();
            for (int round = 1; round <= 3; round++)
            {
                await PutAsync(store, model, Enumerable.Range(0, 3000).Where(i => i % 4 != round), round);
                await store.CheckpointAsync();
            }

            // Overwrites of every leaf, committed but not checkpointed when compaction starts.
            await PutAsync(store, model, Enumerable.Range(0, 3000).Where(i => i % 3 == 0), round: 4);
            long committed = store.LastCommittedSequence;
            Assert.True(store.Pages.LastCheckpoint.Sequence < committed);

            CompactionResult result = await store.CompactAsync();
            Assert.Equal(committed, store.Pages.LastCheckpoint.Sequence);
            Assert.True(result.FillRate >= DocumentStoreOptions.DefaultCompactionFillRate, $"{result}");
            Assert.Equal(result.FillRate, store.Pages.LastCheckpoint.FillRate);
            Assert.Equal(result.DataFileBytesAfter, store.Pages.FileLength);

            await store.CheckpointAsync(); // nothing left to cover: the compacted chunks stay as they are
            Assert.Equal(result.FillRate, store.Pages.LastCheckpoint.FillRate);
            PageStoreModel.AssertLiveCountsMatchTheTrees(store.Pages);
            AssertHolds(store, model);
        }

        await AssertReopenedHoldsAsync(folder, options, model);
    }

    [Fact]
    public async Task Background_compaction_bounds_the_file_while_writers_overwrite_and_readers_scan()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CheckpointThreshold = 64 * 1024;
        options.CheckpointInterval = TimeSpan.FromMilliseconds(20);
        options.CompactionPassInterval = TimeSpan.FromMilliseconds(20);
        options.CompactionBytesPerSecond = 256 * 1024;
        string folder = Path.Combine(dir.Path, "store");
        var model = new System.Collections.Concurrent.ConcurrentDictionary<string, string>(StringComparer.Ordinal);
        await using DocumentStore store = DocumentStore.Open(folder, options);
        var seed = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await PutAsync(store, seed, Enumerable.Range(0, 2000), round: 0);
        foreach ((string id, string json) in seed)
        {
            model[id] = json;
        }

        using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(3));
        var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
        Task[] writers = [.. Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            for (int n = 1; !stop.IsCancellationRequested; n++)
            {
                // Each writer owns the ids i % 4 == w, so the model's last write is the store's.
                int i = (random.Next(500) * 4) + w;
                string id = Id(i);
                string json = Json(i, n, 60);
                await store.PutAsync("docs", id, Encoding.UTF8.GetBytes(json));
                model[id] = json;
            }
        }))];
        Task reader = Task.Run(() =>
        {
            var random = new Random(9);
            while (!stop.IsCancellationRequested)
            {
                int from = random.Next(1900);
                int seen = 0;
                string? previous = null;
                foreach (StoredDocument document in store.Scan("docs", Id(from), Id(from + 100)))
                {
                    if (previous is not null && string.CompareOrdinal(previous, document.Id) >= 0)
                    {
                        failures.Enqueue($"scan out of order: {previous} then {document.Id}");
                    }

                    if (!Encoding.UTF8.GetString(document.Json.Span).StartsWith($"{{\"i\":{int.Parse(
                        document.Id.AsSpan(1), System.Globalization.CultureInfo.InvariantCulture)},",
                        StringComparison.Ordinal))
                    {
                        failures.Enqueue($"{document.Id} holds another document's bytes");
                    }

                    previous = document.Id;
                    seen++;
                }

                if (seen != 100)
                {
                    failures.Enqueue($"a scan of 100 ids from {from} saw {seen}");
                }
            }
        });
        await Task.WhenAll([.. writers, reader]);
        Assert.Empty(failures);

        foreach ((string id, string json) in model)
        {
            Assert.Equal(json, Encoding.UTF8.GetString(store.Get("docs", id)!.Value.Json.Span));
        }

        Assert.True((await store.VerifyAsync()).IsHealthy);
        CompactionResult final = await store.CompactAsync();
        long live = (long)(final.DataFileBytesAfter * final.FillRate);
        Assert.True(final.FillRate >= DocumentStoreOptions.DefaultCompactionFillRate, $"{final}");
        Assert.True(store.Pages.LastCheckpoint.FillRate > 0.5, "background compaction kept the chunks filled");
        Assert.True(live > 0);
    }

    [Fact]
    public async Task A_checkpoint_asked_to_compact_compacts_even_when_an_earlier_checkpoint_took_its_commits()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CompactionFillRate = 0; // no background pass: the request is the only compaction
        string folder = Path.Combine(dir.Path, "store");
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await WriteSparseChunksAsync(store, model);
            Assert.True(store.Pages.LastCheckpoint.FillRate < DocumentStoreOptions.DefaultCompactionFillRate);

            // A checkpoint asked to compact too can find its commits checkpointed already (here by the checkpoint
            // just before; in a store, by a background one that ran first): it must still compact.
            await store.CheckpointAndCompactAsync(
                new CompactionRequest(DocumentStoreOptions.DefaultCompactionFillRate, long.MaxValue));
            Assert.True(store.Pages.LastCheckpoint.CompactedChunks > 0, $"{store.Pages.LastCheckpoint}");
            Assert.Equal(store.LastCommittedSequence, store.Pages.LastCheckpoint.Sequence);
            PageStoreModel.AssertLiveCountsMatchTheTrees(store.Pages);
            AssertHolds(store, model);
        }

        await AssertReopenedHoldsAsync(folder, options, model);
    }

    [Fact]
    public async Task Checkpoints_rewriting_a_growing_tree_reuse_the_space_of_the_one_before_in_pieces()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CompactionFillRate = 0; // placement alone, no compaction
        string folder = Path.Combine(dir.Path, "store");
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            // Every round rewrites every document a little longer, so each checkpoint writes a whole tree slightly
            // larger than the one whose space the round before freed. In one chunk it would not fit that space and
            // would go to the end (three trees' worth of file); in chunks of at most 256 pages it fills the space
            // and puts only the excess at the end.
            for (int round = 0; round < 6; round++)
            {
                await PutAsync(store, model, Enumerable.Range(0, 40_000), round, pad: 400 + (round * 40));
                await store.CheckpointAsync();
                Assert.True(store.Pages.LastCheckpoint.Pages > ChunkFormat.MaxPagesPerChunk);
                Assert.True(store.Pages.Chunks.Count(c => c.DeadAt == 0) >= 2, "the tree spans chunks");
                long live = store.Pages.Chunks.Where(c => c.DeadAt == 0).Sum(c => c.LiveBytes);
                const long chunk = 256 * 17 * 1024; // a full chunk of 16 KiB pages, with its metadata
                Assert.True(store.Pages.FileLength <= (2 * live) + (2 * chunk),
                    $"round {round}: file {store.Pages.FileLength}, live {live}");
            }

            AssertHolds(store, model);
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }

        await AssertReopenedHoldsAsync(folder, options, model);
    }

    /// <summary>Writes 3,000 documents, then rounds of overwrites, each checkpointed, that leave chunks sparse: every
    /// round but a sliding tenth of the ids (the first chunk keeps a few live pages, later chunks are superseded in
    /// part), three overflow values, and 1,500 ids from 100.</summary>
    private static async Task WriteSparseChunksAsync(DocumentStore store, SortedDictionary<string, string> model)
    {
        await PutAsync(store, model, Enumerable.Range(0, 3000), round: 0);
        await store.CheckpointAsync();
        for (int round = 1; round <= 8; round++)
        {
            await PutAsync(store, model, Enumerable.Range(0, 3000).Where(i => i % 10 != round % 10), round);
            await store.CheckpointAsync();
        }

        await PutAsync(store, model, [1, 2, 3], round: 99, big: true); // overflow values
        await store.CheckpointAsync();
        await PutAsync(store, model, Enumerable.Range(100, 1500), round: 100);
        await store.CheckpointAsync();
    }

    private static DocumentStoreOptions Options()
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = 2 << 20;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        return options;
    }

    /// <summary>The id of document <paramref name="i"/> (<see cref="PutAsync"/>'s).</summary>
    internal static string Id(int i) => $"d{i:D5}";

    /// <summary>The JSON <see cref="PutAsync"/> puts for document <paramref name="i"/> in <paramref name="round"/>,
    /// padded with <paramref name="pad"/> characters.</summary>
    internal static string Json(int i, int round, int pad = 250) =>
        $"{{\"i\":{i},\"round\":{round},\"pad\":\"{new string('x', pad)}\"}}";

    /// <summary>Puts document "d{i:D5}" of collection "docs" for each of <paramref name="ids"/>, in commits of
    /// <paramref name="perCommit"/>, and records each in <paramref name="model"/>.</summary>
    internal static async Task PutAsync(DocumentStore store, IDictionary<string, string> model,
        IEnumerable<int> ids, int round, bool big = false, int pad = 0, int perCommit = 200)
    {
        var batch = new CommitBatch();
        foreach (int i in ids)
        {
            string json = Json(i, round, pad > 0 ? pad : big ? 5000 : 60);
            batch.Put("docs", Id(i), Encoding.UTF8.GetBytes(json));
            model[Id(i)] = json;
            if (batch.Count == perCommit)
            {
                await store.WriteAsync(batch);
                batch = new CommitBatch();
            }
        }

        if (batch.Count > 0)
        {
            await store.WriteAsync(batch);
        }
    }

    /// <summary>The store reopened from <paramref name="folder"/> holds <paramref name="model"/> and scrubs
    /// healthy.</summary>
    private static async Task AssertReopenedHoldsAsync(string folder, DocumentStoreOptions options,
        SortedDictionary<string, string> model)
    {
        await using DocumentStore reopened = DocumentStore.Open(folder, options);
        AssertHolds(reopened, model);
        Assert.True((await reopened.VerifyAsync()).IsHealthy);
    }

    /// <summary>The store's collection <c>docs</c> holds exactly <paramref name="model"/> (id to JSON).</summary>
    internal static void AssertHolds(DocumentStore store, IReadOnlyDictionary<string, string> model)
    {
        var seen = store.Scan("docs").ToDictionary(d => d.Id, d => Encoding.UTF8.GetString(d.Json.Span));
        Assert.Equal(model.Count, seen.Count);
        foreach ((string id, string json) in model)
        {
            Assert.Equal(json, seen[id]);
        }
    }
}
