using System.Collections.Concurrent;
using System.Diagnostics;
using System.Text;
using System.Text.Json;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A concurrent history through the public API, checked after the fact against what a linearizable store with
/// snapshot reads must show. Writers put (unconditionally, and conditionally on a version they read), delete and
/// write two documents atomically; readers call <see cref="DocumentStore.Get"/>; session readers load several ids at
/// one snapshot. Checkpoints, eviction to a small cache and background compaction run throughout, so reads come from
/// the in-memory versions and from the trees alike. Every operation records when it was invoked and when it
/// completed. Because every commit carries its sequence, the check is exact:
/// <list type="bullet">
/// <item>a commit that completed before another was invoked has the lower sequence;</item>
/// <item>a read returns the bytes of a put to that id at that version, one invoked before the read completed, and
/// not older than the newest write to the id that completed before the read was invoked (and a read that finds
/// nothing follows a delete, or no write);</item>
/// <item>a read is never older than a read of the same id that completed before it was invoked;</item>
/// <item>a session's reads show, for every id, exactly the newest write at or below its snapshot sequence, its range
/// scans exactly the ids alive there (both ways), and that snapshot is not older than any commit completed before the
/// session's first read.</item>
/// </list>
/// </summary>
public sealed class LinearizabilityTests
{
    private const string Collection = "Reg";

    [Theory]
    [InlineData(DurabilityMode.Durable, false)]
    [InlineData(DurabilityMode.Buffered, false)]
    [InlineData(DurabilityMode.Durable, true)] // checkpoints in slices: reads across trees ahead for some ids
    public async Task A_concurrent_history_of_writes_reads_and_session_snapshots_is_linearizable(
        DurabilityMode durability, bool sliced)
    {
        double seconds = StressDuration.Seconds(3);
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = durability;
        options.CacheSize = 1 << 20;
        options.CheckpointThreshold = 32 * 1024;
        options.CheckpointInterval = TimeSpan.FromMilliseconds(20);
        options.CompactionPassInterval = TimeSpan.FromMilliseconds(50);
        SlicedPasses? slices = sliced ? SlicedPasses.Of(options) : null;

        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        string[] ids = [.. Enumerable.Range(0, 12).Select(i => $"r{i:D2}")];
        var writes = new ConcurrentQueue<Write>();
        var reads = new ConcurrentQueue<Read>();
        var sessions = new ConcurrentQueue<SessionRead>();
        long sessionReads = 0;
        long conditionalWins = 0;
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => store.Pages.LastCheckpoint.Generation < 5 || Interlocked.Read(ref sessionReads) < 50
                || Interlocked.Read(ref conditionalWins) < 20
                || (slices is not null && slices.Count < 5),
            TimeSpan.FromSeconds(60));

        Task[] writers = [.. Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            var random = new Random(w);
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                string id = ids[random.Next(ids.Length)];
                int kind = random.Next(10);
                long invoked = Stopwatch.GetTimestamp();
                if (kind < 5)
                {
                    long version = await store.PutAsync(Collection, id, Json(id, w, n));
                    writes.Enqueue(new Write(id, version, w, n, false, invoked, Stopwatch.GetTimestamp()));
                }
                else if (kind < 7)
                {
                    long expected = store.Get(Collection, id)?.Version ?? 0;
                    invoked = Stopwatch.GetTimestamp();
                    try
                    {
                        long version = await store.PutAsync(Collection, id, Json(id, w, n), expected);
                        writes.Enqueue(new Write(id, version, w, n, false, invoked, Stopwatch.GetTimestamp()));
                        Interlocked.Increment(ref conditionalWins);
                    }
                    catch (ConcurrencyException)
                    {
                        // Not committed: another write came between the read and this one.
                    }
                }
                else if (kind < 8)
                {
                    long version = await store.DeleteAsync(Collection, id);
                    writes.Enqueue(new Write(id, version, w, n, true, invoked, Stopwatch.GetTimestamp()));
                }
                else
                {
                    string other = ids[(Array.IndexOf(ids, id) + 1 + random.Next(ids.Length - 1)) % ids.Length];
                    var batch = new CommitBatch().Put(Collection, id, Json(id, w, n))
                        .Put(Collection, other, Json(other, w, n));
                    CommitResult result = await store.WriteAsync(batch);
                    long completed = Stopwatch.GetTimestamp();
                    writes.Enqueue(new Write(id, result.Sequence, w, n, false, invoked, completed));
                    writes.Enqueue(new Write(other, result.Sequence, w, n, false, invoked, completed));
                }
            }
        }))];

        Task[] readers = [.. Enumerable.Range(0, 2).Select(r => Task.Run(async () =>
        {
            var random = new Random(100 + r);
            while (!stop.IsCancellationRequested)
            {
                string id = ids[random.Next(ids.Length)];
                long invoked = Stopwatch.GetTimestamp();
                StoredDocument? document = store.Get(Collection, id);
                long completed = Stopwatch.GetTimestamp();
                reads.Enqueue(new Read(id, document?.Version, document is { } d ? Parse(d.Json) : null, invoked,
                    completed));
                if (random.Next(64) == 0)
                {
                    await Task.Yield();
                }
            }
        }))];

        Task sessionReader = Task.Run(async () =>
        {
            var random = new Random(200);
            while (!stop.IsCancellationRequested)
            {
                await using DocumentSession session = store.OpenSession();
                string[] first = [.. ids.OrderBy(_ => random.Next()).Take(4)];
                long invoked = Stopwatch.GetTimestamp();
                IReadOnlyDictionary<string, Reg?> loaded = await session.LoadAsync<Reg>(first);
                var seen = new Dictionary<string, (long? Version, Reg? Value)>();
                foreach ((string id, Reg? value) in loaded)
                {
                    seen[id] = (value is null ? null : session.GetVersion(value), value);
                }

                await Task.Delay(random.Next(3)); // commits and checkpoints go on; the snapshot must not move
                foreach (string id in ids.Except(first).OrderBy(_ => random.Next()).Take(3))
                {
                    Reg? value = await session.LoadAsync<Reg>(id);
                    seen[id] = (value is null ? null : session.GetVersion(value), value);
                }

                // A range of the ids at the same snapshot, one way or the other: exactly the ids alive there.
                int from = random.Next(ids.Length);
                int to = from + random.Next(ids.Length - from + 1);
                bool descending = random.Next(2) == 0;
                var scanned = new List<Reg>(); // query results are not tracked: their (W, N) name their write
                await foreach (Reg value in session.QueryByRangeAsync<Reg>(ids[from],
                    to < ids.Length ? ids[to] : null, descending))
                {
                    scanned.Add(value);
                }

                sessions.Enqueue(new SessionRead(session.SnapshotSequence!.Value, invoked, seen,
                    new RangeRead(ids[from..to], descending, scanned)));
                Interlocked.Increment(ref sessionReads);
            }
        });

        await Task.WhenAll([.. writers, .. readers, sessionReader]);

        var failures = new List<string>();
        var byId = writes.GroupBy(write => write.Id).ToDictionary(group => group.Key,
            group => group.OrderBy(write => write.Sequence).ToList());
        var byWriter = writes.ToDictionary(write => (write.Id, write.Writer, write.N));
        var commits = new Timeline<Write>(writes, write => write.Sequence);
        CheckWriteOrder(writes, commits, failures);
        CheckReads(reads, byId, byWriter, failures);
        CheckSessions(sessions, byId, commits, failures);
        Assert.True(failures.Count == 0, string.Join(Environment.NewLine, failures.Take(20)));
        Assert.True(reads.Count > 1000 && sessions.Count >= 50 && conditionalWins >= 20,
            $"{reads.Count} reads, {sessions.Count} session reads, {conditionalWins} conditional puts");
        Assert.True(store.Pages.LastCheckpoint.Generation >= 5, "checkpoints ran during the history");
        Assert.True(slices is null || slices.Count >= 5, $"{slices?.Count} passes in slices");
    }

    /// <summary>A commit that completed before another was invoked has the lower sequence.</summary>
    private static void CheckWriteOrder(IEnumerable<Write> writes, Timeline<Write> commits, List<string> failures)
    {
        foreach (Write write in writes)
        {
            if (commits.HighestCompletedBefore(write.Invoked) is { } earlier && earlier.Sequence >= write.Sequence)
            {
                failures.Add($"{write} got sequence {write.Sequence}, but sequence {earlier.Sequence} had completed "
                    + "before it was invoked");
            }
        }
    }

    private static void CheckReads(IEnumerable<Read> reads, Dictionary<string, List<Write>> byId,
        Dictionary<(string, int, int), Write> byWriter, List<string> failures)
    {
        foreach (IGrouping<string, Read> group in reads.GroupBy(read => read.Id))
        {
            List<Write> history = byId.GetValueOrDefault(group.Key) ?? [];
            List<Write> deletes = history.FindAll(write => write.IsDelete);
            var writesOfId = new Timeline<Write>(history, write => write.Sequence);
            var readsOfId = new Timeline<Read>(group, read => read.Version ?? 0);
            foreach (Read read in group)
            {
                Write? latest = writesOfId.HighestCompletedBefore(read.Invoked);
                if (read.Version is long version)
                {
                    if (read.Value is null || !byWriter.TryGetValue((read.Id, read.Value.W, read.Value.N),
                        out Write? source) || source.Sequence != version || source.IsDelete)
                    {
                        failures.Add($"{read} returned bytes no put to {read.Id} at version {version} wrote");
                        continue;
                    }

                    if (source.Invoked > read.Completed)
                    {
                        failures.Add($"{read} returned {source}, invoked after the read completed");
                    }

                    if (latest is not null && latest.Sequence > version)
                    {
                        failures.Add($"{read} returned version {version}, older than {latest}, which completed "
                            + "before the read was invoked");
                    }

                    if (readsOfId.HighestCompletedBefore(read.Invoked) is { Version: long seen } && seen > version)
                    {
                        failures.Add($"{read} returned version {version}, older than version {seen} an earlier read "
                            + "returned");
                    }
                }
                else if (latest is { IsDelete: false }
                    && !deletes.Exists(w => w.Sequence > latest.Sequence && w.Invoked < read.Completed))
                {
                    failures.Add($"{read} found nothing after {latest} completed, and no delete came after it");
                }
            }
        }
    }

    private static void CheckSessions(IEnumerable<SessionRead> sessions, Dictionary<string, List<Write>> byId,
        Timeline<Write> commits, List<string> failures)
    {
        foreach (SessionRead session in sessions)
        {
            if (commits.HighestCompletedBefore(session.Invoked) is { } earlier && earlier.Sequence > session.Snapshot)
            {
                failures.Add($"a session's snapshot {session.Snapshot} is older than sequence {earlier.Sequence}, "
                    + "committed before its first read");
            }

            var alive = new List<Write>();
            foreach (string id in session.Range.Ids)
            {
                if (NewestAtOrBelow(byId.GetValueOrDefault(id) ?? [], session.Snapshot) is { IsDelete: false } write)
                {
                    alive.Add(write);
                }
            }

            if (session.Range.Descending)
            {
                alive.Reverse();
            }

            string expectedRange = string.Join(" ", alive.Select(w => $"{w.Id}:{w.Writer}/{w.N}"));
            string scannedRange = string.Join(" ",
                session.Range.Scanned.Select(value => $"{value.Id}:{value.W}/{value.N}"));
            if (expectedRange != scannedRange)
            {
                failures.Add($"a session at {session.Snapshot} scanned [{scannedRange}] where [{expectedRange}] was "
                    + $"alive ({(session.Range.Descending ? "descending" : "ascending")})");
            }

            foreach ((string id, (long? version, Reg? value)) in session.Seen)
            {
                Write? expected = NewestAtOrBelow(byId.GetValueOrDefault(id) ?? [], session.Snapshot);
                if (expected is null || expected.IsDelete)
                {
                    if (version is not null)
                    {
                        failures.Add($"a session at {session.Snapshot} read {id} at version {version}, where the "
                            + $"newest write at or below its snapshot is {(object?)expected ?? "none"}");
                    }
                }
                else if (version != expected.Sequence || value is null || value.W != expected.Writer
                    || value.N != expected.N)
                {
                    failures.Add($"a session at {session.Snapshot} read {id} at version {version} ({value}), "
                        + $"expected {expected}");
                }
            }
        }
    }

    /// <summary>The write of <paramref name="history"/> (sorted by sequence) with the highest sequence at or below
    /// <paramref name="sequence"/>; null for none.</summary>
    private static Write? NewestAtOrBelow(List<Write> history, long sequence)
    {
        int count = PrefixLength(history, write => write.Sequence <= sequence);
        return count > 0 ? history[count - 1] : null;
    }

    /// <summary>How many leading items of <paramref name="sorted"/> satisfy <paramref name="holds"/>, which holds for
    /// a prefix of them (a binary search).</summary>
    private static int PrefixLength<T>(List<T> sorted, Func<T, bool> holds)
    {
        int low = 0;
        int high = sorted.Count - 1;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            if (holds(sorted[middle]))
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return low;
    }

    private static byte[] Json(string id, int writer, int n) =>
        Encoding.UTF8.GetBytes($"{{\"Id\":\"{id}\",\"W\":{writer},\"N\":{n}}}");

    private static Reg? Parse(ReadOnlyMemory<byte> json) => JsonSerializer.Deserialize<Reg>(json.Span);

    private interface IOperation
    {
        long Completed { get; }
    }

    /// <summary>Operations in the order they completed, each with the one of highest <c>key</c> among those that
    /// completed up to it: which operation of highest key had completed before a given time.</summary>
    private sealed class Timeline<T> where T : class, IOperation
    {
        private readonly List<T> _byCompletion;
        private readonly T[] _highest;

        public Timeline(IEnumerable<T> operations, Func<T, long> key)
        {
            _byCompletion = [.. operations.OrderBy(operation => operation.Completed)];
            _highest = new T[_byCompletion.Count];
            for (int i = 0; i < _byCompletion.Count; i++)
            {
                T operation = _byCompletion[i];
                _highest[i] = i > 0 && key(_highest[i - 1]) > key(operation) ? _highest[i - 1] : operation;
            }
        }

        /// <summary>Of the operations that completed before <paramref name="time"/>, the one of highest key; null for
        /// none.</summary>
        public T? HighestCompletedBefore(long time)
        {
            int count = PrefixLength(_byCompletion, operation => operation.Completed < time);
            return count > 0 ? _highest[count - 1] : null;
        }
    }

    /// <summary>A committed write (a delete, or a put of <c>{Id, W, N}</c>) and its sequence.</summary>
    private sealed record Write(string Id, long Sequence, int Writer, int N, bool IsDelete, long Invoked,
        long Completed) : IOperation;

    private sealed record Read(string Id, long? Version, Reg? Value, long Invoked, long Completed) : IOperation;

    private sealed record SessionRead(long Snapshot, long Invoked, Dictionary<string, (long?, Reg?)> Seen,
        RangeRead Range);

    /// <summary>A session's range read: the ids in the range (ascending) and what the scan returned, in its
    /// order.</summary>
    private sealed record RangeRead(string[] Ids, bool Descending, List<Reg> Scanned);

    /// <summary>The document every write puts: who wrote it (writer and its operation number).</summary>
    public sealed record Reg(string Id, int W, int N);
}
