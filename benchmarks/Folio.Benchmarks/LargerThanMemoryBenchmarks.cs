using System.Diagnostics;
using System.Globalization;
using System.Text;
using BenchmarkDotNet.Attributes;
using LiteDB;
using Microsoft.Data.Sqlite;

namespace Folio.Benchmarks;

/// <summary>A document of about 1 KiB for <see cref="LargerThanMemoryBenchmarks"/> and
/// <see cref="PrefetchBenchmarks"/>, with the ids and contents both give their stores.</summary>
public sealed class LargeDocument
{
    /// <summary>The collection the documents live in.</summary>
    public const string Collection = nameof(LargeDocument);

    public string Id { get; set; } = "";

    public string Name { get; set; } = "";

    public string Email { get; set; } = "";

    public int Age { get; set; }

    public string City { get; set; } = "";

    public string Body { get; set; } = "";

    /// <summary>The id of document <paramref name="i"/>: ids sort in number order.</summary>
    public static string IdOf(long i) => FormattableString.Invariant($"docs/{i:D8}");

    /// <summary>Document <paramref name="id"/> at <paramref name="version"/>.</summary>
    public static LargeDocument Create(string id, int version) => new()
    {
        Id = id,
        Name = $"Person {id}",
        Email = $"{id.Replace('/', '.')}@example.com",
        Age = 18 + (version % 60),
        City = (version % 3) switch { 0 => "Lisbon", 1 => "Oslo", _ => "Quito" },
        Body = new string((char)('a' + (version % 26)), 880),
    };

    /// <summary>The JSON of <see cref="Create"/>.</summary>
    public static string JsonOf(string id, int version) =>
        System.Text.Json.JsonSerializer.Serialize(Create(id, version));

    /// <summary>Writes documents 0 to <paramref name="count"/> - 1 in id order, 1,000 a batch, then
    /// checkpoints.</summary>
    public static void LoadInOrder(DocumentStore store, int count)
    {
        for (int start = 0; start < count; start += 1_000)
        {
            var batch = new CommitBatch();
            for (int i = start; i < Math.Min(count, start + 1_000); i++)
            {
                batch.Put(Collection, IdOf(i), Encoding.UTF8.GetBytes(JsonOf(IdOf(i), i)));
            }

            store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
        }

        store.CheckpointAsync().AsTask().GetAwaiter().GetResult();
    }
}

/// <summary>
/// Data many times larger than the cache: <c>FOLIO_LTM_DOCUMENTS</c> documents of about 1 KiB (default
/// <see cref="BenchmarkConstants.LargerThanMemoryDocuments"/>, a 4 GiB store) read with a cache of
/// <c>FOLIO_LTM_CACHE_MB</c> MiB (default <see cref="BenchmarkConstants.LargerThanMemoryCacheMiB"/>): Folio's
/// <c>CacheSize</c>; SQLite's <c>cache_size</c> in KiB with memory mapping off (WAL); LiteDB has no byte budget and
/// runs with its default. Each store is built once, by the first setup that finds it missing, in
/// <c>larger-than-memory-N</c> under the benchmark data folder (a marker <c>folio.built</c>, <c>sqlite.built</c> or
/// <c>litedb.built</c> beside it says it is complete; delete the marker to rebuild), and each case runs on a copy of it
/// made in its setup (<see cref="WorkingCopy"/>), so every run reads the stores as built, whatever earlier runs
/// wrote. Folio runs with its defaults, so under a memory limit that leaves less than its data file beyond its cache
/// it reads around the page cache (<see cref="DataFileReadMode.Automatic"/>); <c>FolioBuffered</c> is the same with
/// <see cref="DataFileReadMode.Buffered"/>. The ids come from <see cref="SeedVariable"/>, a seed each run draws, so no
/// run rereads the blocks of the run before (a virtual disk's host caches them). Workloads on one thread:
/// <c>PointRead</c>, uniformly random ids (raw bytes: Folio's <c>store.Get</c>, SQLite's prepared select of the JSON
/// text, LiteDB's <c>FindById</c>); <c>RangeScan</c>, 100 documents from a random id, deserialized (Folio: a session's
/// <c>QueryByRangeAsync</c>; SQLite: a prepared <c>id &gt;= $from ORDER BY id LIMIT 100</c> with System.Text.Json;
/// LiteDB: its <c>BsonDocument</c>s); <c>YcsbB</c>, 95% point reads and 5% overwrites over a scrambled Zipfian (YCSB's,
/// theta 0.99), not fsynced per commit on any side (Folio <c>Buffered</c>, SQLite <c>synchronous=NORMAL</c>, LiteDB
/// never does). Each case opens only its own store's copy, after dropping the copy's files from the operating system's
/// page cache (which may hold some or all of the three stores, so whatever ran before would otherwise decide how much
/// of a store is cached), and after reading the copy's files through once (<see cref="OsPageCache.ReadThrough"/>: this
/// machine's virtual disk caches blocks on its host, so a store written or read recently would read faster than one
/// left alone; the read puts every store's blocks in that cache alike, and <see cref="HostCacheVariable"/> <c>as-is</c>
/// skips it), then runs its workload for 20 s (<see cref="WarmSecondsVariable"/>) before BenchmarkDotNet's own warm-up,
/// so the measured operations find each peer's cache full, as a service running for a while does (a cache of 256 MiB
/// fills after 16,384 of Folio's 16 KiB pages and 65,536 of SQLite's 4 KiB ones, and each first use of fresh memory
/// costs this virtual machine several times a read: measured from the open, Folio's misses took 80-150 µs each until
/// its pool was full and 17-19 µs after, the data file in the page cache). After its runs it appends to
/// <c>ltm-stats.csv</c> the process's resident set, the bytes the disk read for it per measured operation, and what one
/// random 4 KiB and one 16 KiB read of its store's file cost then (<see cref="HostProbe.UncachedReadMicroseconds"/>):
/// the floor of a lookup that misses every cache, on either side. On a machine whose RAM holds the stores, the page
/// cache refills as a case runs and soon serves most of its reads; run under <c>benchmarks/with-memory-limit.sh</c>
/// (each process's memory capped, its page cache included, as a container's limit does) to keep the data larger than
/// memory throughout.
/// </summary>
public class LargerThanMemoryBenchmarks : BenchmarkDirectory
{
    private const string Collection = LargeDocument.Collection;
    private const int Operations = 2_000;
    private const int ScanLength = 100;

    private static readonly int s_documents = EnvironmentInt("FOLIO_LTM_DOCUMENTS",
        BenchmarkConstants.LargerThanMemoryDocuments);

    /// <summary>The variable that seeds the ids the cases read (set by the benchmark program for each run when
    /// absent; set it to repeat a run's ids).</summary>
    public const string SeedVariable = "FOLIO_LTM_SEED";

    /// <summary>The variable that sets how long each case runs its workload before it is measured, in seconds
    /// (default 20; 0 skips it).</summary>
    public const string WarmSecondsVariable = "FOLIO_LTM_WARM_SECONDS";

    /// <summary>The variable that, set to <c>as-is</c>, skips the read through each store before its case
    /// (<see cref="OsPageCache.ReadThrough"/>), leaving the virtual disk's host cache as earlier work left
    /// it.</summary>
    public const string HostCacheVariable = "FOLIO_LTM_HOST_CACHE";

    private static readonly long s_cacheBytes = EnvironmentInt("FOLIO_LTM_CACHE_MB",
        BenchmarkConstants.LargerThanMemoryCacheMiB) * 1024L * 1024L;

    private DocumentStore? _store;
    private SqliteConnection? _sqlite;
    private SqliteCommand? _sqliteGet;
    private SqliteCommand? _sqliteScan;
    private SqliteCommand? _sqliteUpdate;
    private LiteDatabase? _lite;
    private ILiteCollection<BsonDocument>? _liteDocuments;
    private ZipfianIds _zipfian = null!;
    private Random _random = null!;
    private string _peer = "";
    private string _copy = "";
    private long _operations; // run since the warm-up ended
    private long _bytesReadAtWarm; // HostProbe.StorageBytesRead when the warm-up ended

    [Params("PointRead", "RangeScan", "YcsbB")]
    public string Workload { get; set; } = "PointRead";

    internal static string Folder => Path.Combine(DataFolder, FormattableString.Invariant(
        $"larger-than-memory-{s_documents}"));

    [GlobalSetup(Target = nameof(Folio))]
    public void SetupFolio()
    {
        string folder = Prepare("Folio", "folio");
        _store = DocumentStore.Open(folder, FolioOptions());
        Console.WriteLine($"// reads direct: {_store.Pages.Cache.ReadsDirect}");
        Warm(() => Folio());
    }

    [GlobalSetup(Target = nameof(FolioBuffered))]
    public void SetupFolioBuffered()
    {
        string folder = Prepare("FolioBuffered", "folio");
        DocumentStoreOptions options = FolioOptions();
        options.DataFileReads = DataFileReadMode.Buffered;
        _store = DocumentStore.Open(folder, options);
        Warm(() => FolioBuffered());
    }

    [GlobalSetup(Target = nameof(Sqlite))]
    public void SetupSqlite()
    {
        string folder = Prepare("Sqlite", "sqlite");
        _sqlite = OpenSqlite(folder);
        _sqliteGet = Prepared(_sqlite, "SELECT json FROM docs WHERE id = $id", "$id");
        _sqliteScan = Prepared(_sqlite, "SELECT json FROM docs WHERE id >= $from ORDER BY id LIMIT 100", "$from");
        _sqliteUpdate = Prepared(_sqlite, "UPDATE docs SET json = $json WHERE id = $id", "$id", "$json");
        Warm(() => Sqlite());
    }

    [GlobalSetup(Target = nameof(LiteDb))]
    public void SetupLiteDb()
    {
        string folder = Prepare("LiteDb", "litedb");
        _lite = new LiteDatabase($"Filename={Path.Combine(folder, "db.litedb")};Connection=direct");
        _liteDocuments = _lite.GetCollection<BsonDocument>("docs");
        Warm(() => LiteDb());
    }

    /// <summary>Runs the case's workload for <see cref="WarmSecondsVariable"/> seconds (default 20) before
    /// BenchmarkDotNet's own warm-up: see the class.</summary>
    private void Warm(Func<long> workload)
    {
        int seconds = int.TryParse(Environment.GetEnvironmentVariable(WarmSecondsVariable), NumberStyles.Integer,
            CultureInfo.InvariantCulture, out int value) && value >= 0 ? value : 20;
        var watch = Stopwatch.StartNew();
        int rounds = 0;
        while (watch.Elapsed.TotalSeconds < seconds)
        {
            workload();
            rounds++;
        }

        Console.WriteLine($"// warmed with {rounds * Operations} operations in {watch.Elapsed.TotalSeconds:F1} s");
        _operations = 0;
        _bytesReadAtWarm = HostProbe.StorageBytesRead();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        using var process = Process.GetCurrentProcess();
        process.Refresh();
        double readPerOperation = _operations == 0 ? 0
            : (HostProbe.StorageBytesRead() - _bytesReadAtWarm) / (double)_operations;

        // What one read costs on the disk now, beside what each operation had the disk read: a lookup that misses
        // every cache costs at least one such read, whatever the engine.
        string file = new DirectoryInfo(_copy).EnumerateFiles("*", SearchOption.AllDirectories)
            .MaxBy(f => f.Length)!.FullName; // the store's data file
        double? small = HostProbe.UncachedReadMicroseconds(file, 4096);
        double? large = HostProbe.UncachedReadMicroseconds(file, 16384);
        Console.WriteLine(FormattableString.Invariant(
            $"// disk: {readPerOperation / 1024:F1} KiB read an operation; a random read of 4 KiB {small:F1} µs, ") +
            FormattableString.Invariant($"of 16 KiB {large:F1} µs (O_DIRECT, one after another)"));
        string line = string.Join(',', DateTime.UtcNow.ToString("O", CultureInfo.InvariantCulture), _peer,
            Workload, s_documents.ToString(CultureInfo.InvariantCulture),
            s_cacheBytes.ToString(CultureInfo.InvariantCulture),
            process.WorkingSet64.ToString(CultureInfo.InvariantCulture),
            GC.GetTotalMemory(forceFullCollection: false).ToString(CultureInfo.InvariantCulture),
            readPerOperation.ToString("F0", CultureInfo.InvariantCulture),
            small?.ToString("F1", CultureInfo.InvariantCulture), large?.ToString("F1", CultureInfo.InvariantCulture));
        File.AppendAllText(StatsFile("ltm-stats.csv"), line + Environment.NewLine);
        _store?.Dispose();
        _sqliteGet?.Dispose();
        _sqliteScan?.Dispose();
        _sqliteUpdate?.Dispose();
        _sqlite?.Dispose();
        _lite?.Dispose();
        SqliteConnection.ClearAllPools();
        if (_copy.Length > 0 && Directory.Exists(_copy))
        {
            Directory.Delete(_copy, recursive: true);
        }
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Operations)]
    public long Sqlite()
    {
        long sum = 0;
        for (int n = 0; n < Operations; n++)
        {
            switch (Next(out string id))
            {
                case Operation.Read:
                    _sqliteGet!.Parameters[0].Value = id;
                    sum += ((string)_sqliteGet.ExecuteScalar()!).Length;
                    break;
                case Operation.Scan:
                    _sqliteScan!.Parameters[0].Value = id;
                    using (SqliteDataReader reader = _sqliteScan.ExecuteReader())
                    {
                        while (reader.Read())
                        {
                            sum += System.Text.Json.JsonSerializer.Deserialize<LargeDocument>(reader.GetString(0))!.Age;
                        }
                    }

                    break;
                default:
                    _sqliteUpdate!.Parameters[0].Value = id;
                    _sqliteUpdate.Parameters[1].Value = Json(id, n);
                    sum += _sqliteUpdate.ExecuteNonQuery();
                    break;
            }
        }

        _operations += Operations;
        return sum;
    }

    [Benchmark(OperationsPerInvoke = Operations)]
    public long Folio()
    {
        long sum = 0;
        for (int n = 0; n < Operations; n++)
        {
            switch (Next(out string id))
            {
                case Operation.Read:
                    sum += _store!.Get(Collection, id)!.Value.Json.Length;
                    break;
                case Operation.Scan:
                    sum += ScanFolio(id).GetAwaiter().GetResult();
                    break;
                default:
                    sum += _store!.PutAsync(Collection, id, Encoding.UTF8.GetBytes(Json(id, n))).AsTask()
                        .GetAwaiter().GetResult();
                    break;
            }
        }

        _operations += Operations;
        return sum;
    }

    /// <summary><see cref="Folio"/> with <see cref="DocumentStoreOptions.DataFileReads"/> set to
    /// <see cref="DataFileReadMode.Buffered"/>: its misses read through the page cache, as before direct reads (the
    /// default under a memory limit this tight: see the class).</summary>
    [Benchmark(OperationsPerInvoke = Operations)]
    public long FolioBuffered() => Folio();

    [Benchmark(OperationsPerInvoke = Operations)]
    public long LiteDb()
    {
        long sum = 0;
        for (int n = 0; n < Operations; n++)
        {
            switch (Next(out string id))
            {
                case Operation.Read:
                    sum += _liteDocuments!.FindById(id)["Body"].AsString.Length;
                    break;
                case Operation.Scan:
                    foreach (BsonDocument document in _liteDocuments!.Find(LiteDB.Query.GTE("_id", id), 0, ScanLength))
                    {
                        sum += document["Age"].AsInt32;
                    }

                    break;
                default:
                    sum += _liteDocuments!.Update(LiteBson(id, n)) ? 1 : 0;
                    break;
            }
        }

        _operations += Operations;
        return sum;
    }

    private async Task<long> ScanFolio(string from)
    {
        long sum = 0;
        await using DocumentSession session = _store!.OpenSession();
        session.TrackQueryResults = false; // a read-only scan: nothing to save
        await foreach (LargeDocument document in session.QueryByRangeAsync<LargeDocument>(from, null,
            take: ScanLength).ConfigureAwait(false))
        {
            sum += document.Age;
        }

        return sum;
    }

    private enum Operation
    {
        Read,
        Scan,
        Update,
    }

    private Operation Next(out string id)
    {
        switch (Workload)
        {
            case "PointRead":
                id = Id(_random.Next(s_documents));
                return Operation.Read;
            case "RangeScan":
                id = Id(_random.Next(Math.Max(1, s_documents - ScanLength)));
                return Operation.Scan;
            default:
                id = Id(_zipfian.Next(_random));
                return _random.Next(100) < 5 ? Operation.Update : Operation.Read;
        }
    }

    /// <summary>The case's store: a copy of <paramref name="store"/>'s built store (built first if missing), read
    /// through and dropped from the page cache; returns its folder.</summary>
    private string Prepare(string peer, string store)
    {
        _peer = peer;
        int seed = EnvironmentInt(SeedVariable, 42);
        Console.WriteLine($"// {SeedVariable}={seed}");
        _random = new Random(seed);
        _zipfian = new ZipfianIds(s_documents);
        Console.WriteLine($"// built: {EnsureBuilt(store)}");
        var watch = Stopwatch.StartNew();
        _copy = WorkingCopy(store);
        Console.WriteLine($"// copied {store} in {watch.Elapsed.TotalSeconds:F1} s");
        if (Environment.GetEnvironmentVariable(HostCacheVariable) != "as-is")
        {
            watch.Restart();
            long bytes = OsPageCache.ReadThrough(_copy);
            Console.WriteLine(
                $"// read {peer}'s {bytes / (1024 * 1024)} MiB through in {watch.Elapsed.TotalSeconds:F1} s");
        }

        OsPageCache.Drop(_copy, SearchOption.AllDirectories); // closed
        return _copy;
    }

    /// <summary>A copy of <paramref name="store"/>'s built store (<c>folio</c>, <c>sqlite</c> or <c>litedb</c>) in
    /// <c>work-</c><paramref name="store"/> beside it, replacing the copy a case left, so every case starts from the
    /// store as built: the writes of YCSB-B (and of <see cref="CountBenchmarks"/>) change only their copy. Without
    /// it a run would read the store as every earlier run left it: Folio writes a changed leaf to a new place, so
    /// each run's updates would leave fewer of its leaves next to each other in the file for the next run's scans,
    /// while SQLite writes its pages in place.</summary>
    internal static string WorkingCopy(string store)
    {
        string copy = Path.Combine(Folder, "work-" + store);
        if (Directory.Exists(copy))
        {
            Directory.Delete(copy, recursive: true);
        }

        OsPageCache.CopyThrough(Path.Combine(Folder, store), copy);
        return copy;
    }

    /// <summary>Folio with SQLite's budget: the page cache only (a document cache, a quarter of the page cache by
    /// default, would be memory SQLite does not get).</summary>
    internal static DocumentStoreOptions FolioOptions() => new()
    {
        Durability = DurabilityMode.Buffered,
        CacheSize = s_cacheBytes,
        DocumentCacheSize = 0,
    };

    internal static SqliteConnection OpenSqlite(string folder)
    {
        var connection = new SqliteConnection($"Data Source={Path.Combine(folder, "db.sqlite")};" +
            "Pooling=False");
        connection.Open();
        Execute(connection, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=0; " +
            $"PRAGMA cache_size=-{s_cacheBytes / 1024};");
        return connection;
    }

    /// <summary>Builds the three stores once each (a marker beside each store's folder says it is complete); returns
    /// what the markers say (how long each build took).</summary>
    public static string EnsureBuilt() =>
        string.Join("; ", EnsureBuilt("folio"), EnsureBuilt("sqlite"), EnsureBuilt("litedb"));

    /// <summary>Builds <paramref name="store"/> (<c>folio</c>, <c>sqlite</c> or <c>litedb</c>) once, in its folder
    /// under <see cref="Folder"/>, marked complete by <c>store.built</c> beside it; returns what the marker says.
    /// </summary>
    public static string EnsureBuilt(string store) => BuildOnce(Path.Combine(Folder, store), () =>
    {
        var watch = Stopwatch.StartNew();
        string folder = Path.Combine(Folder, store);
        switch (store)
        {
            case "folio":
                BuildFolio(folder);
                break;
            case "sqlite":
                BuildSqlite(folder);
                break;
            default:
                BuildLiteDb(folder);
                break;
        }

        return FormattableString.Invariant($"{store} {watch.Elapsed.TotalSeconds:F1} s");
    }, Path.Combine(Folder, store + ".built"));

    private static void BuildFolio(string folder)
    {
        using DocumentStore store = DocumentStore.Open(folder, FolioOptions());
        LargeDocument.LoadInOrder(store, s_documents);
    }

    private static void BuildSqlite(string folder)
    {
        using SqliteConnection connection = OpenSqlite(folder);
        Execute(connection, "CREATE TABLE docs (id TEXT PRIMARY KEY, json TEXT NOT NULL);");
        using SqliteCommand insert = Prepared(connection, "INSERT INTO docs (id, json) VALUES ($id, $json)",
            "$id", "$json");
        for (int start = 0; start < s_documents; start += 10_000)
        {
            using SqliteTransaction transaction = connection.BeginTransaction();
            insert.Transaction = transaction;
            for (int i = start; i < Math.Min(s_documents, start + 10_000); i++)
            {
                insert.Parameters[0].Value = Id(i);
                insert.Parameters[1].Value = Json(Id(i), i);
                insert.ExecuteNonQuery();
            }

            transaction.Commit();
        }

        Execute(connection, "PRAGMA wal_checkpoint(TRUNCATE);");
    }

    private static void BuildLiteDb(string folder)
    {
        using var lite = new LiteDatabase($"Filename={Path.Combine(folder, "db.litedb")};Connection=direct");
        ILiteCollection<BsonDocument> documents = lite.GetCollection<BsonDocument>("docs");
        for (int start = 0; start < s_documents; start += 10_000)
        {
            documents.InsertBulk(Enumerable.Range(start, Math.Min(10_000, s_documents - start))
                .Select(i => LiteBson(Id(i), i)));
        }
    }

    private static string Id(long i) => LargeDocument.IdOf(i);

    private static string Json(string id, int version) => LargeDocument.JsonOf(id, version);

    private static BsonDocument LiteBson(string id, int version)
    {
        LargeDocument document = LargeDocument.Create(id, version);
        return new BsonDocument
        {
            ["_id"] = id,
            ["Name"] = document.Name,
            ["Email"] = document.Email,
            ["Age"] = document.Age,
            ["City"] = document.City,
            ["Body"] = document.Body,
        };
    }

    internal static SqliteCommand Prepared(SqliteConnection connection, string sql, params string[] parameters)
    {
        SqliteCommand command = connection.CreateCommand();
        command.CommandText = sql;
        foreach (string parameter in parameters)
        {
            command.Parameters.Add(parameter, SqliteType.Text);
        }

        command.Prepare();
        return command;
    }

    private static void Execute(SqliteConnection connection, string sql)
    {
        using SqliteCommand command = connection.CreateCommand();
        command.CommandText = sql;
        command.ExecuteNonQuery();
    }

    private static int EnvironmentInt(string name, int fallback) =>
        int.TryParse(Environment.GetEnvironmentVariable(name), NumberStyles.Integer, CultureInfo.InvariantCulture,
            out int value) && value > 0 ? value : fallback;

    /// <summary>YCSB's scrambled Zipfian (Gray et al.), theta 0.99: popular items spread over the key space.</summary>
    private sealed class ZipfianIds
    {
        private const double Theta = 0.99;
        private readonly long _items;
        private readonly double _zetan;
        private readonly double _alpha;
        private readonly double _eta;

        public ZipfianIds(long items)
        {
            _items = items;
            double zeta2 = Zeta(2);
            _zetan = Zeta(items);
            _alpha = 1 / (1 - Theta);
            _eta = (1 - Math.Pow(2.0 / items, 1 - Theta)) / (1 - (zeta2 / _zetan));
        }

        public long Next(Random random)
        {
            double u = random.NextDouble();
            double uz = u * _zetan;
            long rank = uz < 1 ? 0
                : uz < 1 + Math.Pow(0.5, Theta) ? 1
                : (long)(_items * Math.Pow((_eta * u) - _eta + 1, _alpha));
            // FNV-1a over the rank's bytes scatters the popular ranks across the ids.
            ulong hash = 14695981039346656037UL;
            for (int i = 0; i < 8; i++)
            {
                hash = (hash ^ (byte)(rank >> (i * 8))) * 1099511628211UL;
            }

            return (long)(hash % (ulong)_items);
        }

        private static double Zeta(long n)
        {
            double sum = 0;
            for (long i = 1; i <= n; i++)
            {
                sum += 1 / Math.Pow(i, Theta);
            }

            return sum;
        }
    }
}
