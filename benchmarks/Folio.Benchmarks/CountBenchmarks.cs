using BenchmarkDotNet.Attributes;
using Microsoft.Data.Sqlite;

namespace Folio.Benchmarks;

/// <summary>
/// Counting a collection of the larger-than-memory store (<see cref="LargerThanMemoryBenchmarks"/>: its documents of
/// about 1 KiB under a 256 MiB cache, built once and shared): a session's <c>CountAsync</c> against SQLite's
/// <c>SELECT count(*)</c> on the same rows with the same cache budget, and against the walk of every document that
/// <c>CountAsync</c> used to make (<c>FolioWalk</c>). Each case reads and writes a copy of the built store
/// (<see cref="LargerThanMemoryBenchmarks.WorkingCopy"/>, deleted at cleanup). With <see cref="Changes"/> 10,000, that
/// many documents with new ids were written since the open, so the count has ids to correct that the checkpoint's tree
/// does not hold yet.
/// </summary>
[InvocationCount(1)]
[IterationCount(5)]
[WarmupCount(1)]
public class CountBenchmarks : BenchmarkDirectory
{
    private DocumentStore? _store;
    private SqliteConnection? _sqlite;
    private SqliteCommand? _sqliteCount;
    private string _copy = "";

    [Params(0, 10_000)]
    public int Changes { get; set; }

    [GlobalSetup(Targets = [nameof(Folio), nameof(FolioWalk)])]
    public void SetupFolio()
    {
        LargerThanMemoryBenchmarks.EnsureBuilt("folio");
        _copy = LargerThanMemoryBenchmarks.WorkingCopy("folio");
        _store = DocumentStore.Open(_copy, LargerThanMemoryBenchmarks.FolioOptions());
        for (int i = 0; i < Changes; i++)
        {
            string id = ExtraId(i);
            byte[] json = System.Text.Encoding.UTF8.GetBytes(LargeDocument.JsonOf(id, i));
            _store.PutAsync(LargeDocument.Collection, id, json).AsTask().GetAwaiter().GetResult();
        }
    }

    [GlobalSetup(Target = nameof(Sqlite))]
    public void SetupSqlite()
    {
        LargerThanMemoryBenchmarks.EnsureBuilt("sqlite");
        _copy = LargerThanMemoryBenchmarks.WorkingCopy("sqlite");
        _sqlite = LargerThanMemoryBenchmarks.OpenSqlite(_copy);
        _sqliteCount = LargerThanMemoryBenchmarks.Prepared(_sqlite, "SELECT count(*) FROM docs");
        using SqliteTransaction transaction = _sqlite.BeginTransaction();
        using SqliteCommand insert = LargerThanMemoryBenchmarks.Prepared(_sqlite,
            "INSERT INTO docs (id, json) VALUES ($id, $json)", "$id", "$json");
        insert.Transaction = transaction;
        for (int i = 0; i < Changes; i++)
        {
            insert.Parameters[0].Value = ExtraId(i);
            insert.Parameters[1].Value = LargeDocument.JsonOf(ExtraId(i), i);
            insert.ExecuteNonQuery();
        }

        transaction.Commit();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store?.Dispose();
        _sqliteCount?.Dispose();
        _sqlite?.Dispose();
        if (_copy.Length > 0 && Directory.Exists(_copy))
        {
            Directory.Delete(_copy, recursive: true);
        }
    }

    [Benchmark(Baseline = true)]
    public long Sqlite() => (long)_sqliteCount!.ExecuteScalar()!;

    [Benchmark]
    public async Task<long> Folio()
    {
        await using DocumentSession session = _store!.OpenSession();
        return await session.CountAsync<LargeDocument>().ConfigureAwait(false);
    }

    [Benchmark]
    public long FolioWalk() => _store!.Index.CountByWalking(LargeDocument.Collection, _store.LastCommittedSequence);

    private static string ExtraId(int i) => FormattableString.Invariant($"zz-count/{i:D6}");
}
