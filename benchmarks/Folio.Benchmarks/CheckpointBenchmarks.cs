using BenchmarkDotNet.Attributes;
using Folio.Pages;
using Folio.Storage;

namespace Folio.Benchmarks;

/// <summary>
/// One checkpoint of the page store: 160,000 new documents of ~400 bytes (about 70 MB of dirty pages) spread over
/// <see cref="Collections"/> collections, applied to empty trees, serialized, written as one chunk and fsynced with
/// its header. <c>Sequential</c> changes and serializes the trees one after another; <c>Parallel</c> does both per
/// collection in parallel (seed 004's phases), the rest (numbering, placement, the write) being sequential in both.
/// The setup prints the chunk's size; dirty bytes per second is that over the Mean. Each invocation writes a fresh
/// data file (the setup of each iteration deletes the last).
/// </summary>
[InvocationCount(1)]
[IterationCount(10)]
public class CheckpointBenchmarks : BenchmarkDirectory
{
    private const int Documents = 160_000;
    private List<CollectionChanges> _changes = [];
    private string _path = string.Empty;
    private PageStore? _store;

    [Params(1, 8)]
    public int Collections { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _path = Path.Combine(NewFolder("pages"), "data.folio");
        var random = new Random(42);
        _changes = [];
        for (int c = 0; c < Collections; c++)
        {
            _changes.Add(new CollectionChanges($"collection{c}"));
        }

        for (int i = 0; i < Documents; i++)
        {
            byte[] value = new byte[300 + random.Next(200)];
            random.NextBytes(value);
            _changes[i % Collections].Changes.Add(TreeChange.Put($"documents/{random.Next():D10}-{i}",
                new StoredValue(i + 1, DateTime.UtcNow.Ticks, value)));
        }

        using PageStore probe = Open();
        probe.Checkpoint(Documents, _changes, parallel: false);
        long chunkBytes = probe.LastCheckpoint.Bytes;
        Console.WriteLine($"// chunk bytes per checkpoint: {chunkBytes / 1e6:F1} MB");
        File.AppendAllText(StatsFile("checkpoint-stats.csv"), $"{DateTime.UtcNow:O},{chunkBytes}{Environment.NewLine}");
    }

    [IterationSetup]
    public void IterationSetup() => _store = Open();

    [IterationCleanup(Target = nameof(Sequential))]
    public void SequentialCleanup() => RecordPhases(nameof(Sequential));

    [IterationCleanup(Target = nameof(Parallel))]
    public void ParallelCleanup() => RecordPhases(nameof(Parallel));

    /// <summary>Appends the iteration's checkpoint phases to checkpoint-stats.csv
    /// (<c>time,phases,method,collections,apply ms,serialize ms,write ms</c>): the report takes the CPU's part of a
    /// checkpoint (applying and serializing, before the chunk's write) from them.</summary>
    private void RecordPhases(string method)
    {
        if (_store is { LastCheckpoint: { Bytes: > 0 } last })
        {
            CheckpointPhases phases = last.Phases;
            File.AppendAllText(StatsFile("checkpoint-stats.csv"),
                FormattableString.Invariant($"{DateTime.UtcNow:O},phases,{method},{Collections},") +
                FormattableString.Invariant($"{phases.Apply.TotalMilliseconds:F3},") +
                FormattableString.Invariant($"{phases.Serialize.TotalMilliseconds:F3},") +
                FormattableString.Invariant($"{phases.Write.TotalMilliseconds:F3}{Environment.NewLine}"));
        }

        _store?.Dispose();
    }

    [GlobalCleanup]
    public void Cleanup() => DeleteRoot();

    [Benchmark(Baseline = true)]
    public long Sequential() => _store!.Checkpoint(Documents, _changes, parallel: false).Generation;

    [Benchmark]
    public long Parallel() => _store!.Checkpoint(Documents, _changes, parallel: true).Generation;

    private PageStore Open()
    {
        File.Delete(_path);
        return PageStore.Open(PhysicalFileSystem.Instance, _path);
    }
}
