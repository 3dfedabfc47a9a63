using System.Text;
using BenchmarkDotNet.Attributes;
using LiteDB;
using Microsoft.Data.Sqlite;

namespace Folio.Benchmarks;

/// <summary>
/// YCSB-style mixes over <see cref="BenchmarkConstants.MixedDocuments"/> documents (~200 bytes) with
/// <see cref="BenchmarkConstants.MixedWorkers"/> concurrent workers: A = 50% reads / 50% updates, B = 95% / 5%. Updates
/// are durable (Folio: a session save per update, acknowledged after fsync; SQLite: WAL, synchronous=FULL, a connection
/// per worker; LiteDB: shared database, no fsync per commit). Mean per operation.
/// </summary>
public class MixedWorkloadBenchmarks : BenchmarkDirectory
{
    private const int Workers = BenchmarkConstants.MixedWorkers;
    private const int OperationsPerWorker = 200;
    private const int Documents = BenchmarkConstants.MixedDocuments;

    private DocumentStore _store = null!;
    private SqliteConnection[] _sqlite = null!;
    private LiteDatabase _lite = null!;
    private ILiteCollection<BsonDocument> _liteDocuments = null!;
    private string[] _ids = null!;
    private string _json = string.Empty;

    [Params("A", "B")]
    public string Workload { get; set; } = "A";

    private int UpdatePercent => Workload == "A" ? 50 : 5;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        ThreadPool.SetMinThreads(Workers + 8, 16);
        _ids = Enumerable.Range(0, Documents).Select(i => $"people/{i:D7}").ToArray();
        _json = System.Text.Json.JsonSerializer.Serialize(
            new Person { Name = "Person", Email = "person@example.com", Age = 40, City = "Oslo",
            Tags = ["alpha", "beta"], Active = true });
        _store = DocumentStore.Open(NewFolder("folio"));
        for (int start = 0; start < Documents; start += 1000)
        {
            var batch = new CommitBatch();
            for (int i = start; i < start + 1000; i++)
            {
                batch.Put(nameof(Person), _ids[i], Encoding.UTF8.GetBytes(_json));
            }

            _store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
        }

        string sqlitePath = Path.Combine(NewFolder("sqlite"), "db.sqlite");
        _sqlite = new SqliteConnection[Workers];
        for (int w = 0; w < Workers; w++)
        {
            _sqlite[w] = new SqliteConnection($"Data Source={sqlitePath};Pooling=False");
            _sqlite[w].Open();
            Execute(_sqlite[w], "PRAGMA busy_timeout=60000;");
            if (w == 0)
            {
                Execute(_sqlite[w],
                    "PRAGMA journal_mode=WAL; CREATE TABLE docs (id TEXT PRIMARY KEY, json TEXT NOT NULL);");
                using SqliteTransaction transaction = _sqlite[w].BeginTransaction();
                foreach (string id in _ids)
                {
                    using SqliteCommand insert = _sqlite[w].CreateCommand();
                    insert.CommandText = "INSERT INTO docs (id, json) VALUES ($id, $json)";
                    insert.Parameters.AddWithValue("$id", id);
                    insert.Parameters.AddWithValue("$json", _json);
                    insert.ExecuteNonQuery();
                }

                transaction.Commit();
            }

            Execute(_sqlite[w], "PRAGMA synchronous=FULL;");
        }

        _lite = new LiteDatabase($"Filename={Path.Combine(NewFolder("litedb"), "db.litedb")};Connection=direct");
        _liteDocuments = _lite.GetCollection<BsonDocument>("people");
        _liteDocuments.InsertBulk(_ids.Select(id => new BsonDocument { ["_id"] = id, ["json"] = _json }));
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store.Dispose();
        foreach (SqliteConnection connection in _sqlite)
        {
            connection.Dispose();
        }

        _lite.Dispose();
        DeleteRoot();
    }

    /// <summary>
    /// A read, or a read-modify-write through a session. An update that conflicts (another worker saved the document
    /// between its load and its save) is not a completed operation: it is retried in a new session until it saves, and
    /// the conflicts are counted in mixed-stats.csv.
    /// </summary>
    [Benchmark(Baseline = true, OperationsPerInvoke = Workers * OperationsPerWorker)]
    public void Folio()
    {
        long conflictsBefore = Interlocked.Read(ref _conflicts);
        Run(async (w, random) =>
        {
            string id = _ids[random.Next(Documents)];
            bool update = random.Next(100) < UpdatePercent;
            while (true)
            {
                await using DocumentSession session = _store.OpenSession();
                Person? person = await session.LoadAsync<Person>(id).ConfigureAwait(false);
                if (!update)
                {
                    return;
                }

                person!.Age++;
                try
                {
                    await session.SaveChangesAsync().ConfigureAwait(false);
                    return;
                }
                catch (ConcurrencyException)
                {
                    Interlocked.Increment(ref _conflicts);
                }
            }
        });
        long conflicts = Interlocked.Read(ref _conflicts) - conflictsBefore;
        string line = FormattableString.Invariant(
            $"{DateTime.UtcNow:O},{Workload},{conflicts},{Workers * OperationsPerWorker}");
        File.AppendAllText(StatsFile("mixed-stats.csv"), line + Environment.NewLine);
    }

    private long _conflicts;

    [Benchmark(OperationsPerInvoke = Workers * OperationsPerWorker)]
    public void Sqlite() => Run((w, random) =>
    {
        string id = _ids[random.Next(Documents)];
        using SqliteCommand command = _sqlite[w].CreateCommand();
        if (random.Next(100) < UpdatePercent)
        {
            command.CommandText = "INSERT OR REPLACE INTO docs (id, json) VALUES ($id, $json)";
            command.Parameters.AddWithValue("$json", _json);
        }
        else
        {
            command.CommandText = "SELECT json FROM docs WHERE id = $id";
        }

        command.Parameters.AddWithValue("$id", id);
        command.ExecuteScalar();
        return ValueTask.CompletedTask;
    });

    [Benchmark(OperationsPerInvoke = Workers * OperationsPerWorker)]
    public void LiteDb() => Run((w, random) =>
    {
        string id = _ids[random.Next(Documents)];
        if (random.Next(100) < UpdatePercent)
        {
            _liteDocuments.Upsert(new BsonDocument { ["_id"] = id, ["json"] = _json });
        }
        else
        {
            _liteDocuments.FindById(id);
        }

        return ValueTask.CompletedTask;
    });

    private static void Run(Func<int, Random, ValueTask> operation)
    {
        var tasks = new Task[Workers];
        for (int w = 0; w < Workers; w++)
        {
            int worker = w;
            tasks[w] = Task.Run(async () =>
            {
                var random = new Random(worker * 7919);
                for (int i = 0; i < OperationsPerWorker; i++)
                {
                    await operation(worker, random).ConfigureAwait(false);
                }
            });
        }

        Task.WaitAll(tasks);
    }

    private static void Execute(SqliteConnection connection, string sql)
    {
        using SqliteCommand command = connection.CreateCommand();
        command.CommandText = sql;
        command.ExecuteNonQuery();
    }
}
