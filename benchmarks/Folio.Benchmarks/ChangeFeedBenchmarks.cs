using System.Diagnostics;
using System.Text;
using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// One change-feed subscriber tails the store while 16 sessions commit 200 single-document batches each, durably.
/// Mean is per change delivered to the subscriber (OperationsPerInvoke = 3,200). The lag (time from the last commit's
/// acknowledgement until the subscriber has seen it) is appended to change-feed-stats.csv in the benchmark folder.
/// </summary>
public class ChangeFeedBenchmarks : BenchmarkDirectory
{
    private const int Writers = 16;
    private const int CommitsPerWriter = 200;

    private DocumentStore _store = null!;
    private byte[] _json = [];

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _store = DocumentStore.Open(NewFolder("folio"));
        _json = Encoding.UTF8.GetBytes(
            System.Text.Json.JsonSerializer.Serialize(
            new Person { Name = "Person", Email = "person@example.com", Age = 40, City = "Oslo", Tags = ["alpha"],
            Active = true }));
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store.Dispose();
        DeleteRoot();
    }

    [Benchmark(OperationsPerInvoke = Writers * CommitsPerWriter)]
    public async Task<long> SubscriberKeepsUp()
    {
        long from = _store.LastCommittedSequence + 1;
        int expected = Writers * CommitsPerWriter;
        using var stop = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        long lastAcknowledged = 0;
        var subscriber = Task.Run(async () =>
        {
            int seen = 0;
            await foreach (DocumentChange change in _store.Changes.ReadAsync(from, stop.Token).ConfigureAwait(false))
            {
                if (++seen == expected)
                {
                    return Stopwatch.GetTimestamp();
                }
            }

            return 0L;
        });

        var writers = Enumerable.Range(0, Writers).Select(w => Task.Run(async () =>
        {
            for (int i = 0; i < CommitsPerWriter; i++)
            {
                await _store.PutAsync(nameof(Person), $"w{w}/{i}", _json).ConfigureAwait(false);
            }

            Interlocked.Exchange(ref lastAcknowledged,
                Math.Max(Interlocked.Read(ref lastAcknowledged), Stopwatch.GetTimestamp()));
        })).ToArray();
        await Task.WhenAll(writers).ConfigureAwait(false);
        long caughtUp = await subscriber.ConfigureAwait(false);
        double lagMicroseconds = Math.Max(0,
            caughtUp - Interlocked.Read(ref lastAcknowledged)) * 1_000_000.0 / Stopwatch.Frequency;
        string stats = Path.Combine(Environment.GetEnvironmentVariable("FOLIO_BENCH_DIR")
            ?? Path.Combine(AppContext.BaseDirectory, "bench-data"), "change-feed-stats.csv");
        File.AppendAllText(stats,
            FormattableString.Invariant($"{DateTime.UtcNow:O},lag_us,{lagMicroseconds:F1}{Environment.NewLine}"));
        return caughtUp;
    }
}
