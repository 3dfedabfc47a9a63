using System.Text;
using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// Opening a store, by history: 1,000 documents of ~200 bytes after 0, 1M and 10M overwrites, and 1M distinct
/// documents of ~1 KiB, each written through the public API in commits of 1,000 puts. <c>Checkpointed</c> opens the
/// store as written with default options (background checkpoints purged the journal; the close wrote a last
/// checkpoint): mount the newest checkpoint, replay the journal after it. <c>Replay</c> (the baseline) opens the
/// same history kept as a whole journal with no data file, which is what every open did before the page store: replay
/// it all. Mean is per open (the iteration's cleanup closes the store; the replay folder's data file is deleted
/// before each open). The setup prints each folder's size on disk (the checkpointed one is the disk bound the
/// defaults give) to open-stats.csv.
/// </summary>
[InvocationCount(1)]
[IterationCount(5)]
[WarmupCount(1)]
public class OpenBenchmarks : BenchmarkDirectory
{
    private string _checkpointed = string.Empty;
    private string _replay = string.Empty;
    private DocumentStore? _store;

    /// <summary>The history: "1000x0", "1000x1M", "1000x10M" (documents x overwrites), "1Mx1KiB".</summary>
    [Params("1000x0", "1000x1M", "1000x10M", "1Mx1KiB")]
    public string History { get; set; } = "1000x0";

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _checkpointed = NewFolder("checkpointed");
        _replay = NewFolder("replay");
        Build(_checkpointed, new DocumentStoreOptions());
        Build(_replay, JournalOnlyStoreOptions.Create(DurabilityMode.Buffered));
        File.Delete(Path.Combine(_replay, "data.folio"));
        long checkpointedBytes = FolderBytes(_checkpointed);
        long replayBytes = FolderBytes(_replay);
        Console.WriteLine($"// {History}: checkpointed store {checkpointedBytes / 1e6:F1} MB on disk, " +
            $"journal-only store {replayBytes / 1e6:F1} MB");
        File.AppendAllText(StatsFile("open-stats.csv"),
            $"{DateTime.UtcNow:O},{History},{checkpointedBytes},{replayBytes}{Environment.NewLine}");
    }

    [IterationSetup(Target = nameof(Replay))]
    public void ReplaySetup() => File.Delete(Path.Combine(_replay, "data.folio"));

    [IterationCleanup]
    public void CloseStore()
    {
        _store?.Dispose();
        _store = null;
    }

    [GlobalCleanup]
    public void Cleanup() => DeleteRoot();

    [Benchmark(Baseline = true)]
    public long Replay()
    {
        _store = DocumentStore.Open(_replay);
        return _store.LastCommittedSequence;
    }

    [Benchmark]
    public long Checkpointed()
    {
        _store = DocumentStore.Open(_checkpointed);
        return _store.LastCommittedSequence;
    }

    private void Build(string folder, DocumentStoreOptions options)
    {
        (int documents, long puts, int size) = History switch
        {
            "1000x0" => (1_000, 1_000L, 200),
            "1000x1M" => (1_000, 1_000_000L, 200),
            "1000x10M" => (1_000, 10_000_000L, 200),
            "1Mx1KiB" => (1_000_000, 1_000_000L, 1_000),
            _ => throw new InvalidOperationException(History),
        };
        options.Durability = DurabilityMode.Buffered; // the build's speed; what is measured is the open
        string padding = new('x', size - 60);
        using var store = DocumentStore.Open(folder, options);
        for (long start = 0; start < puts; start += 1_000)
        {
            var batch = new CommitBatch();
            for (long i = start; i < start + 1_000 && i < puts; i++)
            {
                long id = i % documents;
                batch.Put("Doc", $"docs/{id:D7}", Encoding.UTF8.GetBytes(
                    $"{{\"id\":{id},\"write\":{i},\"padding\":\"{padding}\"}}"));
            }

            store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
        }
    }

    private static long FolderBytes(string folder)
    {
        long bytes = 0;
        foreach (string file in Directory.GetFiles(folder, "*", SearchOption.AllDirectories))
        {
            bytes += new FileInfo(file).Length;
        }

        return bytes;
    }
}
