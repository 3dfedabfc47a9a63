using System.Collections.Concurrent;
using System.Text;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// Writers (raw puts and load-modify-save sessions with retries on conflict) and readers (sessions) on the same few
/// ids for a few seconds: readers only ever see committed versions, with the bytes committed at that version, in
/// increasing order per id across their successive snapshots.
/// </summary>
public sealed class DocumentStoreStressTests
{
    [Theory]
    [InlineData(DurabilityMode.Buffered, 1)]
    [InlineData(DurabilityMode.Durable, 2)] // the commit pipeline: conflicts are found against groups still in their fsync
    public async Task Readers_see_only_committed_versions_in_increasing_order_while_writers_conflict_and_retry(DurabilityMode durability, int maxGroupsInFlight)
    {
        double seconds = double.TryParse(Environment.GetEnvironmentVariable("FOLIO_STRESS_SECONDS"), System.Globalization.CultureInfo.InvariantCulture, out double s) ? s : 3;
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, new DocumentStoreOptions { Durability = durability, MaxGroupsInFlight = maxGroupsInFlight });
        string[] ids = Enumerable.Range(0, 8).Select(i => $"k/{i}").ToArray();
        var committed = new ConcurrentDictionary<(string Id, long Version), string>();
        var observed = new ConcurrentQueue<(string Id, long Version, string Name)>();
        var failures = new ConcurrentQueue<string>();
        long conflicts = 0;
        using var stop = new CancellationTokenSource();

        var rawWriters = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                string id = ids[(n * 3 + w) % ids.Length];
                string name = $"raw{w}-{n}";
                long version = await store.PutAsync("User", id, Encoding.UTF8.GetBytes($"{{\"Name\":\"{name}\"}}"));
                committed[(id, version)] = name;
            }
        })).ToList();

        var sessionWriters = Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                await using var session = store.OpenSession();
                string id = ids[(n + w) % ids.Length];
                User user = await session.LoadAsync<User>(id) ?? new User();
                string name = $"s{w}-{n}";
                user.Name = name;
                session.Store(user, id);
                if (n % 8 == 0)
                {
                    await Task.Delay(1); // widen the load-to-save window now and then: raw writers commit meanwhile
                }

                try
                {
                    await session.SaveChangesAsync();
                    committed[(id, session.GetVersion(user))] = name;
                }
                catch (ConcurrencyException)
                {
                    Interlocked.Increment(ref conflicts);
                }
            }
        })).ToList();

        var readers = Enumerable.Range(0, 3).Select(r => Task.Run(async () =>
        {
            var last = new Dictionary<string, long>();
            while (!stop.IsCancellationRequested)
            {
                await using var session = store.OpenSession();
                foreach (string id in ids)
                {
                    User? user = await session.LoadAsync<User>(id);
                    if (user is null)
                    {
                        continue;
                    }

                    long version = session.GetVersion(user);
                    if (version > session.SnapshotSequence || version < last.GetValueOrDefault(id))
                    {
                        failures.Enqueue($"{id}: version {version} after {last.GetValueOrDefault(id)} (snapshot {session.SnapshotSequence})");
                    }

                    last[id] = version;
                    observed.Enqueue((id, version, user.Name));
                }
            }
        })).ToList();

        // Run for the set time, and on a starved machine a while longer until the writers have conflicted at least once.
        var clock = System.Diagnostics.Stopwatch.StartNew();
        await Task.Delay(TimeSpan.FromSeconds(seconds));
        while (Interlocked.Read(ref conflicts) == 0 && clock.Elapsed < TimeSpan.FromSeconds(seconds + 30))
        {
            await Task.Delay(50);
        }

        stop.Cancel();
        await Task.WhenAll(rawWriters.Concat(sessionWriters).Concat(readers));
        Assert.Empty(failures);
        foreach (var (id, version, name) in observed)
        {
            Assert.True(committed.TryGetValue((id, version), out string? expected), $"{id}@{version} was seen but never acknowledged");
            Assert.Equal(expected, name);
        }

        Assert.True(observed.Count > 100, $"readers made {observed.Count} observations");
        Assert.True(Interlocked.Read(ref conflicts) > 0, "load-modify-save writers conflicted with the raw writers at least once");
    }
}
