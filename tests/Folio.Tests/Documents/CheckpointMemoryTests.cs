using System.Text;
using System.Text.RegularExpressions;
using Folio.Documents;
using Folio.Pages;
using Folio.Tests.Infrastructure;
using Microsoft.Extensions.Logging;
using static Folio.Tests.Documents.StoreCompactionTests;

namespace Folio.Tests.Documents;

/// <summary>
/// What a checkpoint holds in memory: every page its changes touch, decoded and serialized. Documents written at
/// scattered ids into a store larger than a checkpoint's memory touch a page each, so background checkpoints start
/// after fewer of them and commits wait while the next one would outgrow it; compaction on demand rewrites in passes
/// of a bounded size; and the defaults of the memory settings follow the memory the process may use (a container's
/// limit), so a store opened with defaults in a small container does not run it out of memory.
/// </summary>
public sealed partial class CheckpointMemoryTests
{
    [Fact]
    public void The_memory_defaults_follow_the_memory_the_process_may_use_and_explicit_settings_are_kept()
    {
        // A container of 512 MiB: the collector may use 384 MiB.
        var small = new DocumentStoreOptions { FixedAvailableMemory = 384L << 20 };
        Assert.Equal(0, small.CacheSize);
        Assert.Equal(48L << 20, small.EffectiveCacheSize);
        Assert.Equal(48L << 20, small.EffectiveBackpressureThreshold);
        Assert.Equal(24L << 20, small.EffectiveCheckpointThreshold); // starts before commits wait
        Assert.Equal(48L << 20, small.CheckpointMemory);

        // A machine with memory to spare: the documented caps.
        var large = new DocumentStoreOptions { FixedAvailableMemory = 64L << 30 };
        Assert.Equal(DocumentStoreOptions.DefaultCacheSize, large.EffectiveCacheSize);
        Assert.Equal(4 * DocumentStoreOptions.DefaultCheckpointThreshold, large.EffectiveBackpressureThreshold);
        Assert.Equal(DocumentStoreOptions.DefaultCheckpointThreshold, large.EffectiveCheckpointThreshold);
        Assert.Equal(1L << 30, large.CheckpointMemory);

        // A tiny one: the floors.
        var tiny = new DocumentStoreOptions { FixedAvailableMemory = 8L << 20 };
        Assert.Equal(DocumentStoreOptions.MinCacheSize, tiny.EffectiveCacheSize);
        Assert.Equal(4L << 20, tiny.EffectiveBackpressureThreshold);
        Assert.Equal(4L << 20, tiny.CheckpointMemory);

        // What a user sets is what the store takes, whatever the memory.
        var set = new DocumentStoreOptions
        {
            FixedAvailableMemory = 384L << 20, CacheSize = 200L << 20, CheckpointBackpressureThreshold = 300L << 20,
        };
        Assert.Equal(200L << 20, set.EffectiveCacheSize);
        Assert.Equal(300L << 20, set.EffectiveBackpressureThreshold);
        Assert.Equal(DocumentStoreOptions.DefaultCheckpointThreshold, set.EffectiveCheckpointThreshold);

        // A small threshold of the user's keeps four times it as the backpressure, as before.
        var tuned = new DocumentStoreOptions { FixedAvailableMemory = 64L << 30, CheckpointThreshold = 64 << 10 };
        Assert.Equal(256L << 10, tuned.EffectiveBackpressureThreshold);
        Assert.Equal(64L << 10, tuned.EffectiveCheckpointThreshold);

        new DocumentStoreOptions { CacheSize = 0 }.Validate();
        var error = Assert.Throws<ArgumentOutOfRangeException>(
            () => new DocumentStoreOptions { CacheSize = DocumentStoreOptions.MinCacheSize - 1 }.Validate());
        Assert.Equal(nameof(DocumentStoreOptions.CacheSize), error.ParamName);
    }

    [Fact]
    public async Task An_open_logs_the_sizes_it_took_from_the_memory_the_process_may_use()
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.LoggerFactory = log;
        options.FixedAvailableMemory = 384L << 20;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        string line = Assert.Single(log.Lines, l => l.Id.Id == 3008).Message;
        Assert.Contains("sized to 402653184 bytes", line, StringComparison.Ordinal);
        Assert.Contains("a cache of 50331648 bytes", line, StringComparison.Ordinal);
        Assert.Contains("or 100663296 bytes of a checkpoint's pages", line, StringComparison.Ordinal);
        Assert.Contains("at most 50331648 bytes", line, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Scattered_writes_into_a_store_larger_than_a_checkpoints_memory_are_checkpointed_in_pieces()
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions options = Options(log);
        options.TestCheckpointMemory = 1 << 20; // a document may cost a checkpoint 36 KiB: about 29 of them
        string folder = Path.Combine(dir.Path, "store");
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            // About 1.3 MB of documents in ~100 leaves: twice that is past the checkpoint's memory.
            await PutAsync(store, model, Enumerable.Range(0, 4000), round: 0, pad: 250);

            await store.CheckpointAsync();
            log.Lines.Clear();
            long generation = store.Pages.Current.Generation;

            // One writer, one document a commit, at scattered ids: each may touch a page of its own.
            var random = new Random(7);
            for (int n = 1; n <= 1500; n++)
            {
                int i = random.Next(4000);
                string json = Json(i, n);
                await store.PutAsync("docs", Id(i), Encoding.UTF8.GetBytes(json));
                model[Id(i)] = json;
            }

            // Without the memory bound, none of these commits reaches a checkpoint (64 MiB of journal, 10 minutes).
            List<int> pages = CheckpointPages(log);
            Assert.True(store.Pages.Current.Generation - generation >= 10,
                $"{store.Pages.Current.Generation - generation} checkpoints");
            Assert.True(pages.Count >= 10, $"{pages.Count} checkpoints logged");

            // Commits wait past twice the memory: after the load in id order (a document cost that checkpoint a
            // quarter of a page or less), about 230 documents, then, once a checkpoint of scattered writes taught
            // the store their cost, about 58 (and up to 32 more between the writer's checks). No checkpoint writes
            // more pages than those documents' leaves and the branches above them.
            Assert.True(pages.Max() <= 300, $"pages per checkpoint: {string.Join(", ", pages)}");
            Assert.True(pages.Skip(2).Max() <= 110, $"pages per checkpoint: {string.Join(", ", pages)}");
            AssertHolds(store, model);
        }

        await using DocumentStore reopened = DocumentStore.Open(folder, options);
        AssertHolds(reopened, model);
        Assert.True((await reopened.VerifyAsync()).IsHealthy);
    }

    [Fact]
    public async Task Compaction_on_demand_rewrites_sparse_chunks_in_passes_that_fit_a_checkpoints_memory()
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions options = Options(log);
        options.TestCheckpointMemory = 4 << 20; // a compaction pass copies at most a quarter: 64 pages
        options.PagesPerChunk = 16;
        string folder = Path.Combine(dir.Path, "store");
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            // 12,000 documents of 1 KB in id order, then three of every four blocks of 60 ids overwritten: each of
            // the first checkpoint's chunks keeps about a quarter of its pages live (over 200 pages in all).
            for (int round = 0; round <= 1; round++)
            {
                await PutAsync(store, model,
                    Enumerable.Range(0, 12_000).Where(i => round == 0 || i / 60 % 4 != 0), round, pad: 1000,
                    perCommit: 100);
                await store.CheckpointAsync();
            }

            log.Lines.Clear();
            CompactionResult result = await store.CompactAsync();

            // Together the passes rewrote more pages than one pass may hold, each within its bound (64 pages, one
            // chunk of 16 more at most, and the branches above them).
            List<int> pages = CheckpointPages(log);
            Assert.True(result.PagesRewritten > 150, $"{result}");
            Assert.True(pages.Max() <= 100, $"pages per checkpoint: {string.Join(", ", pages)}");
            Assert.True(result.FillRate >= DocumentStoreOptions.DefaultCompactionFillRate, $"{result}");
            Assert.True(result.DataFileBytesAfter < result.DataFileBytesBefore, $"{result}");
            AssertHolds(store, model);
            Assert.True((await store.VerifyAsync()).IsHealthy);
        }

        await using DocumentStore reopened = DocumentStore.Open(folder, options);
        AssertHolds(reopened, model);
    }

    [Fact]
    public async Task A_journal_backlog_larger_than_a_checkpoint_may_hold_is_checkpointed_in_pieces_at_open()
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions writer = Options(log);
        writer.TestCheckpointMemory = 1L << 30; // a process with memory to spare: no checkpoint during the writes
        writer.CheckpointThreshold = 1L << 40;
        string folder = Path.Combine(dir.Path, "store");
        string image = Path.Combine(dir.Path, "image");
        string sameSize = Path.Combine(dir.Path, "same-size");
        string full = Path.Combine(dir.Path, "full");
        string cancelled = Path.Combine(dir.Path, "cancelled");
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        var history = new List<(long Sequence, string Id, string? Json)>();
        await using (DocumentStore store = DocumentStore.Open(folder, writer))
        {
            // 20,000 documents in id order (about 400 leaves), checkpointed; then 3,000 single writes at scattered
            // ids, a tenth of them deletes, that stay in the journal only.
            await PutAsync(store, model, Enumerable.Range(0, 20_000), round: 0, pad: 250, perCommit: 1000);

            await store.CheckpointAsync();
            var random = new Random(11);
            for (int n = 1; n <= 3000; n++)
            {
                int i = random.Next(20_000);
                if (n % 10 == 0)
                {
                    history.Add((await store.DeleteAsync("docs", Id(i)), Id(i), null));
                    model.Remove(Id(i));
                    continue;
                }

                string json = Json(i, n);
                history.Add((await store.PutAsync("docs", Id(i), Encoding.UTF8.GetBytes(json)), Id(i), json));
                model[Id(i)] = json;
            }

            // What a process killed now leaves on disk.
            StoreCheckpointTests.CopyFolder(folder, image);
            StoreCheckpointTests.CopyFolder(folder, sameSize);
            StoreCheckpointTests.CopyFolder(folder, full);
            StoreCheckpointTests.CopyFolder(folder, cancelled);
        }

        // A process like the writer replays the backlog as it always did.
        log.Lines.Clear();
        await using (DocumentStore same = DocumentStore.Open(sameSize, writer))
        {
            Assert.DoesNotContain(log.Lines, l => l.Id.Id == 3009);
            AssertHolds(same, model);
        }

        // A process whose checkpoints may hold 1 MiB (about 29 documents' pages) writes the backlog in pieces at
        // open, each within that memory, before it replays the rest.
        log.Lines.Clear();
        DocumentStoreOptions small = Options(log);
        small.TestCheckpointMemory = 1 << 20;
        await using (DocumentStore store = DocumentStore.Open(image, small))
        {
            Assert.Single(log.Lines, l => l.Id.Id == 3009);
            List<int> pages = CheckpointPages(log);
            Assert.True(pages.Count >= 20, $"{pages.Count} checkpoints at open");
            Assert.True(pages.Max() <= 80, $"pages per checkpoint: {string.Join(", ", pages)}");

            // The last piece holds exactly the state at its sequence: the newest version of every document written
            // at or before it, none written after.
            PageCheckpoint last = store.Pages.Current;
            Assert.True(last.Sequence > history[0].Sequence && last.Sequence < history[^1].Sequence,
                $"{last.Sequence}");
            var expected = new SortedDictionary<string, string>(StringComparer.Ordinal);
            for (int i = 0; i < 20_000; i++)
            {
                expected[Id(i)] = Json(i, 0);
            }

            foreach ((long sequence, string id, string? json) in history)
            {
                if (sequence > last.Sequence)
                {
                    break;
                }

                if (json is null)
                {
                    expected.Remove(id);
                }
                else
                {
                    expected[id] = json;
                }
            }

            var inTree = new List<KeyValuePair<string, string>>();
            foreach ((string id, StoredValue value) in BTree.Range(last.Collections["docs"].Root, null, null, false,
                store.Pages.Reader))
            {
                inTree.Add(new(id, Encoding.UTF8.GetString(value.Read(store.Pages.Reader).Span)));
            }

            Assert.Equal(expected, inTree);
            AssertHolds(store, model);
        }

        // An open cancelled between pieces leaves nothing open and keeps the pieces it wrote; the next open goes on.
        using var cancelLog = new CapturingLoggerFactory();
        using var cancel = new CancellationTokenSource();
        int written = 0;
        cancelLog.ThrowFor = id =>
        {
            if (id.Id == 5002 && ++written == 3)
            {
                cancel.Cancel();
            }

            return false;
        };
        DocumentStoreOptions cancelling = Options(cancelLog);
        cancelling.TestCheckpointMemory = 1 << 20;
        await Assert.ThrowsAnyAsync<OperationCanceledException>(
            () => DocumentStore.OpenAsync(cancelled, cancelling, cancel.Token).AsTask());
        Assert.Equal(3, written);
        cancelLog.ThrowFor = static _ => false;
        cancelLog.Lines.Clear();
        await using (DocumentStore store = DocumentStore.Open(cancelled, cancelling)) // the folder's lock was released
        {
            Assert.True(store.Pages.Current.Generation >= 4, $"{store.Pages.Current.Generation}");
            AssertHolds(store, model);
        }

        // On a disk with no room for the data file to grow, the first piece fails: the open replays the backlog as
        // it always did, and loses nothing.
        log.Lines.Clear();
        DocumentStoreOptions noRoom = Options(log);
        noRoom.TestCheckpointMemory = 1 << 20;
        noRoom.FileSystem = new FaultInjectingFileSystem
        {
            Matches = static path => path.EndsWith(DocumentStore.DataFileName, StringComparison.Ordinal),
            NoSpace = true,
        };
        await using (DocumentStore store = DocumentStore.Open(full, noRoom))
        {
            Assert.Contains(log.Lines, l => l.Id.Id == 3003);
            Assert.DoesNotContain(log.Lines, l => l.Id.Id == 3009);
            AssertHolds(store, model);
        }

        log.Lines.Clear();
        await using DocumentStore reopened = DocumentStore.Open(image, small);
        Assert.DoesNotContain(log.Lines, l => l.Id.Id == 3009);
        AssertHolds(reopened, model);
        Assert.True((await reopened.VerifyAsync()).IsHealthy);
    }

    [Fact]
    public async Task A_journal_backlog_of_large_documents_is_checkpointed_in_pieces_of_their_bytes_at_open()
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions writer = Options(log);
        writer.TestCheckpointMemory = 1L << 30;
        writer.CheckpointThreshold = 1L << 40;
        writer.MaxDocumentSize = 200_000;
        string folder = Path.Combine(dir.Path, "store");
        string image = Path.Combine(dir.Path, "image");
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(folder, writer))
        {
            // 80 documents of 100 KB, five a commit: 8 MB that stay in the journal, in few documents.
            await PutAsync(store, model, Enumerable.Range(0, 80), round: 0, pad: 100_000,
                perCommit: 5);

            StoreCheckpointTests.CopyFolder(folder, image);
        }

        // A checkpoint of such documents is estimated at twice their bytes: with 1 MiB, a piece takes five or ten of
        // them (one or two commits), and the replay the last 1 MiB's worth at most.
        log.Lines.Clear();
        DocumentStoreOptions small = Options(log);
        small.TestCheckpointMemory = 1 << 20;
        small.MaxDocumentSize = 200_000;
        await using (DocumentStore store = DocumentStore.Open(image, small))
        {
            Assert.Single(log.Lines, l => l.Id.Id == 3009);
            List<long> bytes = CheckpointBytes(log);
            Assert.True(bytes.Count >= 6, $"{bytes.Count} checkpoints at open");
            Assert.True(bytes.Max() <= 1_100_000, $"bytes per checkpoint: {string.Join(", ", bytes)}");
            CollectionTree tree = store.Pages.Current.Collections["docs"];
            Assert.True(tree.Count >= 65, $"{tree}");
            AssertHolds(store, model);
        }

        await using DocumentStore reopened = DocumentStore.Open(image, small);
        AssertHolds(reopened, model);
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public async Task Every_piece_of_a_random_backlog_is_the_state_at_its_sequence_in_every_collection(int seed)
    {
        using var dir = new TempDirectory();
        using var log = new CapturingLoggerFactory();
        DocumentStoreOptions writer = Options(log);
        writer.TestCheckpointMemory = 1L << 30;
        writer.CheckpointThreshold = 1L << 40;
        string folder = Path.Combine(dir.Path, "store");
        string image = Path.Combine(dir.Path, "image");
        string[] collections = ["a", "b", "c"];
        var history = new List<(long Sequence, string Collection, string Id, string? Json)>();
        var random = new Random(seed);
        await using (DocumentStore store = DocumentStore.Open(folder, writer))
        {
            // A checkpointed base, then a backlog of batches over three collections: puts of small and overflow
            // documents and deletes, an id sometimes written twice in one batch (the last write wins).
            for (int phase = 0; phase < 2; phase++)
            {
                for (int commit = 0; commit < (phase == 0 ? 40 : 400); commit++)
                {
                    var batch = new CommitBatch();
                    var changes = new List<(string Collection, string Id, string? Json)>();
                    for (int n = random.Next(1, 12); n > 0; n--)
                    {
                        string collection = collections[random.Next(3)];
                        string id = $"k{random.Next(800):D4}";
                        if (phase > 0 && random.Next(6) == 0)
                        {
                            batch.Delete(collection, id);
                            changes.Add((collection, id, null));
                            continue;
                        }

                        string json = Json(random.Next(800), commit, pad: random.Next(10) == 0 ? 3000 : 200);
                        batch.Put(collection, id, Encoding.UTF8.GetBytes(json));
                        changes.Add((collection, id, json));
                    }

                    long sequence = (await store.WriteAsync(batch)).Sequence;
                    foreach ((string collection, string id, string? json) in changes)
                    {
                        history.Add((sequence, collection, id, json));
                    }
                }

                if (phase == 0)
                {
                    await store.CheckpointAsync();
                }
            }

            StoreCheckpointTests.CopyFolder(folder, image);
        }

        log.Lines.Clear();
        DocumentStoreOptions small = Options(log);
        small.TestCheckpointMemory = 256 << 10;
        await using (DocumentStore store = DocumentStore.Open(image, small))
        {
            Assert.Single(log.Lines, l => l.Id.Id == 3009);
            PageCheckpoint last = store.Pages.Current;
            Assert.Equal(StateAt(history, last.Sequence), TreesOf(store, last));
            Assert.Equal(StateAt(history, long.MaxValue), Scanned(store));
        }

        await using DocumentStore reopened = DocumentStore.Open(image, small);
        Assert.Equal(StateAt(history, long.MaxValue), Scanned(reopened));
        Assert.True((await reopened.VerifyAsync()).IsHealthy);

        static SortedDictionary<string, string> StateAt(
            List<(long Sequence, string Collection, string Id, string? Json)> history, long sequence)
        {
            var state = new SortedDictionary<string, string>(StringComparer.Ordinal);
            foreach ((long at, string collection, string id, string? json) in history)
            {
                if (at > sequence)
                {
                    break;
                }

                if (json is null)
                {
                    state.Remove(collection + "/" + id);
                }
                else
                {
                    state[collection + "/" + id] = json;
                }
            }

            return state;
        }

        static SortedDictionary<string, string> TreesOf(DocumentStore store, PageCheckpoint checkpoint)
        {
            var state = new SortedDictionary<string, string>(StringComparer.Ordinal);
            foreach ((string name, CollectionTree tree) in checkpoint.Collections)
            {
                IPageReader reader = store.Pages.Reader;
                foreach ((string id, StoredValue value) in BTree.Range(tree.Root, null, null, false, reader))
                {
                    state[name + "/" + id] = Encoding.UTF8.GetString(value.Read(reader).Span);
                }
            }

            return state;
        }

        static SortedDictionary<string, string> Scanned(DocumentStore store)
        {
            var state = new SortedDictionary<string, string>(StringComparer.Ordinal);
            foreach (string name in new[] { "a", "b", "c" })
            {
                foreach (StoredDocument document in store.Scan(name))
                {
                    state[name + "/" + document.Id] = Encoding.UTF8.GetString(document.Json.Span);
                }
            }

            return state;
        }
    }

    private static DocumentStoreOptions Options(ILoggerFactory log)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = 2 << 20;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CompactionFillRate = 0; // compaction on demand only
        options.LoggerFactory = log;
        return options;
    }

    /// <summary>The pages each checkpoint logged since the lines were last cleared.</summary>
    private static List<int> CheckpointPages(CapturingLoggerFactory log)
    {
        var pages = new List<int>();
        foreach ((_, EventId id, string message) in log.Lines)
        {
            if (id.Id == 5002)
            {
                pages.Add(int.Parse(PagesWritten().Match(message).Groups[1].Value,
                    System.Globalization.CultureInfo.InvariantCulture));
            }
        }

        return pages;
    }

    /// <summary>The bytes each checkpoint logged since the lines were last cleared.</summary>
    private static List<long> CheckpointBytes(CapturingLoggerFactory log)
    {
        var bytes = new List<long>();
        foreach ((_, EventId id, string message) in log.Lines)
        {
            if (id.Id == 5002)
            {
                bytes.Add(long.Parse(PagesWritten().Match(message).Groups[2].Value,
                    System.Globalization.CultureInfo.InvariantCulture));
            }
        }

        return bytes;
    }

    [GeneratedRegex(@": (\d+) pages, (\d+) bytes ")]
    private static partial Regex PagesWritten();
}
