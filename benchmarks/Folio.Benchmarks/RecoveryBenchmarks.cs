using System.Text.Json;
using BenchmarkDotNet.Attributes;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Jobs;

namespace Folio.Benchmarks;

/// <summary>
/// Opening a store replays its journal into memory. 200,000 documents of ~200 bytes (about 48 MB of journal
/// records) committed in batches of 1,000; Mean is per open (lock, journal recovery scan, replay into the index).
/// The setup prints the journal's size; the replay rate is that size over the Mean. <c>JournalOnly</c> is the floor
/// in the same run: the journal's own open (lock, recovery scan with checksums) and a read of every entry, without
/// decoding or indexing anything. The setup also prints what the host charges for a fresh page of memory
/// (<see cref="HostProbe"/>): an open builds its state in fresh pages, so the Mean moves with it. Both figures are
/// appended to recovery-stats.csv (<c>time,journal entry bytes,fresh page µs,live value bytes</c>) for the report tool.
/// </summary>
/// <remarks>
/// Three garbage collector settings side by side: the shared job (<c>Folio</c>: workstation GC, the default of a
/// console program), <c>ServerGc</c> (the default of an ASP.NET Core service: server GC with DATAS, which starts
/// with one heap and small budgets) and <c>ServerGcNoDatas</c> (server GC with
/// <c>System.GC.DynamicAdaptationMode = 0</c>: a heap and a young-generation budget per core). A replay builds
/// hundreds of thousands of long-lived objects, the worst case for a generational collector, so the collector's
/// young-generation budget moves the open more than anything in the replay's code (docs/measurements.md,
/// "Recovery replay").
/// </remarks>
[Config(typeof(GarbageCollectors))]
public class RecoveryBenchmarks : BenchmarkDirectory
{
    private const int Documents = 200_000;
    private string _folder = string.Empty;
    private long _journalBytes;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _folder = NewFolder("store");
        using var store = DocumentStore.Open(_folder, JournalOnlyStoreOptions.Create(DurabilityMode.Buffered));
        long valueBytes = 0;
        for (int start = 0; start < Documents; start += 1000)
        {
            var batch = new CommitBatch();
            for (int i = start; i < start + 1000; i++)
            {
                byte[] json = JsonSerializer.SerializeToUtf8Bytes(
                    new Person { Name = $"Person number {i}", Email = $"person{i}@example.com", Age = i % 80,
                    City = "Lisbon", Tags = ["alpha", "beta"], Active = true });
                valueBytes += json.Length;
                batch.Put("Person", $"people/{i:D7}", json);
            }

            store.Merger.CommitAsync(batch).AsTask().GetAwaiter().GetResult();
        }

        store.Journal.Sync();
        _journalBytes = MeasureEntries(store);
        double freshPageUs = HostProbe.FreshPageMicroseconds();
        Console.WriteLine($"// journal entries to replay: {_journalBytes / 1e6:F1} MB");
        Console.WriteLine(HostProbe.Describe(freshPageUs));
        File.AppendAllText(StatsFile("recovery-stats.csv"),
            FormattableString.Invariant($"{DateTime.UtcNow:O},{_journalBytes},{freshPageUs:F2},{valueBytes}")
            + Environment.NewLine);
    }

    [GlobalCleanup]
    public void Cleanup() => DeleteRoot();

    [Benchmark(Baseline = true)]
    public long JournalOnly()
    {
        using var journal = Journal.WriteAheadJournal.Open(Path.Combine(_folder, "journal"),
            new Journal.JournalOptions());
        using Journal.JournalReader reader = journal.OpenReader(1);
        long entries = 0;
        while (reader.TryRead(out Journal.JournalEntry _))
        {
            entries++;
        }

        return entries;
    }

    [Benchmark]
    public long OpenAndReplay()
    {
        using var store = DocumentStore.Open(_folder, JournalOnlyStoreOptions.Create(DurabilityMode.Durable));
        return store.LastCommittedSequence;
    }


    /// <summary>Adds the two server-GC jobs to the shared one.</summary>
    private sealed class GarbageCollectors : ManualConfig
    {
        public GarbageCollectors()
        {
            AddJob(FolioBenchmarkConfig.ShortJob.WithGcServer(true).WithId("ServerGc"));

            // Server GC without DATAS (System.GC.DynamicAdaptationMode = 0, a documented setting; the environment
            // variable is its spelling for a child process): one heap per core with its own young-generation
            // budget, as ASP.NET Core services ran before .NET 9 made DATAS the default.
            AddJob(FolioBenchmarkConfig.ShortJob.WithGcServer(true).WithEnvironmentVariable(
                "DOTNET_GCDynamicAdaptationMode", "0").WithId("ServerGcNoDatas"));
        }
    }

    private static long MeasureEntries(DocumentStore store)
    {
        long bytes = 0;
        using Journal.JournalReader reader = store.Journal.OpenReader(1);
        while (reader.TryRead(out Journal.JournalEntry entry))
        {
            bytes += entry.Data.Length + 4;
        }

        return bytes;
    }
}
