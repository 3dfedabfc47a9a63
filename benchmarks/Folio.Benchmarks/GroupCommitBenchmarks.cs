using System.Diagnostics;
using System.Text;
using BenchmarkDotNet.Attributes;
using Folio.Journal;
using Folio.Transactions;
using LiteDB;
using Microsoft.Data.Sqlite;

namespace Folio.Benchmarks;

/// <summary>
/// Concurrent single-document durable commits (~200-byte JSON, a new id per commit), through what users call. Mean is
/// per commit (OperationsPerInvoke = all commits of all writers). <c>FolioPut</c> is
/// <see cref="DocumentStore.PutAsync"/>
/// (the baseline), <c>FolioSession</c> one session per commit (<see cref="DocumentSession.Store"/> of an object that
/// serializes to the same JSON, then <see cref="DocumentSession.SaveChangesAsync"/>), and <c>Merger</c> the bare
/// transaction merger over a version table (no document layer; the table is emptied before every iteration, so the
/// baseline never carries the weight of a growing map), so the document layer's cost is visible in the same run. Peers
/// in the same run: <c>Sqlite</c> (WAL, synchronous=FULL, one connection per writer, one prepared INSERT per
/// connection: one transaction and one fsync per commit), <c>SqliteBatched</c> (one connection that drains a queue
/// of requests and commits up to 1,024 of them per transaction, as a careful engineer batches with SQLite; each
/// request completes after its transaction's commit), <c>LiteDb</c> (one shared database; it does not fsync per
/// commit, so its commits are not durable on return), and the single-writer physical limit (200 bytes + fdatasync in
/// a loop into a zero-filled file). Each method runs for <see cref="s_warmUp"/> before measuring. Commits/s, p50/p99
/// latency, the average group size and the average duration of the group fsyncs in the iteration are appended to
/// group-commit-stats.csv in the benchmark folder. The fsync duration gives the latency-bound ceiling: W writers that
/// each wait for their own commit can at best complete W commits per group fsync, so W / (average group fsync)
/// commits/s.
/// <para>
/// Every case runs in <see cref="BenchmarkConstants.GroupCommitRounds"/> interleaved rounds of
/// <see cref="BenchmarkConstants.GroupCommitIterations"/> measured iterations (<see cref="InterleavedRoundsOrderer"/>:
/// at each writer count, every method of round 1, then every method of round 2 in reverse order, and so on), so the
/// methods a target compares run beside each other four times instead of minutes apart once; the report pools the
/// rounds. The stores of <c>FolioPut</c> and <c>FolioSession</c> are kept from one round to the next (closed without a
/// checkpoint and reopened), so each round's window falls at another point of the store's checkpoint cycle, as in a
/// service that has run for a while; a fresh store per round would put every window at the same point of the cycle,
/// after the same warm-up. The other methods start afresh each round: nothing in them runs in cycles that long.
/// </para>
/// </summary>
[IterationCount(BenchmarkConstants.GroupCommitIterations)]
[WarmupCount(1)]
[Config(typeof(InterleavedRoundsConfig))]
public class GroupCommitBenchmarks : BenchmarkDirectory
{
    /// <summary>Commits per invocation of the peers that commit one at a time (2048 commits take them 0.6-3.5
    /// s).</summary>
    private const int PeerCommitsPerInvoke = BenchmarkConstants.GroupCommitPeerCommits;

    /// <summary>The most requests <see cref="SqliteBatched"/> commits in one transaction.</summary>
    private const int SqliteBatchLimit = 1024;

    /// <summary>
    /// Commits per invocation of the Folio methods, <see cref="SqliteBatched"/> and <see cref="RawFdatasync"/>: 32768,
    /// and 4 rounds of 4 measured iterations. A store checkpoints every 64 MiB of journal (about 250,000 of these
    /// commits), and a checkpoint takes CPU from the writers while it runs, so a window much shorter than that
    /// measures whether a checkpoint happened to run in it, not the steady state: the 16 iterations are about 520,000
    /// commits, two checkpoints' worth, on a store kept across the rounds. Every invocation starts its writers with
    /// Task.Run and waits for all of them, a fixed cost of 0.3-3.5 ms (waking parked pool threads) that this many
    /// commits make negligible. The raw loop gets the same count, so the one-writer comparison measures both over
    /// windows of the same length (the disk's speed drifts within seconds).
    /// </summary>
    private const int CommitsPerInvoke = BenchmarkConstants.GroupCommitCommits;

    private WriteAheadJournal _journal = null!;
    private TransactionMerger _merger = null!;
    private VersionTable _versions = null!;
    private DocumentStore _store = null!;
    private DocumentStore _storeWithoutCheckpoints = null!;
    private SqliteConnection[] _sqlite = null!;
    private SqliteCommand[] _sqliteInserts = null!;
    private SqliteBatcher _sqliteBatcher = null!;
    private LiteDatabase _lite = null!;
    private ILiteCollection<BsonDocument> _liteDocuments = null!;
    private RawDurableFile _raw = null!;
    private byte[][] _documents = null!;
    private string[] _documentStrings = null!;
    private BenchUser[] _users = null!;
    private int _invocation; // a new id per commit: "u{writer}-{Round}.{invocation}-{i}", advancing per invocation
    private long[] _latencies = null!;
    private int _latencyCount;
    private long _groupsBefore;
    private long _commitsMeasured;
    private long _groupsMeasured;
    private long _storeGroupsBefore;
    private long _syncsBefore;
    private TimeSpan _syncTimeBefore;
    private long _storeSyncsBefore;
    private TimeSpan _storeSyncTimeBefore;

    [Params(1, 16, 64, 256)]
    public int Writers { get; set; }

    /// <summary>The round (1 to <see cref="BenchmarkConstants.GroupCommitRounds"/>); see the class's remarks.</summary>
    [ParamsSource(nameof(Rounds))]
    public int Round { get; set; }

    public static IEnumerable<int> Rounds => Enumerable.Range(1, BenchmarkConstants.GroupCommitRounds);

    /// <summary>
    /// How long each method runs before BenchmarkDotNet's own warm-up: 5 s, at least one invocation. The
    /// per-iteration statistics need [IterationSetup], which makes every iteration a single invocation, so the job's
    /// one warm-up iteration alone would measure code the JIT has not optimized yet (tier 0); and at 64 and 256
    /// writers 5 s hold the store's first checkpoints, whose code runs unoptimized too (a store checkpoints about
    /// every 1.2 s there, so the first one would otherwise fall into the measured window).
    /// </summary>
    private static readonly TimeSpan s_warmUp = TimeSpan.FromSeconds(BenchmarkConstants.GroupCommitWarmUpSeconds);

    [GlobalSetup(Target = nameof(FolioPut))]
    public void SetupFolioPut()
    {
        Setup(nameof(FolioPut));
        WarmUp(FolioPut);
    }

    [GlobalSetup(Target = nameof(FolioPutWithoutCheckpoints))]
    public void SetupFolioPutWithoutCheckpoints()
    {
        Setup(nameof(FolioPutWithoutCheckpoints));
        WarmUp(FolioPutWithoutCheckpoints);
    }

    [GlobalSetup(Target = nameof(FolioSession))]
    public void SetupFolioSession()
    {
        Setup(nameof(FolioSession));
        WarmUp(FolioSession);
    }

    [GlobalSetup(Target = nameof(Merger))]
    public void SetupMerger()
    {
        Setup(nameof(Merger));
        WarmUp(Merger);
    }

    [GlobalSetup(Target = nameof(Sqlite))]
    public void SetupSqlite()
    {
        Setup(nameof(Sqlite));
        WarmUp(Sqlite);
    }

    [GlobalSetup(Target = nameof(SqliteBatched))]
    public void SetupSqliteBatched()
    {
        Setup(nameof(SqliteBatched));
        WarmUp(SqliteBatched);
    }

    [GlobalSetup(Target = nameof(LiteDb))]
    public void SetupLiteDb()
    {
        Setup(nameof(LiteDb));
        WarmUp(LiteDb);
    }

    [GlobalSetup(Target = nameof(RawFdatasync))]
    public void SetupRawFdatasync()
    {
        Setup(nameof(RawFdatasync));
        WarmUp(RawFdatasync);
    }

    private void WarmUp(Action method)
    {
        var elapsed = Stopwatch.StartNew();
        do
        {
            _latencyCount = 0;
            method();
            PurgeOldSegments();
        }
        while (elapsed.Elapsed < s_warmUp);

        _latencyCount = 0;
        _commitsMeasured = 0;
        _groupsMeasured = 0;
    }

    private void Setup(string method)
    {
        CreateRoot();
        ThreadPool.SetMinThreads(Math.Max(Writers + 8, 16), 16);
        _documentStrings = Enumerable.Range(0, 1024)
            .Select(i => $"{{\"name\":\"user {i}\",\"email\":\"user{i}@example.com\",\"age\":{20 + (i % 50)}," +
                $"\"tags\":[\"a\",\"b\",\"c\"],\"address\":{{\"city\":\"Springfield\",\"zip\":\"{10000 + i}\"}}," +
                $"\"active\":true,\"pad\":\"{new string('x', 40)}\"}}")
            .ToArray();
        _documents = _documentStrings.Select(Encoding.UTF8.GetBytes).ToArray();
        _users = Enumerable.Range(0, 1024).Select(BenchUser.Create).ToArray();
        _latencies = new long[CommitsPerInvoke];

        _journal = WriteAheadJournal.Open(NewFolder("merger"));
        _versions = new VersionTable();
        _merger = new TransactionMerger(_journal, _versions, new TransactionMergerOptions());
        // The defaults, but no checkpoint at close: the kept store's next round starts where this one's cycle was.
        _store = DocumentStore.Open(StoreFolder(method),
            new DocumentStoreOptions { Durability = DurabilityMode.Durable, CheckpointOnClose = false });
        _storeWithoutCheckpoints = DocumentStore.Open(NewFolder("folio-no-checkpoints"),
            JournalOnlyStoreOptions.Create(DurabilityMode.Durable));

        string sqlitePath = Path.Combine(NewFolder("sqlite"), "db.sqlite");
        _sqlite = new SqliteConnection[Writers];
        for (int w = 0; w < Writers; w++)
        {
            _sqlite[w] = new SqliteConnection($"Data Source={sqlitePath};Pooling=False");
            _sqlite[w].Open();
            Execute(_sqlite[w], "PRAGMA busy_timeout=60000;");
            if (w == 0)
            {
                Execute(_sqlite[w], "PRAGMA journal_mode=WAL;");
                Execute(_sqlite[w], "CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, json TEXT NOT NULL);");
            }

            Execute(_sqlite[w], "PRAGMA synchronous=FULL;");
        }

        _sqliteInserts = _sqlite.Select(PrepareInsert).ToArray();
        var batchedConnection = new SqliteConnection($"Data Source={sqlitePath};Pooling=False");
        batchedConnection.Open();
        Execute(batchedConnection, "PRAGMA busy_timeout=60000;");
        Execute(batchedConnection, "PRAGMA synchronous=FULL;");
        _sqliteBatcher = new SqliteBatcher(batchedConnection, PrepareInsert(batchedConnection));

        _lite = new LiteDatabase($"Filename={Path.Combine(NewFolder("litedb"), "db.litedb")};Connection=direct");
        _liteDocuments = _lite.GetCollection<BsonDocument>("docs");
        _raw = new RawDurableFile(Path.Combine(NewFolder("raw"), "raw.bin"), zeroFill: 64L << 20);
    }

    /// <summary>
    /// The folder of <see cref="_store"/>: for <c>FolioPut</c> and <c>FolioSession</c> one kept across the rounds in
    /// <see cref="BenchmarkDirectory.DataFolder"/> (emptied by round 1, removed after the last round), for the other
    /// methods, which do not use that store, a fresh one.
    /// </summary>
    private string StoreFolder(string method)
    {
        if (method is not (nameof(FolioPut) or nameof(FolioSession)))
        {
            return NewFolder("folio");
        }

        _keptStore = Path.Combine(DataFolder, FormattableString.Invariant($"group-commit-{method}-{Writers}"));
        if (Round == 1 && Directory.Exists(_keptStore))
        {
            Directory.Delete(_keptStore, recursive: true);
        }

        Directory.CreateDirectory(_keptStore);
        return _keptStore;
    }

    private string? _keptStore;

    [GlobalCleanup]
    public void Cleanup()
    {
        _merger.Dispose();
        _journal.Dispose();
        _store.Dispose();
        _storeWithoutCheckpoints.Dispose();
        _sqliteBatcher.Dispose();
        foreach (SqliteCommand insert in _sqliteInserts)
        {
            insert.Dispose();
        }

        foreach (SqliteConnection connection in _sqlite)
        {
            connection.Dispose();
        }

        _lite.Dispose();
        _raw.Dispose();
        DeleteRoot();
        if (_keptStore is not null && Round == BenchmarkConstants.GroupCommitRounds)
        {
            Directory.Delete(_keptStore, recursive: true);
        }
    }

    [IterationSetup]
    public void ResetStats()
    {
        _latencyCount = 0;
        _versions.Clear(); // the bare merger's baseline: no table of every id ever written to slow it down
        _groupsBefore = _journal.AppendedRecords;
        _syncsBefore = _merger.SyncCount;
        _syncTimeBefore = _merger.TotalSyncDuration;
        // Both stores: the method that runs this iteration is known only once it starts.
        _storeGroupsBefore = _store.Journal.AppendedRecords;
        _storeSyncsBefore = _store.Merger.SyncCount;
        _storeSyncTimeBefore = _store.Merger.TotalSyncDuration;
        _otherGroupsBefore = _storeWithoutCheckpoints.Journal.AppendedRecords;
        _otherSyncsBefore = _storeWithoutCheckpoints.Merger.SyncCount;
        _otherSyncTimeBefore = _storeWithoutCheckpoints.Merger.TotalSyncDuration;
    }

    private long _otherGroupsBefore;
    private long _otherSyncsBefore;
    private TimeSpan _otherSyncTimeBefore;

    [IterationCleanup]
    public void RecordStats()
    {
        Array.Sort(_latencies, 0, _latencyCount);
        _commitsMeasured += _latencyCount;
        bool bare = _method == nameof(Merger);
        bool other = _method == nameof(FolioPutWithoutCheckpoints);
        DocumentStore store = other ? _storeWithoutCheckpoints : _store;
        long groupsBefore = other ? _otherGroupsBefore : _storeGroupsBefore;
        long syncsBefore = other ? _otherSyncsBefore : _storeSyncsBefore;
        TimeSpan syncTimeBefore = other ? _otherSyncTimeBefore : _storeSyncTimeBefore;
        _groupsMeasured += bare ? _journal.AppendedRecords - _groupsBefore
            : store.Journal.AppendedRecords - groupsBefore;
        if (_latencyCount > 0)
        {
            long syncs = bare ? _merger.SyncCount - _syncsBefore : store.Merger.SyncCount - syncsBefore;
            TimeSpan syncTime = bare ? _merger.TotalSyncDuration - _syncTimeBefore
                : store.Merger.TotalSyncDuration - syncTimeBefore;
            double averageSyncUs = syncs > 0 ? syncTime.TotalMicroseconds / syncs : 0;
            double batchesPerGroup = _groupsMeasured > 0 ? (double)_commitsMeasured / _groupsMeasured : 0;
            double p50 = Percentile(0.50);
            double p99 = Percentile(0.99);
            string line = FormattableString.Invariant(
                $"{DateTime.UtcNow:O},{Writers},{_method},{p50:F1},{p99:F1},{batchesPerGroup:F1},{averageSyncUs:F1}")
                + FormattableString.Invariant($",{Round}");
            File.AppendAllText(StatsFile("group-commit-stats.csv"), line + Environment.NewLine);
        }

        PurgeOldSegments();
    }

    private string _method = string.Empty;

    [Benchmark(OperationsPerInvoke = CommitsPerInvoke)]
    public void RawFdatasync()
    {
        _method = nameof(RawFdatasync);
        byte[] record = _documents[0];
        for (int i = 0; i < CommitsPerInvoke; i++)
        {
            long started = Stopwatch.GetTimestamp();
            if (_raw.Offset + record.Length > (64L << 20))
            {
                _raw.Rewind();
            }

            _raw.Append(record);
            _raw.Sync();
            _latencies[_latencyCount++] = Stopwatch.GetTimestamp() - started;
        }
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = CommitsPerInvoke)]
    public void FolioPut()
    {
        _method = nameof(FolioPut);
        int invocation = _invocation++;
        RunWriters(CommitsPerInvoke, async (w, i) =>
            await _store.PutAsync("users", $"u{w}-{Round}.{invocation}-{i}", _documents[(w + i) & 1023])
                .ConfigureAwait(false));
    }

    /// <summary><c>FolioPut</c> on a store whose background checkpoints are off (the threshold out of reach, no
    /// interval): <c>FolioPut</c> runs with the defaults, which checkpoint every 64 MiB of journal while the writers
    /// commit, so the two side by side are the cost of checkpointing under load.</summary>
    [Benchmark(OperationsPerInvoke = CommitsPerInvoke)]
    public void FolioPutWithoutCheckpoints()
    {
        _method = nameof(FolioPutWithoutCheckpoints);
        int invocation = _invocation++;
        RunWriters(CommitsPerInvoke, async (w, i) => await _storeWithoutCheckpoints
            .PutAsync("users", $"u{w}-{Round}.{invocation}-{i}", _documents[(w + i) & 1023]).ConfigureAwait(false));
    }

    [Benchmark(OperationsPerInvoke = CommitsPerInvoke)]
    public void FolioSession()
    {
        _method = nameof(FolioSession);
        int invocation = _invocation++;
        RunWriters(CommitsPerInvoke, async (w, i) =>
        {
            await using DocumentSession session = _store.OpenSession();
            session.Store(_users[(w + i) & 1023], $"u{w}-{Round}.{invocation}-{i}");
            await session.SaveChangesAsync().ConfigureAwait(false);
        });
    }

    /// <summary>The bare transaction merger over a version table: group commit without the document layer.</summary>
    [Benchmark(OperationsPerInvoke = CommitsPerInvoke)]
    public void Merger()
    {
        _method = nameof(Merger);
        int invocation = _invocation++;
        RunWriters(CommitsPerInvoke, async (w, i) =>
        {
            var batch = new CommitBatch().Put("users", $"u{w}-{Round}.{invocation}-{i}", _documents[(w + i) & 1023]);
            await _merger.CommitAsync(batch).ConfigureAwait(false);
        });
    }

    [Benchmark(OperationsPerInvoke = PeerCommitsPerInvoke)]
    public void Sqlite()
    {
        _method = nameof(Sqlite);
        int invocation = _invocation++;
        RunWriters(PeerCommitsPerInvoke, (w, i) =>
        {
            SqliteCommand insert = _sqliteInserts[w];
            insert.Parameters[0].Value = $"u{w}-{Round}.{invocation}-{i}";
            insert.Parameters[1].Value = _documentStrings[(w + i) & 1023];
            insert.ExecuteNonQuery();
            return ValueTask.CompletedTask;
        });
    }

    [Benchmark(OperationsPerInvoke = CommitsPerInvoke)]
    public void SqliteBatched()
    {
        _method = nameof(SqliteBatched);
        int invocation = _invocation++;
        RunWriters(CommitsPerInvoke, (w, i)
            => new ValueTask(_sqliteBatcher.InsertAsync($"u{w}-{Round}.{invocation}-{i}",
                _documentStrings[(w + i) & 1023])));
    }

    [Benchmark(OperationsPerInvoke = PeerCommitsPerInvoke)]
    public void LiteDb()
    {
        _method = nameof(LiteDb);
        int invocation = _invocation++;
        RunWriters(PeerCommitsPerInvoke, (w, i) =>
        {
            var document = new BsonDocument { ["_id"] = $"u{w}-{Round}.{invocation}-{i}",
                ["json"] = _documentStrings[(w + i) & 1023] };
            _liteDocuments.Upsert(document);
            return ValueTask.CompletedTask;
        });
    }

    private void RunWriters(int commits, Func<int, int, ValueTask> commit)
    {
        var tasks = new Task[Writers];
        int perWriter = commits / Writers;
        for (int w = 0; w < Writers; w++)
        {
            int writer = w;
            tasks[w] = Task.Run(async () =>
            {
                for (int i = 0; i < perWriter; i++)
                {
                    long started = Stopwatch.GetTimestamp();
                    await commit(writer, i).ConfigureAwait(false);
                    long elapsed = Stopwatch.GetTimestamp() - started;
                    _latencies[Interlocked.Increment(ref _latencyCount) - 1] = elapsed;
                }
            });
        }

        Task.WaitAll(tasks);
    }

    /// <summary>
    /// Keeps the journals to a few segments between iterations (the benchmark measures commits, not disk space; the
    /// store keeps its documents in memory, so it loses nothing it reads while it stays open).
    /// </summary>
    private void PurgeOldSegments()
    {
        // The store purges its own journal after its checkpoints; the bare merger's journal is purged here.
        if (_journal.SegmentCount > 2)
        {
            _journal.Purge(_journal.CommittedSequence);
        }
    }

    private static SqliteCommand PrepareInsert(SqliteConnection connection)
    {
        SqliteCommand insert = connection.CreateCommand();
        insert.CommandText = "INSERT OR REPLACE INTO docs (id, json) VALUES ($id, $json);";
        insert.Parameters.Add("$id", SqliteType.Text);
        insert.Parameters.Add("$json", SqliteType.Text);
        insert.Prepare();
        return insert;
    }

    private double Percentile(double p)
        => _latencies[Math.Min(_latencyCount - 1, (int)(p * _latencyCount))] * 1_000_000.0 / Stopwatch.Frequency;

    private static void Execute(SqliteConnection connection, string sql)
    {
        using SqliteCommand command = connection.CreateCommand();
        command.CommandText = sql;
        command.ExecuteNonQuery();
    }

    /// <summary>
    /// What a careful engineer builds with SQLite for many concurrent writers: one connection, one thread that drains a
    /// queue of requests, commits up to <see cref="SqliteBatchLimit"/> of them in one transaction (one fsync), then
    /// completes them. The thread belongs to the batcher (it owns the connection and the prepared statement); writers
    /// only enqueue and await.
    /// </summary>
    private sealed class SqliteBatcher : IDisposable
    {
        private readonly SqliteConnection _connection;
        private readonly SqliteCommand _insert;
        private readonly System.Threading.Channels.Channel<(string Id, string Json,
            TaskCompletionSource Done)> _requests =
            System.Threading.Channels.Channel.CreateUnbounded<(string, string, TaskCompletionSource)>(
                new() { SingleReader = true });
        private readonly Thread _thread;

        public SqliteBatcher(SqliteConnection connection, SqliteCommand insert)
        {
            _connection = connection;
            _insert = insert;
            _thread = new Thread(Run) { IsBackground = true, Name = "SqliteBatcher" };
            _thread.Start();
        }

        public Task InsertAsync(string id, string json)
        {
            var done = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            _requests.Writer.TryWrite((id, json, done));
            return done.Task;
        }

        public void Dispose()
        {
            _requests.Writer.TryComplete();
            _thread.Join();
            _insert.Dispose();
            _connection.Dispose();
        }

        private void Run()
        {
            var batch = new List<TaskCompletionSource>(SqliteBatchLimit);
            System.Threading.Channels.ChannelReader<(string Id, string Json,
                TaskCompletionSource Done)> reader = _requests.Reader;
            while (reader.WaitToReadAsync().AsTask().GetAwaiter().GetResult())
            {
                using (SqliteTransaction transaction = _connection.BeginTransaction())
                {
                    _insert.Transaction = transaction;
                    while (batch.Count < SqliteBatchLimit && reader.TryRead(out var request))
                    {
                        _insert.Parameters[0].Value = request.Id;
                        _insert.Parameters[1].Value = request.Json;
                        _insert.ExecuteNonQuery();
                        batch.Add(request.Done);
                    }

                    transaction.Commit();
                }

                foreach (TaskCompletionSource done in batch)
                {
                    done.SetResult();
                }

                batch.Clear();
            }
        }
    }
}

/// <summary>The object <c>FolioSession</c> stores: it serializes to JSON of the same shape and size as the raw
/// documents.</summary>
public sealed class BenchUser
{
    public string Name { get; set; } = "";

    public string Email { get; set; } = "";

    public int Age { get; set; }

    public string[] Tags { get; set; } = [];

    public BenchAddress Address { get; set; } = new();

    public bool Active { get; set; }

    public string Pad { get; set; } = "";

    public static BenchUser Create(int i) => new()
    {
        Name = $"user {i}",
        Email = $"user{i}@example.com",
        Age = 20 + (i % 50),
        Tags = ["a", "b", "c"],
        Address = new BenchAddress { City = "Springfield", Zip = $"{10000 + i}" },
        Active = true,
        Pad = new string('x', 40),
    };
}

/// <summary>Part of <see cref="BenchUser"/>.</summary>
public sealed class BenchAddress
{
    public string City { get; set; } = "";

    public string Zip { get; set; } = "";
}
