using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using Folio.CrashHost;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// Kills a child process with SIGKILL while it calls only the public API (puts, batches, deletes and session saves from
/// several writers, with full backups into files, compactions, checkpoints and scrubs back to back beside them, which
/// must find nothing wrong, and background checkpoints every few milliseconds; every other run acknowledges commits
/// before their fsync, as <see cref="DurabilityMode.Buffered"/>, which must survive a process crash too:
/// <see cref="PublicApiWorkload"/>). After each kill: the files verify healthy; every writer's documents are exactly
/// the state after its acknowledged operations, or after those and the one operation it had in flight (all of a batch
/// or none of it); and the last backup the child completed restores to exactly the state at the sequence it reported,
/// and to a point in time between its checkpoint and that sequence to the state there, give or take that one
/// operation in flight. A second workload moves money between accounts in sessions from eight
/// tasks (<see cref="PublicApiWorkload.RunBankAsync"/>): no snapshot a reader loads, and no store after a kill, may
/// show a total other than the opening one, and every acknowledged transfer must hold. A third reads the change feed
/// from the files (<see cref="DocumentChanges.ReadFilesAsync"/>) in the test's process through all the kills: every
/// commit once, in order, exactly as the reopened store keeps it (none a kill took back). Each test keeps one store
/// through all its cycles. A few cycles in CI; FOLIO_CRASH_CYCLES sets how many.
/// </summary>
public sealed class PublicApiCrashRecoveryTests(ITestOutputHelper output)
{
    private const int Writers = PublicApiWorkload.Writers;

    [Fact]
    public async Task Acknowledged_public_api_writes_and_completed_backups_survive_SIGKILL()
    {
        int cycles = CrashHostProcess.Cycles;
        using var root = new TempDirectory();
        string folder = Path.Combine(root.Path, "store");
        string backups = Path.Combine(root.Path, "backups");
        Directory.CreateDirectory(backups);
        var random = new Random(Environment.TickCount);
        // Every writer's operations that hold, in order, with their sequences (for one committed without an
        // acknowledgement, an upper bound: the store's last sequence when it was found).
        var history = new List<(long K, long Sequence)>[Writers];
        for (int writer = 0; writer < Writers; writer++)
        {
            history[writer] = [];
        }

        long acknowledged = 0;
        int inFlightFound = 0;
        int backupsRestored = 0;
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            long firstK = (cycle + 1) * 1_000_000L;
            (List<(int Writer, long K, long Sequence)> acks, string? backup, long backupSequence,
                long backupCheckpoint) = await RunChildUntilKilledAsync(folder, firstK, backups, random);

            var inFlight = new long[Writers]; // each writer's operation after its last acknowledged one
            Array.Fill(inFlight, firstK);
            foreach ((int writer, long k, long sequence) in acks)
            {
                Assert.Equal(inFlight[writer], k); // a writer's acknowledgements come in order, none missing
                history[writer].Add((k, sequence));
                inFlight[writer] = k + 1;
                acknowledged++;
            }

            VerifyResult verified = await DocumentStore.VerifyFilesAsync(folder);
            Assert.True(verified.IsHealthy, $"cycle {cycle}: the files after the kill verify healthy: " +
                string.Join(" | ", verified.Problems));

            await using (DocumentStore store = DocumentStore.Open(folder, PublicApiWorkload.Options()))
            {
                for (int writer = 0; writer < Writers; writer++)
                {
                    Dictionary<string, long> expected = Model(writer, history[writer], long.MaxValue);
                    Dictionary<string, long> actual = Documents(store, writer);
                    if (Same(expected, actual))
                    {
                        continue;
                    }

                    PublicApiWorkload.Apply(expected, writer, inFlight[writer]);
                    Assert.True(Same(expected, actual), $"cycle {cycle}, writer {writer}: the store matches neither " +
                        $"its acknowledged operations nor those and operation {inFlight[writer]}: " +
                        Difference(expected, actual));
                    history[writer].Add((inFlight[writer], store.LastCommittedSequence));
                    inFlightFound++;
                }
            }

            if (backup is not null)
            {
                string restored = Path.Combine(root.Path, "restored");
                await CheckBackupAsync(backup, backupSequence, null, restored, history, inFlight, cycle);
                // And to a point in time between the backup's checkpoint and its end.
                long pointInTime = backupCheckpoint + random.NextInt64(backupSequence - backupCheckpoint + 1);
                await CheckBackupAsync(backup, pointInTime, new RestoreOptions { ToSequence = pointInTime }, restored,
                    history, inFlight, cycle);
                backupsRestored++;
            }

            foreach (string file in Directory.GetFiles(backups))
            {
                File.Delete(file);
            }
        }

        Assert.True(backupsRestored > 0, "no backup completed before a kill");
        output.WriteLine($"{cycles} SIGKILL cycles, {acknowledged} acknowledged operations, {inFlightFound} " +
            $"committed without an acknowledgement, {backupsRestored} backups restored whole and to a point in time");
    }

    [Fact]
    public async Task Transfers_between_accounts_keep_their_total_and_every_acknowledged_one_through_SIGKILL()
    {
        int cycles = CrashHostProcess.Cycles;
        using var root = new TempDirectory();
        string folder = Path.Combine(root.Path, "bank");
        var random = new Random(Environment.TickCount);
        long committed = 0; // transfers the store held after the last reopen
        long acknowledgedTotal = 0;
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            using Process child = CrashHostProcess.Start("bank", folder, cycle % 2 == 1 ? "sliced" : "whole");
            long acknowledged = 0;
            var badSums = new List<string>();
            var reading = Task.Run(() =>
            {
                while (child.StandardOutput.ReadLine() is { } line)
                {
                    if (line == "ACK")
                    {
                        Interlocked.Increment(ref acknowledged);
                    }
                    else
                    {
                        lock (badSums)
                        {
                            badSums.Add(line);
                        }
                    }
                }
            });

            var waited = Stopwatch.StartNew();
            while (Interlocked.Read(ref acknowledged) < 50)
            {
                Assert.True(waited.Elapsed < TestDeadline.Hang, "the child saved fewer than 50 transfers");
                Assert.False(child.HasExited, "the child exited");
                await Task.Delay(10);
            }

            await Task.Delay(random.Next(0, 600));
            await CrashHostProcess.KillAsync(child, reading);
            Assert.True(badSums.Count == 0, $"cycle {cycle}: a session's snapshot did not add up: " +
                string.Join(", ", badSums.Take(5)));

            VerifyResult verified = await DocumentStore.VerifyFilesAsync(folder);
            Assert.True(verified.IsHealthy, $"cycle {cycle}: the files after the kill verify healthy: " +
                string.Join(" | ", verified.Problems));
            await using DocumentStore store = DocumentStore.Open(folder, PublicApiWorkload.Options());
            await using DocumentSession session = store.OpenSession();
            long total = 0;
            long transfers = 0;
            for (int a = 0; a < PublicApiWorkload.Accounts; a++)
            {
                PublicApiWorkload.Account account = (await session.LoadAsync<PublicApiWorkload.Account>(
                    PublicApiWorkload.AccountId(a)))!;
                Assert.True(account.Balance >= 0, $"cycle {cycle}: {account.Id} has {account.Balance}");
                total += account.Balance;
                transfers += account.Transfers;
            }

            Assert.Equal(PublicApiWorkload.Accounts * PublicApiWorkload.OpeningBalance, total);
            Assert.Equal(0, transfers % 2);
            // Every acknowledged transfer held, and at most one more per transferring task committed unacknowledged.
            long held = (transfers / 2) - committed;
            Assert.True(held >= acknowledged && held <= acknowledged + PublicApiWorkload.TransferTasks,
                $"cycle {cycle}: {acknowledged} transfers acknowledged, {held} in the store");
            committed = transfers / 2;
            acknowledgedTotal += acknowledged;
        }

        output.WriteLine($"{cycles} SIGKILL cycles, {acknowledgedTotal} acknowledged transfers, {committed} held");
    }

    [Fact]
    public async Task A_follower_of_the_files_sees_every_commit_once_in_order_across_the_writers_kills()
    {
        int cycles = CrashHostProcess.Cycles;
        using var root = new TempDirectory();
        string folder = Path.Combine(root.Path, "store");
        string backups = Path.Combine(root.Path, "backups");
        Directory.CreateDirectory(backups);
        var random = new Random(Environment.TickCount);
        var seen = new List<DocumentChange>();
        using var stopFollowing = new CancellationTokenSource();
        await using (DocumentStore.Open(folder, PublicApiWorkload.Options()))
        {
            // An empty store for the follower to start on, before the first child.
        }

        // One follower, in this process, through every kill.
        Task follower = Task.Run(async () =>
        {
            try
            {
                await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(folder, 1, follow: true,
                    stopFollowing.Token))
                {
                    lock (seen)
                    {
                        seen.Add(change);
                    }
                }
            }
            catch (OperationCanceledException) when (stopFollowing.IsCancellationRequested)
            {
            }
        });
        var acknowledged = new List<(int Writer, long K, long Sequence)>();
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            long firstK = (cycle + 1) * 1_000_000L;
            acknowledged.AddRange((await RunChildUntilKilledAsync(folder, firstK, backups, random)).Acks);
            foreach (string file in Directory.GetFiles(backups))
            {
                File.Delete(file);
            }
        }

        // The last child's torn tail is the reopen's to cut: the follower reads on to the reopened store's last commit.
        List<DocumentChange> history = [];
        await using (DocumentStore store = DocumentStore.Open(folder, PublicApiWorkload.Options()))
        {
            long last = store.LastCommittedSequence;
            var waited = Stopwatch.StartNew();
            while (LastSeen(seen) < last)
            {
                Assert.True(waited.Elapsed < TestDeadline.Hang, $"the follower stopped at {LastSeen(seen)} of {last}");
                Assert.False(follower.IsCompleted, $"the follower ended: {follower.Exception}");
                await Task.Delay(10);
            }

            await foreach (DocumentChange change in store.Changes.ReadAsync(store.Changes.FirstSequence, last))
            {
                history.Add(change);
            }
        }

        await stopFollowing.CancelAsync();
        await follower.WaitAsync(TestDeadline.Hang);
        List<DocumentChange> changes;
        lock (seen)
        {
            changes = [.. seen];
        }

        // Each commit once, in order, none skipped: sequences from 1 without a gap (a commit's changes share one).
        long expected = 1;
        foreach (DocumentChange change in changes)
        {
            Assert.True(change.Sequence == expected || change.Sequence == expected - 1,
                $"the follower read commit {change.Sequence} after {expected - 1}");
            expected = change.Sequence + 1;
        }

        // What it read is what the store holds: no change a kill took back, none that differs.
        var bySequence = changes.GroupBy(change => change.Sequence).ToDictionary(group => group.Key,
            group => group.Select(Describe).ToList());
        foreach (IGrouping<long, DocumentChange> commit in history.GroupBy(change => change.Sequence))
        {
            Assert.Equal(commit.Select(Describe).ToList(), bySequence[commit.Key]);
        }

        // And every acknowledged operation is among them, at its sequence.
        foreach ((int writer, long k, long sequence) in acknowledged)
        {
            Assert.Contains(Expected(writer, k), bySequence[sequence]);
        }

        output.WriteLine($"{cycles} SIGKILL cycles, {acknowledged.Count} acknowledged operations, the follower read " +
            $"{changes.Count} changes of {LastSeen(seen)} commits; {history.Count} changes compared with the store's");
    }

    private static long LastSeen(List<DocumentChange> seen)
    {
        lock (seen)
        {
            return seen.Count == 0 ? 0 : seen[^1].Sequence;
        }
    }

    /// <summary>A change as "kind collection/id K", K from its JSON (-1 for a delete).</summary>
    private static string Describe(DocumentChange change)
    {
        long k = -1;
        if (change.Kind == ChangeKind.Put)
        {
            using JsonDocument json = JsonDocument.Parse(change.Json);
            k = json.RootElement.GetProperty("K").GetInt64();
        }

        return string.Create(CultureInfo.InvariantCulture, $"{change.Kind} {change.Collection}/{change.Id} {k}");
    }

    /// <summary>The first change operation <paramref name="k"/> of <paramref name="writer"/> makes.</summary>
    private static string Expected(int writer, long k)
    {
        string key = PublicApiWorkload.Main + "/" + PublicApiWorkload.Id(writer, k);
        return k % 5 == 4 ? $"Delete {key} -1" : string.Create(CultureInfo.InvariantCulture, $"Put {key} {k}");
    }

    /// <summary>Starts the child, lets it run until it has completed a backup and for a random moment more, kills it
    /// and returns its acknowledgements and its last completed backup.</summary>
    private static async Task<(List<(int Writer, long K, long Sequence)> Acks, string? Backup, long BackupSequence,
        long BackupCheckpoint)> RunChildUntilKilledAsync(string folder, long firstK, string backups, Random random)
    {
        using Process child = CrashHostProcess.Start("api", folder,
            firstK.ToString(CultureInfo.InvariantCulture), backups);
        var acks = new List<(int, long, long)>();
        var unexpected = new List<string>();
        string? backup = null;
        long backupSequence = 0;
        long backupCheckpoint = 0;
        var reading = Task.Run(() =>
        {
            while (child.StandardOutput.ReadLine() is { } line)
            {
                string[] parts = line.Split(' ');
                lock (acks)
                {
                    if (parts is ["ACK", string writer, string k, string sequence])
                    {
                        acks.Add((int.Parse(writer, CultureInfo.InvariantCulture),
                            long.Parse(k, CultureInfo.InvariantCulture),
                            long.Parse(sequence, CultureInfo.InvariantCulture)));
                    }
                    else if (parts is ["BACKUP", string file, string sequence2, string checkpoint])
                    {
                        backup = file;
                        backupSequence = long.Parse(sequence2, CultureInfo.InvariantCulture);
                        backupCheckpoint = long.Parse(checkpoint, CultureInfo.InvariantCulture);
                    }
                    else
                    {
                        unexpected.Add(line); // a scrub that found a problem, or anything else
                    }
                }
            }
        });

        var waited = Stopwatch.StartNew();
        while (Volatile.Read(ref backup) is null)
        {
            Assert.True(waited.Elapsed < TestDeadline.Hang, "the child completed no backup");
            Assert.False(child.HasExited, "the child exited");
            await Task.Delay(10);
        }

        await Task.Delay(random.Next(0, 800));
        await CrashHostProcess.KillAsync(child, reading);
        lock (acks)
        {
            Assert.True(unexpected.Count == 0, "the child printed: " + string.Join(" / ", unexpected.Take(3)));
            return ([.. acks], backup, backupSequence, backupCheckpoint);
        }
    }

    /// <summary>Restores <paramref name="backup"/> (to <paramref name="sequence"/>, its end or the point in time
    /// <paramref name="options"/> name) and checks it holds, per writer, the operations at or below that sequence, and
    /// perhaps the writer's operation that was in flight at the kill (it may have committed below the sequence without
    /// the child living to acknowledge it), but no later one.</summary>
    private static async Task CheckBackupAsync(string backup, long sequence, RestoreOptions? options,
        string restored, List<(long K, long Sequence)>[] history, long[] inFlight, int cycle)
    {
        if (Directory.Exists(restored))
        {
            Directory.Delete(restored, recursive: true);
        }

        RestoreResult result = await DocumentStore.RestoreAsync(backup, restored, options);
        Assert.Equal(sequence, result.Sequence);
        await using (DocumentStore store = DocumentStore.Open(restored, PublicApiWorkload.Options()))
        {
            for (int writer = 0; writer < Writers; writer++)
            {
                Dictionary<string, long> expected = Model(writer, history[writer], sequence);
                Dictionary<string, long> actual = Documents(store, writer);
                if (Same(expected, actual))
                {
                    continue;
                }

                // Only the operation in flight at the kill may be in the backup without a known sequence below its
                // own: every operation before it was acknowledged with its sequence.
                int included = history[writer].FindIndex(operation => operation.Sequence > sequence);
                long next = included < 0 ? inFlight[writer] : history[writer][included].K;
                Assert.True(next == inFlight[writer], $"cycle {cycle}, writer {writer}: the backup at sequence " +
                    $"{sequence} does not hold the state at its sequence: {Difference(expected, actual)}");
                PublicApiWorkload.Apply(expected, writer, next);
                Assert.True(Same(expected, actual), $"cycle {cycle}, writer {writer}: the backup at sequence " +
                    $"{sequence} matches neither the state at its sequence nor that and operation {next}: " +
                    Difference(expected, actual));
            }
        }

        Directory.Delete(restored, recursive: true);
    }

    private static Dictionary<string, long> Model(int writer, List<(long K, long Sequence)> operations,
        long upToSequence)
    {
        var state = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach ((long k, long sequence) in operations)
        {
            if (sequence <= upToSequence)
            {
                PublicApiWorkload.Apply(state, writer, k);
            }
        }

        return state;
    }

    /// <summary>The writer's documents in the store: "collection/id" to the operation that wrote each.</summary>
    private static Dictionary<string, long> Documents(DocumentStore store, int writer)
    {
        var state = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach (string collection in new[] { PublicApiWorkload.Main, PublicApiWorkload.Side })
        {
            for (int i = 0; i < PublicApiWorkload.HotIds; i++)
            {
                string id = PublicApiWorkload.Id(writer, i);
                if (store.Get(collection, id) is { } document)
                {
                    using JsonDocument json = JsonDocument.Parse(document.Json);
                    state[collection + "/" + id] = json.RootElement.GetProperty("K").GetInt64();
                }
            }
        }

        return state;
    }

    private static bool Same(Dictionary<string, long> expected, Dictionary<string, long> actual) =>
        expected.Count == actual.Count
        && expected.All(pair => actual.TryGetValue(pair.Key, out long k) && k == pair.Value);

    private static string Difference(Dictionary<string, long> expected, Dictionary<string, long> actual) =>
        string.Join(", ", expected.Keys.Union(actual.Keys).Order(StringComparer.Ordinal)
            .Where(key => expected.GetValueOrDefault(key, -1) != actual.GetValueOrDefault(key, -1))
            .Select(key => $"{key} expected {expected.GetValueOrDefault(key, -1)} found " +
                $"{actual.GetValueOrDefault(key, -1)}"));
}
