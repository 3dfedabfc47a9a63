using System.Globalization;
using System.Text;
using BenchmarkDotNet.Attributes;
using Folio.Pages;

namespace Folio.Benchmarks;

/// <summary>
/// A steady overwrite workload on <see cref="BenchmarkConstants.CompactionDocuments"/> documents of about 1 KiB,
/// with background compaction off and on (<c>CompactionFillRate</c> 0 and its default): each iteration, 16 writers
/// commit <see cref="CommitsPerWriter"/> durable overwrites of random documents each, while checkpoints run every
/// 32 MiB of journal. The store lives through all iterations, so later iterations run in the steady state. After each
/// iteration the benchmark prints the data file's size against its live pages' bytes (the live chunks' lengths
/// weighted by their share of live pages): the file's overhead over the live data.
/// </summary>
[InvocationCount(1)]
[IterationCount(10)]
[WarmupCount(3)]
public class CompactionBenchmarks : BenchmarkDirectory
{
    private const int CommitsPerWriter = 500;
    private const int Writers = 16;
    private DocumentStore? _store;
    private int _round;

    [Params(false, true)]
    public bool Compaction { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _store = DocumentStore.Open(NewFolder("store"), new DocumentStoreOptions
        {
            CheckpointThreshold = 32L << 20,
            CompactionFillRate = Compaction ? DocumentStoreOptions.DefaultCompactionFillRate : 0,
        });
        LargeDocument.LoadInOrder(_store, BenchmarkConstants.CompactionDocuments);
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store?.Dispose();
        DeleteRoot();
    }

    [IterationCleanup]
    public void Report()
    {
        long file = _store!.Pages.FileLength;
        double live = 0;
        foreach (ChunkInfo chunk in _store.Pages.Chunks)
        {
            live += chunk.DeadAt == 0 ? chunk.LiveBytes : 0;
        }

        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"// compaction {Compaction}: data file {file / 1048576.0:F1} MiB, live {live / 1048576.0:F1} MiB, "
            + $"file/live {file / Math.Max(live, 1):F2}, fill {_store.Pages.LastCheckpoint.FillRate:F2}"));
    }

    [Benchmark]
    public async Task<long> Overwrites()
    {
        int round = ++_round;
        var tasks = new Task[Writers];
        for (int w = 0; w < Writers; w++)
        {
            var random = new Random((round * 100) + w);
            tasks[w] = Task.Run(async () =>
            {
                for (int i = 0; i < CommitsPerWriter; i++)
                {
                    int n = random.Next(BenchmarkConstants.CompactionDocuments);
                    string id = LargeDocument.IdOf(n);
                    await _store!.PutAsync(LargeDocument.Collection, id,
                        Encoding.UTF8.GetBytes(LargeDocument.JsonOf(id, round + n))).ConfigureAwait(false);
                }
            });
        }

        await Task.WhenAll(tasks).ConfigureAwait(false);
        return (long)Writers * CommitsPerWriter;
    }
}
