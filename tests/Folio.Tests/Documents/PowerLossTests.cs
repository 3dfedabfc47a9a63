using System.Diagnostics;
using System.Text;
using System.Text.Json;
using Folio.Documents;
using Folio.Journal;
using Folio.Pages;
using Folio.Tests.Infrastructure;
using Folio.Transactions;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// Power cuts, not process kills: concurrent Durable and Buffered writers commit two-document batches to a store on
/// the <see cref="PowerLossFileSystem"/>; at a random moment the power is cut, the disk is materialized as it could be
/// (unsynced writes dropped, kept or torn by sector, unsynced folder entries partly lost), and the store reopens on
/// it. After every cut: the store opens (damage can only be a torn tail of never-synced bytes), every batch
/// acknowledged as Durable survives, no batch is partial, nothing never written appears, the recovered commits are a
/// prefix of the acknowledged ones, and what one recovery found survives the next cut. Each chain of cuts continues
/// on the previous cut's disk (so recovery's own writes are cut too) across many segment rotations, with the pipeline
/// overlapped or not.
/// <para>
/// CI runs <see cref="DefaultCuts"/> cut points; set <c>FOLIO_POWERLOSS_CUTS</c> for a long run and
/// <c>FOLIO_POWERLOSS_SEED</c> to replay a failure (its message prints the seed).
/// </para>
/// </summary>
public sealed class PowerLossTests(ITestOutputHelper output)
{
    private const int DefaultCuts = 300;
    private const int CutsPerChain = 15;
    private const int Writers = 3;
    private const int DefaultWideCuts = 60;
    private const int WideWriters = 48;
    private const int Tallies = 8;

    [Fact]
    public void The_simulator_keeps_synced_writes_and_synced_names_and_may_lose_the_rest()
    {
        using var live = new TempDirectory();
        var files = new PowerLossFileSystem(live.Path);
        string synced = Path.Combine(live.Path, "synced");
        string unsynced = Path.Combine(live.Path, "unsynced");
        using (IStorageFileScope file = new(files.OpenFile(synced, FileMode.CreateNew)))
        {
            file.File.Write(Enumerable.Repeat((byte)1, 1024).ToArray(), 0);
            file.File.Sync();
            file.File.Write(Enumerable.Repeat((byte)2, 1024).ToArray(), 1024); // never synced
        }

        files.SyncDirectory(live.Path);
        using (IStorageFileScope file = new(files.OpenFile(unsynced, FileMode.CreateNew)))
        {
            file.File.Write("data"u8, 0);
            file.File.Sync(); // data durable, name not (the folder is not synced again)
        }

        files.Cut();
        Assert.Throws<IOException>(() => files.SyncDirectory(live.Path));
        var outcomes = new HashSet<string>();
        for (int trial = 0; trial < 200; trial++)
        {
            using var after = new TempDirectory();
            files.Materialize(after.Path, new Random(trial));
            byte[] bytes = File.ReadAllBytes(Path.Combine(after.Path, "synced"));
            Assert.True(bytes.AsSpan(0, 1024).IndexOfAnyExcept((byte)1) < 0, "synced bytes survive");
            Assert.True(bytes.Length is 1024 or 1536 or 2048, $"{bytes.Length} bytes");
            for (int sector = 1024; sector < bytes.Length; sector += PowerLossFileSystem.SectorSize)
            {
                Assert.True(
                    bytes.AsSpan(sector, PowerLossFileSystem.SectorSize).IndexOfAnyExcept((byte)2, (byte)0) < 0);
            }

            outcomes.Add(
                $"{bytes.Length}:{bytes.AsSpan(1024).IndexOf((byte)0) >= 0}:" +
                    $"{File.Exists(Path.Combine(after.Path, "unsynced"))}");
        }

        // Every outcome happens: the unsynced tail dropped, kept or torn; the unsynced name kept or lost.
        Assert.Contains(outcomes, o => o.StartsWith("1024:", StringComparison.Ordinal));
        Assert.Contains(outcomes, o => o.StartsWith("2048:False", StringComparison.Ordinal));
        Assert.Contains(outcomes, o => o.StartsWith("2048:True", StringComparison.Ordinal));
        Assert.Contains(outcomes, o => o.EndsWith(":True", StringComparison.Ordinal));
        Assert.Contains(outcomes, o => o.EndsWith(":False", StringComparison.Ordinal));
    }

    [Fact]
    public Task Every_durable_commit_survives_power_cuts_no_batch_is_partial_and_nothing_unwritten_appears() =>
        CutAndRecoverAsync(Writers, DefaultCuts, wide: false);

    /// <summary>
    /// The same with <see cref="WideWriters"/> writers of small batches, durable, one group in flight: groups of
    /// <see cref="CommitPipeline.MinBatchesToApplyDuringSync"/> batches and more are applied on the apply thread while
    /// their fsync runs, so cuts land while a group sits applied and unpublished, and its failed sync must fail it.
    /// </summary>
    [Fact]
    public Task Every_durable_commit_survives_power_cuts_while_large_groups_are_applied_beside_their_fsync() =>
        CutAndRecoverAsync(WideWriters, DefaultWideCuts, wide: true);

    private async Task CutAndRecoverAsync(int writerCount, int defaultCuts, bool wide)
    {
        int cuts = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_POWERLOSS_CUTS"), out int c) ? c
            : defaultCuts;
        int seed = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_POWERLOSS_SEED"), out int s) ? s
            : Random.Shared.Next();
        var random = new Random(seed);
        var stats = new Stats();
        var clock = Stopwatch.StartNew();
        using var work = new TempDirectory();
        string current = "";
        WriterModel[] writers = [];
        List<string> lastCut = [];
        int generation = 0;
        for (int cut = 0; cut <= cuts; cut++)
        {
            if (cut % CutsPerChain == 0)
            {
                if (current.Length > 0)
                {
                    Directory.Delete(current, recursive: true);
                }

                current = Path.Combine(work.Path, $"g{generation++}");
                writers = [.. Enumerable.Range(0, writerCount).Select(w => new WriterModel(w))];
            }

            var files = new PowerLossFileSystem(current);
            DocumentStoreOptions options = RandomOptions(random, files);
            if (wide)
            {
                // Small batches, many to a group, and one group in flight, so large groups apply beside their sync.
                options.Durability = DurabilityMode.Durable;
                options.MaxGroupsInFlight = 1;
                options.SegmentSize = 128 * 1024;
                options.MaxGroupBytes = 64 * 1024;
            }

            string context = $"seed {seed}, cut {cut}, options {Describe(options)}; the last cut kept:\n  " +
                $"{string.Join("\n  ", lastCut)}";
            DocumentStore store;
            try
            {
                store = DocumentStore.Open(current, options);
            }
            catch (Exception e)
            {
                throw new Xunit.Sdk.XunitException($"The store did not open after a power cut ({context}): {e}");
            }

            try
            {
                Verify(store, writers, context, stats);
                if (cut == cuts)
                {
                    break;
                }

                DurabilityMode?[] modes = [.. writers.Select(_
                    => (DurabilityMode?)(random.Next(wide ? 12 : 3) switch
                    {
                        0 => DurabilityMode.Durable, 1 => DurabilityMode.Buffered, _ => null,
                    }))];
                (int Min, int Max) padding = wide ? (10, 100) : (100, 1500);
                List<Task> running = [.. writers.Select((w, i)
                    => Task.Run(()
                    => WriteUntilThePowerGoesAsync(store, w, modes[i] ?? options.Durability, modes[i], padding,
                        stats)))];

                // The cut comes from a thread of its own: writers whose commits complete inline can keep the pool's
                // threads busy, and a timer's callback would wait for them.
                int delay = random.Next(2, 40);
                var cutter = new Thread(() =>
                {
                    Thread.Sleep(delay);
                    files.Cut();
                });
                cutter.Start();
                await Task.WhenAll(running).WaitAsync(TestDeadline.Hang);
                cutter.Join();
                stats.GroupsAppliedDuringSync += store.Merger.GroupsAppliedDuringSync;
            }
            finally
            {
                try
                {
                    store.Dispose();
                }
                catch (Exception e) when (e is IOException or FolioException)
                {
                    // the disk is gone: closing may fail, and that is fine
                }
            }

            string next = Path.Combine(work.Path, $"g{generation++}");
            lastCut = files.Materialize(next, random);
            Directory.Delete(current, recursive: true);
            current = next;
            stats.Cuts++;
        }

        output.WriteLine(
            $"seed {seed}: {stats.Cuts} power cuts in {clock.Elapsed.TotalSeconds:F1} s; {stats.Acknowledged} " +
            $"batches acknowledged " +
            $"({stats.AcknowledgedDurable} durable), {stats.DurableChecked} durable acknowledgements checked after a " +
                $"cut, " +
            $"{stats.BufferedLost} buffered acknowledgements lost as allowed, {stats.MaxSegments} segments at most, " +
            $"{stats.OpensFromCheckpoint} opens from a checkpoint, {stats.OpensOfPurgedJournal} of a purged journal, " +
            $"{stats.GroupsAppliedDuringSync} groups applied beside their fsync");
        Assert.Equal(cuts, stats.Cuts);
        Assert.True(!wide || stats.GroupsAppliedDuringSync > 0, "no group was applied beside its fsync");
        // The wide workload's checkpoints purge its few larger segments as fast as it fills them, so it may never
        // hold three at an open; a purged journal at an open shows that it rotated.
        Assert.True(stats.DurableChecked > 0 && (wide || stats.MaxSegments > 2),
            $"the workload must acknowledge durable commits and rotate: {stats.DurableChecked}, {stats.MaxSegments}");
        Assert.True(stats.OpensFromCheckpoint > 0 && stats.OpensOfPurgedJournal > 0,
            $"checkpoints and purges must run: {stats.OpensFromCheckpoint}, {stats.OpensOfPurgedJournal}");
    }

    [Fact]
    public void Every_synced_journal_entry_survives_power_cuts_across_rotations_and_purges()
    {
        int cuts = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_POWERLOSS_CUTS"), out int c) ? c
            : DefaultCuts;
        int seed = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_POWERLOSS_SEED"), out int s) ? s
            : Random.Shared.Next();
        var random = new Random(seed);
        using var work = new TempDirectory();
        string current = Path.Combine(work.Path, "g0");
        long synced = 0; // every entry up to here was covered by a completed Sync (or found by a recovery)
        long appended = 0; // the last entry appended
        long purgeLimit = 1; // the largest limit a purge was started with
        long checkedEntries = 0;
        int purges = 0;
        List<string> lastCut = [];
        for (int cut = 0; cut <= cuts; cut++)
        {
            var files = new PowerLossFileSystem(current);
            string context = $"seed {seed}, cut {cut}; the last cut kept:\n  {string.Join("\n  ", lastCut)}";
            WriteAheadJournal journal;
            try
            {
                journal = WriteAheadJournal.Open(current,
                    new JournalOptions { SegmentSize = 4096, FileSystem = files });
            }
            catch (Exception e)
            {
                throw new Xunit.Sdk.XunitException($"The journal did not open after a power cut ({context}): {e}");
            }

            using (journal)
            {
                long last = journal.CommittedSequence;
                long first = journal.FirstSequence;
                Check(last >= synced, $"synced entries up to {synced} were lost: the journal ends at {last}");
                Check(last <= appended, $"the journal ends at {last}, but only {appended} entries were appended");
                Check(first <= Math.Max(1, purgeLimit),
                    $"the journal starts at {first}, but no purge asked to remove entries at or after {purgeLimit}");
                long expected = first;
                foreach ((long sequence, _, byte[] data) in journal.ReadAll(first))
                {
                    Check(sequence == expected, $"entry {expected} is missing (found {sequence})");
                    Check(data.AsSpan().SequenceEqual(Payload(seed, sequence)),
                        $"entry {sequence} holds bytes never appended");
                    expected++;
                    checkedEntries++;
                }

                Check(expected == last + 1, $"the entries end at {expected - 1}, the journal says {last}");
                synced = appended = last;
                if (cut == cuts)
                {
                    break;
                }

                var cutter = new Thread(() =>
                {
                    Thread.Sleep(random.Next(1, 15));
                    files.Cut();
                });
                cutter.Start();
                try
                {
                    while (true)
                    {
                        int op = random.Next(20);
                        if (op < 15)
                        {
                            long sequence = appended + 1;
                            Check(journal.Append(Payload(seed, sequence)) == sequence, "appended out of order");
                            appended = sequence;
                        }
                        else if (op < 19)
                        {
                            synced = journal.Sync();
                        }
                        else
                        {
                            long limit = journal.FirstSequence
                                + random.Next((int)Math.Max(1, synced - journal.FirstSequence + 1));
                            purgeLimit = Math.Max(purgeLimit, limit);
                            journal.Purge(limit);
                            purges++;
                        }
                    }
                }
                catch (Exception e) when (e is IOException or FolioException)
                {
                    // the power is gone
                }

                cutter.Join();
            }

            string next = Path.Combine(work.Path, $"g{cut + 1}");
            lastCut = files.Materialize(next, random);
            Directory.Delete(current, recursive: true);
            current = next;
        }

        output.WriteLine(
            $"seed {seed}: {cuts} power cuts of a journal, {checkedEntries} entries checked, {purges} purges");
        Assert.True(purges > 0 && checkedEntries > 0);

        void Check(bool condition, string message)
        {
            if (!condition)
            {
                throw new Xunit.Sdk.XunitException($"{message} ({context2()})");
            }
        }

        string context2() => $"seed {seed}; the last cut kept:\n  {string.Join("\n  ", lastCut)}";
    }

    private static byte[] Payload(int seed, long sequence) =>
        JournalTestExtensions.Payload(seed, sequence, 1 + (int)((uint)HashCode.Combine(seed, sequence, 7) % 1200));

    private static DocumentStoreOptions RandomOptions(Random random, PowerLossFileSystem files) => new()
    {
        FileSystem = files,
        SegmentSize = 64 * 1024,
        MaxDocumentSize = 8 * 1024,
        MaxGroupBytes = 16 * 1024,
        Durability = random.Next(2) == 0 ? DurabilityMode.Durable : DurabilityMode.Buffered,
        MaxGroupsInFlight = random.Next(2) == 0 ? 1 : 2,
        BufferedSyncInterval = TimeSpan.FromMilliseconds(random.Next(1, 10)),
        // Checkpoints (and the purges after them) run beside the writers: after each rotation, or every few ms.
        CheckpointThreshold = random.Next(2) == 0 ? 16 * 1024 : DocumentStoreOptions.DefaultCheckpointThreshold,
        CheckpointInterval = random.Next(2) == 0 ? TimeSpan.FromMilliseconds(random.Next(5, 40))
            : DocumentStoreOptions.DefaultCheckpointInterval,
        // Half the runs read their checkpoints through a page cache of two frames: every read evicts.
        TestCacheBytes = random.Next(2) == 0 ? 2 * 16 * 1024 : 0,
        // Background compaction off, at its default, or rewriting nearly every chunk, a pass every few ms.
        CompactionFillRate = random.Next(3) switch { 0 => 0, 1 => DocumentStoreOptions.DefaultCompactionFillRate,
            _ => 0.99 },
        CompactionBytesPerSecond = random.Next(2) == 0 ? 64 * 1024
            : DocumentStoreOptions.DefaultCompactionBytesPerSecond,
        CompactionPassInterval = TimeSpan.FromMilliseconds(random.Next(2, 20)),
        // Chunks of 256 pages (a checkpoint here is one chunk), or of 2 or 5 (several, cut anywhere between them).
        PagesPerChunk = random.Next(3) switch { 0 => ChunkFormat.MaxPagesPerChunk, 1 => 5, _ => 2 },
        // Half the runs slice every checkpoint that supersedes more than a quarter of the leaves, so cuts land
        // between slices (trees ahead for some ids).
        MinCheckpointSliceBytes = random.Next(2) == 0 ? 1 : 8L << 20,
    };

    private static string Describe(DocumentStoreOptions options) =>
        $"{options.Durability}, {options.MaxGroupsInFlight} groups in flight, buffered sync every " +
            $"{options.BufferedSyncInterval.TotalMilliseconds} ms, checkpoint threshold {options.CheckpointThreshold}" +
            $", cache {(options.TestCacheBytes > 0 ? options.TestCacheBytes : options.CacheSize)}" +
            $" bytes, checkpoint interval {options.CheckpointInterval.TotalMilliseconds} ms, compaction below " +
            $"{options.CompactionFillRate}, {options.CompactionBytesPerSecond} bytes a pass, " +
            $"{options.PagesPerChunk} pages a chunk, slices of at least {options.MinCheckpointSliceBytes} bytes";

    /// <summary>Commits batches of two documents (w-a and w-b, same batch number) and one of the writer's
    /// <see cref="Tallies"/> tallies (w-(batch mod Tallies) in the small collection <c>Tally</c>, which a checkpoint in
    /// slices takes whole beside the cut <c>Doc</c>; each is written every few batches, so a tally a checkpoint lost
    /// is not written over again at once) until the store fails.</summary>
    private static async Task WriteUntilThePowerGoesAsync(DocumentStore store, WriterModel writer,
        DurabilityMode effective, DurabilityMode? sessionMode, (int Min, int Max) paddingLength, Stats stats)
    {
        var random = new Random(writer.Id * 7919 + (int)writer.Attempted);
        while (true)
        {
            long batch = ++writer.Attempted;
            string padding = new('p', random.Next(paddingLength.Min, paddingLength.Max));
            try
            {
                await using DocumentSession session = store.OpenSession();
                session.Durability = sessionMode;
                var a = new Doc { W = writer.Id, B = batch, P = padding };
                session.Store(a, $"{writer.Id}-a");
                session.Store(new Doc { W = writer.Id, B = batch, P = padding }, $"{writer.Id}-b");
                session.Store(new Tally { W = writer.Id, B = batch }, $"{writer.Id}-{batch % Tallies}");
                await session.SaveChangesAsync();
                writer.Acknowledged.Add((batch, session.GetVersion(a), effective == DurabilityMode.Durable));
                Interlocked.Increment(ref stats.Acknowledged);
                if (effective == DurabilityMode.Durable)
                {
                    Interlocked.Increment(ref stats.AcknowledgedDurable);
                }
            }
            catch (Exception e) when (e is FolioException or IOException or ObjectDisposedException)
            {
                return; // the power is gone: this batch may or may not be on disk
            }
        }
    }

    /// <summary>Checks the recovered store against what the writers were told, then resets the model to it.</summary>
    private static void Verify(DocumentStore store, WriterModel[] writers, string context, Stats stats)
    {
        long last = store.LastCommittedSequence;
        stats.MaxSegments = Math.Max(stats.MaxSegments, store.Journal.SegmentCount);
        stats.OpensFromCheckpoint += store.Pages.Current.Sequence > 0 ? 1 : 0;
        stats.OpensOfPurgedJournal += store.Journal.FirstSequence > 1 ? 1 : 0;
        foreach (WriterModel writer in writers)
        {
            (long a, long aVersion) = Read(store, $"{writer.Id}-a", writer, context);
            (long b, long bVersion) = Read(store, $"{writer.Id}-b", writer, context);
            (long tally, long tallyVersion) = ReadTally(store, writer, a % Tallies, context);
            Check(a == b && aVersion == bVersion && (a == 0 || (a == tally && aVersion == tallyVersion)),
                $"writer {writer.Id}: a partial batch survived (a from batch {a} at {aVersion}, b from batch {b} at " +
                $"{bVersion}, its tally from batch {tally} at {tallyVersion})");

            // The batches this run committed are those from its first to a (each waited for the one before, and a
            // cut keeps a prefix); each tally holds the last committed batch of its residue.
            for (long committed = Math.Max(writer.RunStart, a - Tallies + 1); committed <= a; committed++)
            {
                writer.LastTallied[committed % Tallies] = committed;
            }

            for (int residue = 0; residue < Tallies; residue++)
            {
                long found = ReadTally(store, writer, residue, context).Batch;
                Check(found == writer.LastTallied[residue],
                    $"writer {writer.Id}: tally {residue} holds batch {found}, the last committed batch it was " +
                    $"written in is {writer.LastTallied[residue]} (the writer's batch is {a})");
            }
            Check(a <= writer.Attempted,
                $"writer {writer.Id}: batch {a} was never written (the last attempted is {writer.Attempted})");
            Check(a >= writer.Recovered,
                $"writer {writer.Id}: batch {writer.Recovered} was recovered before, and is gone now (found {a})");
            foreach ((long batch, long sequence, bool durable) in writer.Acknowledged)
            {
                if (durable)
                {
                    Check(sequence <= last && a >= batch,
                        $"writer {writer.Id}: durable batch {batch} (sequence {sequence}) was acknowledged and lost; " +
                        $"the store recovered up to {last}, the writer's batch {a}");
                    stats.DurableChecked++;
                }
                else if (sequence > last)
                {
                    stats.BufferedLost++;
                }

                Check(sequence <= last == a >= batch,
                    $"writer {writer.Id}: not a prefix: batch {batch} at sequence {sequence}, recovered up to {last} " +
                    $"with the writer at batch {a}");
                if (batch == a)
                {
                    Check(aVersion == sequence,
                        $"writer {writer.Id}: batch {a} has version {aVersion}, it was acknowledged at {sequence}");
                }
            }

            writer.Recovered = a;
            writer.RunStart = writer.Attempted + 1;
            writer.Acknowledged.Clear();
        }

        void Check(bool condition, string message)
        {
            if (!condition)
            {
                throw new Xunit.Sdk.XunitException($"{message} ({context})");
            }
        }
    }

    private static (long Batch, long Version) Read(DocumentStore store, string id, WriterModel writer, string context)
    {
        StoredDocument? stored = store.Get("Doc", id);
        if (stored is null)
        {
            return (0, 0);
        }

        Doc doc = JsonSerializer.Deserialize<Doc>(stored.Value.Json.Span)!;
        if (doc.W != writer.Id || doc.P.AsSpan().IndexOfAnyExcept('p') >= 0)
        {
            throw new Xunit.Sdk.XunitException(
                $"document {id} holds bytes no writer wrote: {Encoding.UTF8.GetString(stored.Value.Json.Span)} " +
                $"({context})");
        }

        return (doc.B, stored.Value.Version);
    }

    private static (long Batch, long Version) ReadTally(DocumentStore store, WriterModel writer, long residue,
        string context)
    {
        StoredDocument? stored = store.Get(nameof(Tally), $"{writer.Id}-{residue}");
        if (stored is null)
        {
            return (0, 0);
        }

        Tally tally = JsonSerializer.Deserialize<Tally>(stored.Value.Json.Span)!;
        if (tally.W != writer.Id || tally.B % Tallies != residue)
        {
            throw new Xunit.Sdk.XunitException(
                $"tally {writer.Id} holds bytes no writer wrote: {Encoding.UTF8.GetString(stored.Value.Json.Span)} " +
                $"({context})");
        }

        return (tally.B, stored.Value.Version);
    }

    private sealed class Tally
    {
        public int W { get; set; }

        public long B { get; set; }
    }

    private sealed class Doc
    {
        public int W { get; set; }

        public long B { get; set; }

        public string P { get; set; } = "";
    }

    private sealed class WriterModel(int id)
    {
        public int Id { get; } = id;

        /// <summary>The last batch number tried (numbers are never reused, so a lost batch cannot come back as
        /// another).</summary>
        public long Attempted;

        /// <summary>The batch found by the last recovery: durable since (recovery syncs what it found).</summary>
        public long Recovered;

        /// <summary>The first batch attempted since the last recovery.</summary>
        public long RunStart = 1;

        /// <summary>Per residue of <see cref="Tallies"/>, the last committed batch written to that tally (0:
        /// none).</summary>
        public long[] LastTallied { get; } = new long[Tallies];

        /// <summary>Batches acknowledged since the last recovery: number, commit sequence, whether acknowledged as
        /// durable.</summary>
        public List<(long Batch, long Sequence, bool Durable)> Acknowledged { get; } = [];
    }

    private sealed class Stats
    {
        public int Cuts;
        public long Acknowledged;
        public long AcknowledgedDurable;
        public long DurableChecked;
        public long BufferedLost;
        public int MaxSegments;
        public int OpensFromCheckpoint;
        public int OpensOfPurgedJournal;
        public long GroupsAppliedDuringSync;
    }

    /// <summary>Disposes a storage file at the end of a using block.</summary>
    private readonly struct IStorageFileScope(Folio.Storage.IStorageFile file) : IDisposable
    {
        public Folio.Storage.IStorageFile File { get; } = file;

        public void Dispose() => File.Dispose();
    }
}
