using System.Diagnostics;
using System.Globalization;
using Folio.CrashHost;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Folio.Transactions;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// Kills a child process committing to a document store with SIGKILL at random moments and reopens the store, so each
/// reopen replays a journal with a torn tail into the index. After each reopen every writer's documents must be exactly
/// the state after its acknowledged batches, or after those and the one more batch it may have committed without
/// acknowledging (each writer awaits its commit before the next): ids, bytes, versions and deletions. The journal grows
/// across the cycles past <see cref="VersionedIndex.MinPutsForParallelEnd"/> puts, so the last reopen copies the live
/// values in parallel. Before each reopen, the files verify healthy and a salvage of them names no loss and reads as
/// many documents as the reopen then holds. A few cycles in CI; FOLIO_CRASH_CYCLES sets how many (a new store every
/// ten).
/// </summary>
public sealed class StoreCrashRecoveryTests(ITestOutputHelper output)
{
    private const int Writers = 8;

    /// <summary>Cycles against one store before a long run starts a new one.</summary>
    private const int CyclesPerStore = 10;

    [Fact]
    public async Task Every_acknowledged_write_of_a_document_store_survives_SIGKILL_and_replay()
    {
        int cycles = CrashHostProcess.Cycles;
        using var root = new TempDirectory();
        var random = new Random(Environment.TickCount);
        var model = new Dictionary<string, (byte[] Json, long Version)>[Writers]; // each writer's live documents
        string folder = string.Empty;
        long totalAcknowledged = 0;
        int unacknowledgedCommitted = 0;
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            if (cycle % CyclesPerStore == 0)
            {
                // A new store every few cycles, so that a long run's journal (and its replay) does not grow without
                // end.
                folder = Path.Combine(root.Path,
                    string.Create(CultureInfo.InvariantCulture, $"store{cycle / CyclesPerStore}"));
                for (int writer = 0; writer < Writers; writer++)
                {
                    model[writer] = new(StringComparer.Ordinal);
                }
            }

            bool lastOfStore = cycle == cycles - 1 || cycle % CyclesPerStore == CyclesPerStore - 1;
            string tag = string.Create(CultureInfo.InvariantCulture, $"c{cycle}");
            List<(long Sequence, int Writer, long Batch)> acks = await RunChildUntilKilledAsync(folder, tag, random,
                lastOfStore);

            var lastAcked = new long[Writers];
            Array.Fill(lastAcked, -1);
            var sequences = new Dictionary<(int, long), long>();
            foreach ((long sequence, int writer, long batch) in acks)
            {
                Assert.Equal(lastAcked[writer] + 1, batch); // a writer's acknowledgements come in order, none missing
                lastAcked[writer] = batch;
                sequences[(writer, batch)] = sequence;
                totalAcknowledged++;
            }

            // A kill is not damage: the files verify healthy and a salvage names no loss, torn tail or not.
            VerifyResult verified = await DocumentStore.VerifyFilesAsync(folder);
            Assert.True(verified.IsHealthy, $"cycle {cycle}: the files after the kill verify healthy: " +
                string.Join(" | ", verified.Problems));
            var damaged = new List<DamagedRange>();
            long salvaged = 0;
            await foreach (StoredDocument _ in DocumentStore.SalvageFilesAsync(folder, damaged.Add))
            {
                salvaged++;
            }

            Assert.True(damaged.Count == 0, $"cycle {cycle}: the salvage after the kill names no loss: " +
                string.Join("; ", damaged.Select(r => $"{r.Collection}:{r.FromSequence}-{r.ToSequence}")));

            using var store = DocumentStore.Open(folder, StoreCrashWorkload.Options());
            Assert.Equal(salvaged, store.Index.LiveDocuments()); // the salvage read what the open recovered
            for (int writer = 0; writer < Writers; writer++)
            {
                // A: the model after the writer's acknowledged batches of this cycle, with their acknowledged versions.
                var acknowledged = new Dictionary<string,
                    (byte[] Json, long Version)>(model[writer], StringComparer.Ordinal);
                for (long batch = 0; batch <= lastAcked[writer]; batch++)
                {
                    Apply(acknowledged, StoreCrashWorkload.Batch(tag, writer, batch), sequences[(writer, batch)]);
                }

                List<(string Id, byte[]? Json)> next = StoreCrashWorkload.Batch(tag, writer, lastAcked[writer] + 1);
                if (Matches(store, acknowledged, next, nextCommitted: false, out string firstDifference))
                {
                    model[writer] = acknowledged;
                    continue;
                }

                // B: the same and the next batch, committed but not acknowledged when the child died.
                Assert.True(
                    Matches(store, acknowledged, next, nextCommitted: true, out string differenceFromNext),
                    $"cycle {cycle}, writer {writer} (acknowledged through batch {lastAcked[writer]}): the store " +
                        $"matches neither the acknowledged state ({firstDifference}) nor that state plus the next " +
                        $"batch ({differenceFromNext})");
                long nextVersion = store.Get(StoreCrashWorkload.Collection, next[0].Id)?.Version ?? 0;
                Apply(acknowledged, next, nextVersion);
                model[writer] = acknowledged;
                unacknowledgedCommitted++;
            }

            // No document beyond the model's (the checks above look only at the ids the model and the next batches
            // name).
            Assert.Equal(model.Sum(documents => (long)documents.Count), store.Index.LiveDocuments());
            if (lastOfStore)
            {
                long journalPuts = CountPuts(store);
                Assert.True(journalPuts >= VersionedIndex.MinPutsForParallelEnd,
                    $"the store's last reopen replays at least {VersionedIndex.MinPutsForParallelEnd} puts: " +
                    $"{journalPuts}");
                output.WriteLine(
                    $"store {cycle / CyclesPerStore}: checkpoint {store.Pages.Current.Generation} at sequence " +
                    $"{store.Pages.Current.Sequence}, journal from {store.Journal.FirstSequence}; " +
                    $"{journalPuts} puts in the journal after it, " +
                    $"{model.Sum(documents => documents.Count)} live documents after the last reopen");
            }
        }

        output.WriteLine(
            $"{cycles} SIGKILL cycles, {totalAcknowledged} acknowledged batches, {unacknowledgedCommitted} committed " +
            $"batches the child did not live to acknowledge");
    }

    /// <summary>Starts the child, lets it commit for a random moment (the last cycle: until the journal holds enough
    /// puts for the parallel end), kills it and returns its acknowledgements.</summary>
    private static async Task<List<(long Sequence, int Writer, long Batch)>> RunChildUntilKilledAsync(string folder,
        string tag, Random random, bool last)
    {
        // Every cycle but a store's last checkpoints and purges while it commits, so kills land in checkpoints too.
        using Process child = CrashHostProcess.Start(folder, tag, Writers.ToString(CultureInfo.InvariantCulture),
            "store", last ? "plain" : "checkpoints");
        var acks = new List<(long, int, long)>();
        var reading = Task.Run(() =>
        {
            while (child.StandardOutput.ReadLine() is { } line)
            {
                string[] parts = line.Split(' ');
                if (parts.Length == 4 && parts[0] == "ACK")
                {
                    lock (acks)
                    {
                        acks.Add(
                            (long.Parse(parts[1], CultureInfo.InvariantCulture),
                            int.Parse(parts[2], CultureInfo.InvariantCulture),
                            long.Parse(parts[3], CultureInfo.InvariantCulture)));
                    }
                }
            }
        });

        await Task.Delay(random.Next(100, 500));
        if (last)
        {
            // Enough acknowledged puts (with a margin) that the journal after the checkpoint (the previous reopen's
            // close wrote one covering everything before this child) holds more than the parallel end's minimum.
            long needed = VersionedIndex.MinPutsForParallelEnd + (2 * StoreCrashWorkload.BatchSize * Writers);
            var waited = Stopwatch.StartNew();
            while (AckedPuts(acks) < needed)
            {
                Assert.True(waited.Elapsed < TestDeadline.Hang,
                    $"the child acknowledged {AckedPuts(acks)} puts in {waited.Elapsed}, short of {needed}");
                await Task.Delay(10);
            }

            await Task.Delay(random.Next(0, 50));
        }

        await CrashHostProcess.KillAsync(child, reading);
        lock (acks)
        {
            return [.. acks];
        }
    }

    private static long AckedPuts(List<(long Sequence, int Writer, long Batch)> acks)
    {
        lock (acks)
        {
            long puts = 0;
            foreach ((_, _, long batch) in acks)
            {
                puts += StoreCrashWorkload.IsDelete(batch) ? 0 : StoreCrashWorkload.BatchSize;
            }

            return puts;
        }
    }

    private static void Apply(Dictionary<string, (byte[] Json, long Version)> state,
        List<(string Id, byte[]? Json)> batch, long version)
    {
        foreach ((string id, byte[]? json) in batch)
        {
            if (json is null)
            {
                state.Remove(id);
            }
            else
            {
                state[id] = (json, version);
            }
        }
    }

    /// <summary>
    /// Whether the store holds, for the ids of one writer, exactly <paramref name="expected"/> (its documents after its
    /// acknowledged batches) or, when <paramref name="nextCommitted"/>, that state with <paramref name="next"/> applied
    /// at one version above the acknowledged ones.
    /// </summary>
    private static bool Matches(DocumentStore store, Dictionary<string, (byte[] Json, long Version)> expected,
        List<(string Id, byte[]? Json)> next, bool nextCommitted, out string difference)
    {
        var touched = new Dictionary<string, byte[]?>(StringComparer.Ordinal);
        foreach ((string id, byte[]? json) in next)
        {
            touched[id] = json;
        }

        long? nextVersion = null;
        foreach (string id in expected.Keys.Concat(touched.Keys).Distinct())
        {
            StoredDocument? actual = store.Get(StoreCrashWorkload.Collection, id);
            if (nextCommitted && touched.TryGetValue(id, out byte[]? json))
            {
                if (json is null ? actual is not null : actual is null || !actual.Value.Json.Span.SequenceEqual(json))
                {
                    string change = json is null ? "deletes it" : "puts it";
                    difference = $"{id}: {Describe(actual)}, the next batch {change}";
                    return false;
                }

                if (actual is { } document)
                {
                    nextVersion ??= document.Version;
                    if (document.Version != nextVersion
                        || document.Version <= (expected.TryGetValue(id, out var before) ? before.Version : 0))
                    {
                        difference = $"{id}: version {document.Version} for the next batch";
                        return false;
                    }
                }

                continue;
            }

            bool present = expected.TryGetValue(id, out (byte[] Json, long Version) want);
            if (present != actual.HasValue
                || (present
                && (!actual!.Value.Json.Span.SequenceEqual(want.Json) || actual.Value.Version != want.Version)))
            {
                difference = $"{id}: {Describe(actual)}, expected {(present ? $"version {want.Version}" : "absent")}";
                return false;
            }
        }

        difference = string.Empty;
        return true;
    }

    private static string Describe(StoredDocument? document) =>
        document is { } d ? string.Create(CultureInfo.InvariantCulture, $"version {d.Version}, {d.Json.Length} bytes")
            : "absent";

    /// <summary>The puts the open replayed: those in the journal after the checkpoint it mounted.</summary>
    private static long CountPuts(DocumentStore store)
    {
        using JournalReader reader = store.Journal.OpenReader(store.Pages.Current.Sequence + 1);
        long puts = 0;
        while (reader.TryRead(out JournalEntry entry))
        {
            foreach (BatchCommand command in BatchEncoding.Decode(entry.Data))
            {
                puts += command.Kind == ChangeKind.Put ? 1 : 0;
            }
        }

        return puts;
    }
}
