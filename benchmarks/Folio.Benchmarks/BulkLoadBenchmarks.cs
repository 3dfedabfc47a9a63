using System.Text;
using System.Text.Json;
using BenchmarkDotNet.Attributes;
using Microsoft.Data.Sqlite;

namespace Folio.Benchmarks;

/// <summary>
/// Loading documents into a new store in batches, one writer, durably: what an import or a migration does, and the
/// first benchmark a user comparing stores writes. Each invocation loads documents of about 170 bytes into a store
/// created for it, <see cref="BatchSize"/> to a commit, and closes it; Mean is the whole load. With ids in ascending
/// order (`Ordered`) it loads 1,000,000 documents, enough for Folio's background checkpoints to run during the load
/// (one every 64 MiB of journal) besides the one at its close; with ids in random order (GUIDs, `Random`) 200,000,
/// since SQLite takes half a minute for a million of those. `FolioWrite` is
/// <c>store.WriteAsync</c> of a <c>CommitBatch</c> of the documents' JSON; `FolioSession` stores typed entities in
/// one session per batch; `Sqlite` is WAL with <c>synchronous=FULL</c>, one prepared INSERT and a transaction per
/// batch into a <c>WITHOUT ROWID</c> table (what a careful engineer writes). The JSON is serialized before the run for
/// the raw peers, so only the stores' work is timed; the session serializes its entities, as sessions do.
/// </summary>
[InvocationCount(1)]
[IterationCount(8)]
[WarmupCount(1)]
public class BulkLoadBenchmarks : BenchmarkDirectory
{
    private const int BatchSize = 1_000;

    private string[] _ids = [];
    private byte[][] _json = [];
    private BulkPerson[] _people = [];
    private string _folder = string.Empty;
    private int _run;

    [Params("Ordered", "Random")]
    public string Ids { get; set; } = "Ordered";

    private int Documents => Ids == "Ordered" ? 1_000_000 : 200_000;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        var random = new Random(17);
        _ids = Ids == "Ordered"
            ? Enumerable.Range(0, Documents).Select(i => $"people/{i:D9}").ToArray()
            : Enumerable.Range(0, Documents).Select(_ => $"people/{RandomGuid(random):N}").ToArray();
        _people = Enumerable.Range(0, Documents).Select(BulkPerson.Create).ToArray();
        _json = _people.Select(person => JsonSerializer.SerializeToUtf8Bytes(person)).ToArray();
    }

    [GlobalCleanup]
    public void Cleanup() => DeleteRoot();

    [IterationSetup]
    public void CreateStoreFolder() => _folder = NewFolder($"run-{_run++}");

    [IterationCleanup]
    public void RemoveFolder() => Directory.Delete(_folder, recursive: true);

    [Benchmark(Baseline = true)]
    public void Sqlite()
    {
        using var connection = new SqliteConnection($"Data Source={Path.Combine(_folder, "db.sqlite")};Pooling=False");
        connection.Open();
        using (SqliteCommand setup = connection.CreateCommand())
        {
            setup.CommandText = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                + "CREATE TABLE docs (id TEXT PRIMARY KEY, json BLOB NOT NULL) WITHOUT ROWID;";
            setup.ExecuteNonQuery();
        }

        using SqliteCommand insert = connection.CreateCommand();
        insert.CommandText = "INSERT INTO docs (id, json) VALUES ($id, $json)";
        SqliteParameter id = insert.Parameters.Add("$id", SqliteType.Text);
        SqliteParameter json = insert.Parameters.Add("$json", SqliteType.Blob);
        insert.Prepare();
        for (int start = 0; start < Documents; start += BatchSize)
        {
            using SqliteTransaction transaction = connection.BeginTransaction();
            insert.Transaction = transaction;
            for (int i = start; i < start + BatchSize; i++)
            {
                id.Value = _ids[i];
                json.Value = _json[i];
                insert.ExecuteNonQuery();
            }

            transaction.Commit();
        }
    }

    [Benchmark]
    public void FolioWrite()
    {
        using DocumentStore store = DocumentStore.Open(_folder);
        for (int start = 0; start < Documents; start += BatchSize)
        {
            var batch = new CommitBatch();
            for (int i = start; i < start + BatchSize; i++)
            {
                batch.Put("people", _ids[i], _json[i]);
            }

            store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
        }
    }

    private static Guid RandomGuid(Random random)
    {
        Span<byte> bytes = stackalloc byte[16];
        random.NextBytes(bytes);
        return new Guid(bytes);
    }

    [Benchmark]
    public void FolioSession()
    {
        using DocumentStore store = DocumentStore.Open(_folder);
        for (int start = 0; start < Documents; start += BatchSize)
        {
            using DocumentSession session = store.OpenSession();
            for (int i = start; i < start + BatchSize; i++)
            {
                session.Store(_people[i], _ids[i]);
            }

            session.SaveChangesAsync().GetAwaiter().GetResult();
        }
    }
}

/// <summary>A document of about 170 bytes of JSON.</summary>
public sealed class BulkPerson
{
    public string Name { get; set; } = string.Empty;

    public string Email { get; set; } = string.Empty;

    public int Age { get; set; }

    public string City { get; set; } = string.Empty;

    public string Note { get; set; } = string.Empty;

    public static BulkPerson Create(int i) => new()
    {
        Name = $"Person {i}",
        Email = $"p{i}@example.com",
        Age = 18 + (i % 60),
        City = i % 3 == 0 ? "Lisbon" : "Oslo",
        Note = new string('x', 100),
    };
}
