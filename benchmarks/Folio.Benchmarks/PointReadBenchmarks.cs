using System.Collections.Concurrent;
using System.Text;
using System.Text.Json;
using BenchmarkDotNet.Attributes;
using LiteDB;
using Microsoft.Data.Sqlite;
using JsonSerializer = System.Text.Json.JsonSerializer;

namespace Folio.Benchmarks;

/// <summary>A ~200-byte document, as the point-read benchmarks store it.</summary>
public sealed class Person
{
    public string? Id { get; set; }

    public string Name { get; set; } = string.Empty;

    public string Email { get; set; } = string.Empty;

    public int Age { get; set; }

    public string City { get; set; } = string.Empty;

    public string[] Tags { get; set; } = [];

    public bool Active { get; set; }
}

/// <summary>Source-generated serialization of <see cref="Person"/>, for the source-generated read methods.</summary>
[System.Text.Json.Serialization.JsonSerializable(typeof(Person))]
public sealed partial class PersonJsonContext : System.Text.Json.Serialization.JsonSerializerContext;

/// <summary>
/// Hot reads by id of 100,000 documents (~200 bytes of JSON) from <see cref="Threads"/> threads; Mean per read.
/// <c>Folio</c> reads through a session and returns the typed document (a session per 16 reads); <c>FolioRaw</c>
/// returns the stored JSON bytes; <c>Sqlite</c> is a primary-key lookup of a JSON text column (the text, not
/// mapped); <c>SqliteTyped</c> also deserializes it to the same class; <c>LiteDb</c> returns the BSON document;
/// <c>ConcurrentDictionary</c> holds the same bytes (the in-memory ceiling). <c>FolioSourceGenerated</c> and
/// <c>SqliteTypedSourceGenerated</c> are <c>Folio</c> and <c>SqliteTyped</c> with the same source-generated
/// <see cref="PersonJsonContext"/> instead of reflection-based serialization (the store configured through
/// <see cref="DocumentStoreOptions.JsonSerializerOptions"/>, as an application using a context would).
/// <c>FolioRawDeserialized</c> is <c>FolioRaw</c> plus deserialization without a session: the floor of a typed read.
/// </summary>
public class PointReadBenchmarks : BenchmarkDirectory
{
    private const int Documents = BenchmarkConstants.PointReadDocuments;
    private const int ReadsPerThread = 20_000;

    private DocumentStore _store = null!;
    private DocumentStore _sourceGeneratedStore = null!;
    private DocumentStore _checkpointedStore = null!;
    private DocumentStore _uncachedStore = null!;
    private SqliteConnection[] _sqlite = null!;
    private SqliteCommand[] _sqliteLookups = null!;
    private LiteDatabase _lite = null!;
    private ILiteCollection<BsonDocument> _liteDocuments = null!;
    private ConcurrentDictionary<string, byte[]> _dictionary = null!;
    private string[] _ids = null!;
    private int[][] _order = null!;

    [Params(1, 2)]
    public int Threads { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _ids = Enumerable.Range(0, Documents).Select(i => $"people/{i:D7}").ToArray();
        var json = _ids.Select((id, i) => JsonSerializer.SerializeToUtf8Bytes(new Person
        {
            Id = id,
            Name = $"Person number {i}",
            Email = $"person{i}@example.com",
            Age = 18 + (i % 60),
            City = (i % 3) switch { 0 => "Lisbon", 1 => "Oslo", _ => "Quito" },
            Tags = ["alpha", "beta", (i % 7).ToString(System.Globalization.CultureInfo.InvariantCulture)],
            Active = i % 2 == 0,
        })).ToArray();

        _store = DocumentStore.Open(NewFolder("folio"),
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered });
        _sourceGeneratedStore = DocumentStore.Open(NewFolder("folio-sourcegen"), new DocumentStoreOptions
        {
            Durability = DurabilityMode.Buffered,
            JsonSerializerOptions = new JsonSerializerOptions { TypeInfoResolver = PersonJsonContext.Default },
        });
        string checkpointedFolder = NewFolder("folio-checkpointed");
        _checkpointedStore = DocumentStore.Open(checkpointedFolder,
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered });
        string uncachedFolder = NewFolder("folio-checkpointed-uncached");
        _uncachedStore = DocumentStore.Open(uncachedFolder,
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered });
        foreach (DocumentStore store in new[] { _store, _sourceGeneratedStore, _checkpointedStore, _uncachedStore })
        {
            for (int start = 0; start < Documents; start += 1000)
            {
                var batch = new CommitBatch();
                for (int i = start; i < start + 1000; i++)
                {
                    batch.Put(nameof(Person), _ids[i], json[i]);
                }

                store.Merger.CommitAsync(batch).AsTask().GetAwaiter().GetResult();
            }
        }

        // Closed (a checkpoint) and reopened: every document is read through the checkpoint's tree.
        _checkpointedStore.Dispose();
        _checkpointedStore = DocumentStore.Open(checkpointedFolder,
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered });
        _uncachedStore.Dispose();
        _uncachedStore = DocumentStore.Open(uncachedFolder,
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered, DocumentCacheSize = 0 });

        string sqlitePath = Path.Combine(NewFolder("sqlite"), "db.sqlite");
        using (var setup = new SqliteConnection($"Data Source={sqlitePath}"))
        {
            setup.Open();
            Execute(setup, "PRAGMA journal_mode=WAL; CREATE TABLE docs (id TEXT PRIMARY KEY, json TEXT NOT NULL);");
            using SqliteTransaction transaction = setup.BeginTransaction();
            using SqliteCommand insert = setup.CreateCommand();
            insert.CommandText = "INSERT INTO docs (id, json) VALUES ($id, $json)";
            SqliteParameter id = insert.Parameters.Add("$id", SqliteType.Text);
            SqliteParameter text = insert.Parameters.Add("$json", SqliteType.Text);
            for (int i = 0; i < Documents; i++)
            {
                id.Value = _ids[i];
                text.Value = Encoding.UTF8.GetString(json[i]);
                insert.ExecuteNonQuery();
            }

            transaction.Commit();
        }

        _sqlite = new SqliteConnection[2];
        _sqliteLookups = new SqliteCommand[2];
        for (int t = 0; t < 2; t++)
        {
            _sqlite[t] = new SqliteConnection($"Data Source={sqlitePath};Mode=ReadOnly");
            _sqlite[t].Open();
            _sqliteLookups[t] = _sqlite[t].CreateCommand();
            _sqliteLookups[t].CommandText = "SELECT json FROM docs WHERE id = $id";
            _sqliteLookups[t].Parameters.Add("$id", SqliteType.Text);
            _sqliteLookups[t].Prepare();
        }

        _lite = new LiteDatabase($"Filename={Path.Combine(NewFolder("litedb"), "db.litedb")};Connection=direct");
        _liteDocuments = _lite.GetCollection<BsonDocument>("people");
        _liteDocuments.InsertBulk(Enumerable.Range(0, Documents).Select(i => new BsonDocument
        {
            ["_id"] = _ids[i],
            ["Name"] = $"Person number {i}",
            ["Email"] = $"person{i}@example.com",
            ["Age"] = 18 + (i % 60),
            ["City"] = (i % 3) switch { 0 => "Lisbon", 1 => "Oslo", _ => "Quito" },
            ["Tags"] = new BsonArray(
                new BsonValue[] { "alpha", "beta",
                (i % 7).ToString(System.Globalization.CultureInfo.InvariantCulture) }),
            ["Active"] = i % 2 == 0,
        }));

        _dictionary = new ConcurrentDictionary<string,
            byte[]>(Enumerable.Range(0, Documents).Select(i => KeyValuePair.Create(_ids[i], json[i])));
        _order = Enumerable.Range(0, 2).Select(t =>
        {
            var random = new Random(t + 1);
            return Enumerable.Range(0, ReadsPerThread).Select(_ => random.Next(Documents)).ToArray();
        }).ToArray();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store.Dispose();
        _sourceGeneratedStore.Dispose();
        _checkpointedStore.Dispose();
        _uncachedStore.Dispose();
        foreach (SqliteCommand command in _sqliteLookups)
        {
            command.Dispose();
        }

        foreach (SqliteConnection connection in _sqlite)
        {
            connection.Dispose();
        }

        _lite.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = ReadsPerThread)]
    public long Sqlite() => Run(t =>
    {
        long sum = 0;
        SqliteCommand lookup = _sqliteLookups[t];
        foreach (int i in _order[t])
        {
            lookup.Parameters[0].Value = _ids[i];
            sum += ((string)lookup.ExecuteScalar()!).Length;
        }

        return sum;
    });

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long SqliteTyped() => Run(t => ReadSqliteTyped(t, static json => JsonSerializer.Deserialize<Person>(json)!));

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long SqliteTypedSourceGenerated()
        => Run(t => ReadSqliteTyped(t, static json
        => JsonSerializer.Deserialize(json, PersonJsonContext.Default.Person)!));

    /// <summary>
    /// The floor of any typed read of these documents: <c>FolioRaw</c>'s read plus System.Text.Json deserialization
    /// (reflection-based, as <c>Folio</c> and <c>SqliteTyped</c>), with no session. <c>SqliteTyped</c> divided by this
    /// is the highest ratio a typed read through System.Text.Json can reach against <c>SqliteTyped</c>.
    /// </summary>
    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long FolioRawDeserialized() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += JsonSerializer.Deserialize<Person>(_store.Get(nameof(Person), _ids[i])!.Value.Json.Span)!.Age;
        }

        return sum;
    });

    private long ReadSqliteTyped(int t, Func<string, Person> deserialize)
    {
        long sum = 0;
        SqliteCommand lookup = _sqliteLookups[t];
        foreach (int i in _order[t])
        {
            lookup.Parameters[0].Value = _ids[i];
            sum += deserialize((string)lookup.ExecuteScalar()!).Age;
        }

        return sum;
    }

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long FolioSourceGenerated() => Run(t => ReadThroughSessions(_sourceGeneratedStore, _order[t]));

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long LiteDb() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += _liteDocuments.FindById(_ids[i])["Age"].AsInt32;
        }

        return sum;
    });

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long Folio() => Run(t => ReadThroughSessions(_store, _order[t]));

    /// <summary>Typed loads through sessions, a session per 16 reads (a request's worth).</summary>
    private long ReadThroughSessions(DocumentStore store, int[] order)
    {
        long sum = 0;
        for (int start = 0; start < order.Length; start += 16)
        {
            using DocumentSession session = store.OpenSession();
            for (int i = start; i < start + 16 && i < order.Length; i++)
            {
                ValueTask<Person?> load = session.LoadAsync<Person>(_ids[order[i]]);
                sum += (load.IsCompleted ? load.Result : load.AsTask().GetAwaiter().GetResult())!.Age;
            }
        }

        return sum;
    }

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long FolioRaw() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += _store.Get(nameof(Person), _ids[i])!.Value.Json.Length;
        }

        return sum;
    });

    /// <summary><c>FolioRaw</c> on a store closed and reopened after the writes: every document is older than the
    /// open's checkpoint, so it is read from the checkpoint's B+tree (pages in memory after their first read), then
    /// from the document cache (the default options), which holds them all.</summary>
    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long FolioRawCheckpointed() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += _checkpointedStore.Get(nameof(Person), _ids[i])!.Value.Json.Length;
        }

        return sum;
    });

    /// <summary><c>FolioRawCheckpointed</c> with the document cache off: every read goes through the checkpoint's
    /// B+tree.</summary>
    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long FolioRawCheckpointedUncached() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += _uncachedStore.Get(nameof(Person), _ids[i])!.Value.Json.Length;
        }

        return sum;
    });

    [Benchmark(OperationsPerInvoke = ReadsPerThread)]
    public long ConcurrentDictionary() => Run(t =>
    {
        long sum = 0;
        foreach (int i in _order[t])
        {
            sum += _dictionary[_ids[i]].Length;
        }

        return sum;
    });

    /// <summary>Runs the body on <see cref="Threads"/> threads at once; each does <see cref="ReadsPerThread"/> reads.
    /// The Mean is per read of one thread: with two threads on two cores, the throughput is twice 1/Mean.</summary>
    private long Run(Func<int, long> body)
    {
        if (Threads == 1)
        {
            return body(0);
        }

        long total = 0;
        var threads = Enumerable.Range(0, Threads).Select(t => new Thread(() => Interlocked.Add(ref total, body(t))))
            .ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        return total;
    }

    private static void Execute(SqliteConnection connection, string sql)
    {
        using SqliteCommand command = connection.CreateCommand();
        command.CommandText = sql;
        command.ExecuteNonQuery();
    }
}
