using System.Diagnostics;
using System.Globalization;
using System.Text;
using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// Range prefetch on and off (<see cref="DocumentStoreOptions.RangePrefetch"/>), through the public API, on cold data:
/// a store of <see cref="BenchmarkConstants.PrefetchDocuments"/> documents of about 1 KiB that has lived (loaded in id
/// order, then <see cref="BenchmarkConstants.PrefetchUpdateRounds"/> rounds of random overwrites each checkpointed,
/// so neighbouring leaves sit in different chunks), built once in <c>prefetch-N</c> under the benchmark data folder.
/// Before each iteration the store is closed, its files are dropped from the operating system's page cache
/// (<c>posix_fadvise(POSIX_FADV_DONTNEED)</c>) and it is opened again with a cache of 16 MiB; one read every 100 ids
/// then warms the tree's branches (as in a service that has been running) and the files are dropped again, so the
/// leaves the workloads read start cold. Workloads (one invocation each): <c>Range</c>, 64 session queries of the 100
/// ids in [<c>from</c>, <c>from + 100</c>) at random places; <c>RangeTake</c>, the same with no upper id and
/// <c>take: 100</c>; <c>Point</c>, 256 <c>store.Get</c> of random ids (prefetch must not change them);
/// <c>CommitsDuringScans</c>, 16 writers each committing 100 durable <c>PutAsync</c> of new documents while another
/// thread runs cold bounded scans back to back (prefetch must not slow commits down). Setup prints, and appends to
/// <c>prefetch-stats.csv</c>, what random reads cost on the disk at that moment, one after another and advised
/// together (<see cref="HostProbe.RandomReadMicroseconds"/>): prefetch can gain only what the disk's parallelism
/// gives.
/// </summary>
[InvocationCount(1)]
[IterationCount(15)]
public class PrefetchBenchmarks : BenchmarkDirectory
{
    private const string Collection = LargeDocument.Collection;
    private const int Scans = 64;
    private const int ScanLength = 100;
    private const int Points = 256;
    private const int Writers = 16;
    private const int CommitsPerWriter = 100;

    private static readonly int s_documents = BenchmarkConstants.PrefetchDocuments;
    private DocumentStore? _store;
    private Random _random = new(1);
    private int _round;

    // Workload first: BenchmarkDotNet then runs the two Prefetch cases of a workload one after the other, so drift in
    // the disk's speed over the run falls between workloads, not between the two sides of a ratio.
    [Params("Range", "RangeTake", "Point", "CommitsDuringScans")]
    public string Workload { get; set; } = "Range";

    [Params(false, true)]
    public bool Prefetch { get; set; }

    private static string Folder => Path.Combine(DataFolder, FormattableString.Invariant($"prefetch-{s_documents}"));

    private static string StoreFolder => Path.Combine(Folder, "folio");

    [GlobalSetup]
    public void Setup()
    {
        EnsureBuilt();
        _random = new Random(42);
        (double Sequential, double Advised) reads = HostProbe.RandomReadMicroseconds(
            Path.Combine(StoreFolder, "data.folio"));
        Console.WriteLine(HostProbe.DescribeReads(reads));
        File.AppendAllText(StatsFile("prefetch-stats.csv"), string.Join(',',
            DateTime.UtcNow.ToString("O", CultureInfo.InvariantCulture), Prefetch, Workload,
            reads.Sequential.ToString("F0", CultureInfo.InvariantCulture),
            reads.Advised.ToString("F0", CultureInfo.InvariantCulture)) + Environment.NewLine);
    }

    [IterationSetup]
    public void OpenCold()
    {
        _store?.Dispose();
        _store = null;
        DropDataFile();
        _store = DocumentStore.Open(StoreFolder, Options(Prefetch));

        // A service's index is warm while most of its data is not: one read every 100 ids brings every branch into
        // the cache (each is read many times, so it stays there as a hot page); the leaves those reads loaded are
        // few, and the files are then dropped from the page cache again.
        for (int i = 0; i < s_documents; i += 100)
        {
            _ = _store.Get(Collection, Id(i));
        }

        DropDataFile();
    }

    [IterationCleanup]
    public void CloseStore()
    {
        _store?.Dispose();
        _store = null;
    }

    [Benchmark]
    public async Task<long> Run()
    {
        switch (Workload)
        {
            case "Range":
            case "RangeTake":
            {
                long sum = 0;
                for (int scan = 0; scan < Scans; scan++)
                {
                    sum += await Scan(_store!, _random.Next(s_documents - ScanLength), Workload == "Range")
                        .ConfigureAwait(false);
                }

                return sum;
            }

            case "Point":
            {
                long sum = 0;
                for (int n = 0; n < Points; n++)
                {
                    sum += _store!.Get(Collection, Id(_random.Next(s_documents)))!.Value.Json.Length;
                }

                return sum;
            }

            default:
                return await CommitsDuringScans().ConfigureAwait(false);
        }
    }

    /// <summary>Builds the store once (a marker file says it is complete); returns what the marker says.</summary>
    public static string EnsureBuilt() => BuildOnce(Folder, Build);

    private static string Build()
    {
        var watch = Stopwatch.StartNew();
        var options = Options(prefetch: false);
        options.Durability = DurabilityMode.Buffered;
        using (var store = DocumentStore.Open(StoreFolder, options))
        {
            LargeDocument.LoadInOrder(store, s_documents);
            var random = new Random(7);
            for (int round = 0; round < BenchmarkConstants.PrefetchUpdateRounds; round++)
            {
                var batch = new CommitBatch();
                for (int n = 0; n < 1_000; n++)
                {
                    int i = random.Next(s_documents);
                    batch.Put(Collection, Id(i), Encoding.UTF8.GetBytes(Json(Id(i), i + round)));
                }

                store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
                store.CheckpointAsync().AsTask().GetAwaiter().GetResult();
            }
        }

        return FormattableString.Invariant($"folio {watch.Elapsed.TotalSeconds:F1} s");
    }

    private static DocumentStoreOptions Options(bool prefetch) => new()
    {
        CacheSize = 16L << 20,
        RangePrefetch = prefetch,
    };

    private static async Task<long> Scan(DocumentStore store, int from, bool keyBound)
    {
        long sum = 0;
        await using DocumentSession session = store.OpenSession();
        session.TrackQueryResults = false; // a read-only scan: nothing to save
        IAsyncEnumerable<LargeDocument> documents = keyBound
            ? session.QueryByRangeAsync<LargeDocument>(Id(from), Id(from + ScanLength))
            : session.QueryByRangeAsync<LargeDocument>(Id(from), null, take: ScanLength);
        await foreach (LargeDocument document in documents.ConfigureAwait(false))
        {
            sum += document.Age;
        }

        return sum;
    }

    private async Task<long> CommitsDuringScans()
    {
        DocumentStore store = _store!;
        using var stop = new CancellationTokenSource();
        int round = Interlocked.Increment(ref _round);
        var scanner = new Thread(() =>
        {
            var random = new Random(round);
            int scans = 0;
            while (!stop.IsCancellationRequested)
            {
                if (scans++ % 8 == 0)
                {
                    DropDataFile(); // keep the scans cold
                }

                Scan(store, random.Next(s_documents - ScanLength), keyBound: true).GetAwaiter().GetResult();
            }
        }) { IsBackground = true };
        scanner.Start();
        try
        {
            var writers = new Task<long>[Writers];
            for (int w = 0; w < Writers; w++)
            {
                int writer = w;
                writers[w] = Task.Run(async () =>
                {
                    long sum = 0;
                    for (int n = 0; n < CommitsPerWriter; n++)
                    {
                        string id = FormattableString.Invariant($"new/{round:D4}/{writer:D2}/{n:D4}");
                        sum += await store.PutAsync("Written", id, Encoding.UTF8.GetBytes(Json(id, n)))
                            .ConfigureAwait(false);
                    }

                    return sum;
                });
            }

            long total = 0;
            foreach (long sum in await Task.WhenAll(writers).ConfigureAwait(false))
            {
                total += sum;
            }

            return total;
        }
        finally
        {
            stop.Cancel();
            scanner.Join();
        }
    }

    /// <summary>Drops the store's own files from the page cache, not its journal's: the store may be open, and a
    /// dropped page of the active journal segment would be read back by the next commit's write.</summary>
    private static void DropDataFile() => OsPageCache.Drop(StoreFolder, SearchOption.TopDirectoryOnly);

    private static string Id(long i) => LargeDocument.IdOf(i);

    private static string Json(string id, int version) => LargeDocument.JsonOf(id, version);
}
