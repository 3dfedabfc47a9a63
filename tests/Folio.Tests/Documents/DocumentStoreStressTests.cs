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
    [InlineData(DurabilityMode.Durable, 2)] // the pipeline: conflicts are found against groups still in their fsync
    public async Task Readers_see_only_committed_versions_in_increasing_order_while_writers_conflict_and_retry(
        DurabilityMode durability, int maxGroupsInFlight)
    {
        double seconds = double.TryParse(Environment.GetEnvironmentVariable("FOLIO_STRESS_SECONDS"),
            System.Globalization.CultureInfo.InvariantCulture, out double s) ? s : 3;
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { Durability = durability, MaxGroupsInFlight = maxGroupsInFlight });
        string[] ids = Enumerable.Range(0, 8).Select(i => $"k/{i}").ToArray();
        var committed = new ConcurrentDictionary<(string Id, long Version), string>();
        var observed = new ConcurrentQueue<(string Id, long Version, string Name)>();
        var failures = new ConcurrentQueue<string>();
        long conflicts = 0;

        // Run for the set time, and on a starved machine a while longer until the writers have conflicted at least
        // once.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(
            TimeSpan.FromSeconds(seconds), () => Interlocked.Read(ref conflicts) == 0, TimeSpan.FromSeconds(30));

        // Every id exists before the readers start, so a reader that gets null has read a wrong answer.
        foreach (string id in ids)
        {
            long version = await store.PutAsync("User", id, Encoding.UTF8.GetBytes("{\"Name\":\"initial\"}"));
            committed[(id, version)] = "initial";
        }

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
                        failures.Enqueue(
                            $"{id} read as absent at snapshot {session.SnapshotSequence}, but it exists at every " +
                            $"snapshot");
                        continue;
                    }

                    long version = session.GetVersion(user);
                    if (version > session.SnapshotSequence || version < last.GetValueOrDefault(id))
                    {
                        failures.Enqueue(
                            $"{id}: version {version} after {last.GetValueOrDefault(id)} (snapshot " +
                            $"{session.SnapshotSequence})");
                    }

                    last[id] = version;
                    observed.Enqueue((id, version, user.Name));
                }
            }
        })).ToList();

        await Task.WhenAll(rawWriters.Concat(sessionWriters).Concat(readers));
        Assert.Empty(failures);
        foreach (var (id, version, name) in observed)
        {
            Assert.True(committed.TryGetValue((id, version), out string? expected),
                $"{id}@{version} was seen but never acknowledged");
            Assert.Equal(expected, name);
        }

        Assert.True(observed.Count > 100, $"readers made {observed.Count} observations");
        Assert.True(Interlocked.Read(ref conflicts) > 0,
            "load-modify-save writers conflicted with the raw writers at least once");
    }

    /// <summary>
    /// <see cref="DocumentStore.Get"/> reads the latest version without registering a snapshot: two writers overwrite
    /// one document as fast as they can while a reader loops <c>Get</c>. Every read must find the document (it always
    /// exists), at a version no older than the one the reader saw before. Pruning by the two writes that follow a
    /// read's visible sequence once cut the chain under the reader (about 1 null per 100,000 gets).
    /// </summary>
    [Theory]
    [InlineData(DurabilityMode.Buffered, 1)]
    [InlineData(DurabilityMode.Durable, 1)]
    [InlineData(DurabilityMode.Durable, 2)]
    public async Task Get_always_finds_a_document_that_other_threads_keep_overwriting(DurabilityMode durability,
        int maxGroupsInFlight)
    {
        double seconds = double.TryParse(Environment.GetEnvironmentVariable("FOLIO_STRESS_SECONDS"),
            System.Globalization.CultureInfo.InvariantCulture, out double s) ? s : 3;
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = durability;
        options.MaxGroupsInFlight = maxGroupsInFlight;
        await using var store = DocumentStore.Open(dir.Path, options);
        await store.PutAsync("C", "k", "{\"n\":0}"u8.ToArray());
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds));
        var writers = Enumerable.Range(0, 2).Select(w => Task.Run(async () =>
        {
            byte[] json = Encoding.UTF8.GetBytes($"{{\"writer\":{w}}}");
            while (!stop.IsCancellationRequested)
            {
                await store.PutAsync("C", "k", json);
            }
        })).ToList();

        long gets = 0;
        long nulls = 0;
        string? regression = null;
        var reader = Task.Run(() =>
        {
            long last = 0;
            while (!stop.IsCancellationRequested)
            {
                StoredDocument? document = store.Get("C", "k");
                gets++;
                if (document is not { } found)
                {
                    nulls++;
                    continue;
                }

                if (found.Version < last)
                {
                    regression ??= $"version {found.Version} after {last}";
                }

                last = found.Version;
            }
        });

        await Task.WhenAll(writers.Append(reader));
        Assert.True(nulls == 0, $"{nulls} of {gets} gets returned null for a document that exists");
        Assert.Null(regression);
        Assert.True(gets > 1000, $"the reader made {gets} gets");
    }
}
