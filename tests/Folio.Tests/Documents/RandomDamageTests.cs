using System.Text;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// A store's files damaged at random, as bit rot leaves them: each round writes a history of puts and deletes over
/// tiny segments with checkpoints and compactions between, closes without a last checkpoint (so the journal after the
/// checkpoint holds commits), and flips 1 to 3 bits, half of them in a journal segment's records, the rest anywhere in
/// any file of the store (data file, segments, the durable mark, the purge watermark). Then:
/// <list type="bullet">
/// <item><description>a salvage never refuses, yields only versions that were written, and, where it names no lost
/// commits, exactly the last version of every document outside the damaged ranges of documents;</description></item>
/// <item><description>opening the store either refuses with <see cref="StoreCorruptedException"/> or gives every
/// document's last version (a read of a document in a damaged page may fail with that exception alone), never an
/// older one, a deleted one back, or none where one was written; and a write afterwards is read
/// back;</description></item>
/// <item><description>a scan of the files (<see cref="DocumentStore.ScanFilesAsync"/>, what <c>folio export</c>
/// reads) either throws that exception or gives every document's last version;</description></item>
/// <item><description>the change feed of the files (<see cref="DocumentChanges.ReadFilesAsync"/>, what
/// <c>folio tail</c> reads), from where the journal starts, either throws that exception or gives every commit from
/// there in order, each exactly as written;</description></item>
/// <item><description>a backup of the files (<see cref="DocumentStore.BackupFilesAsync(string, string,
/// IProgress{long}, CancellationToken)"/>, what <c>folio backup</c> takes) either fails and leaves no file, or
/// restores to a store that reads every document's last version;</description></item>
/// <item><description>a description of the files (<see cref="DocumentStore.ReadInfoAsync"/>, what <c>folio info</c>
/// prints) either throws that exception or counts every collection's live documents exactly;</description></item>
/// <item><description>a verify of the files (<see cref="DocumentStore.VerifyFilesAsync"/>, what <c>folio verify</c>
/// runs) that calls them healthy leaves a store that opens and reads every document's last version, and the open
/// store's own scrub reports any page a read found damaged.</description></item>
/// </list>
/// CI runs 24 rounds of each (120 of the change feed's, which any damaged record refuses); <c>FOLIO_DAMAGE_ROUNDS</c>
/// and <c>FOLIO_DAMAGE_SEED</c> run more or others (README, "Longer runs"), and the detailed logger prints what the
/// rounds exercised.
/// </summary>
public sealed class RandomDamageTests(ITestOutputHelper output)
{
    [Fact]
    public async Task A_salvage_of_files_damaged_at_random_yields_only_written_versions_and_names_every_loss()
    {
        int checkedIds = 0;
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            var ranges = new List<DamagedRange>();
            var salvaged = new Dictionary<(string, string), (int Value, long Sequence)>();

            // Never refused: without a readable checkpoint, the journal alone, with what its purges took named.
            await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir, ranges.Add))
            {
                salvaged.Add((document.Collection, document.Id),
                    (DamagedPageTests.JsonValue(document)!.Value, document.Version));
            }

            Count(outcomes, ranges.Count == 0 ? "nothing lost"
                : string.Join("+", ranges.Select(r => r.Collection is null ? "commits" : "documents").Distinct()
                    .Order(StringComparer.Ordinal)));
            string context = $"flips {flips}, ranges " + string.Join("; ", ranges.Select(r =>
                $"{r.Collection}:{r.FromId}-{r.ToId}:{r.FromSequence}-{r.ToSequence}"));
            foreach (((string collection, string id), (int value, long sequence)) in salvaged)
            {
                Assert.True(history.WasWritten((collection, id), value, sequence),
                    $"{collection}/{id} {value}@{sequence} was written; {context}");
            }

            if (ranges.Any(r => r.Collection is null))
            {
                return; // any document may be older, missing or back: only what was written is checked
            }

            foreach ((string collection, string id) document in history.Documents)
            {
                bool inDamagedRange = ranges.Any(r => r.Collection == document.collection
                    && (r.FromId is null || string.CompareOrdinal(document.id, r.FromId) >= 0)
                    && (r.ToId is null || string.CompareOrdinal(document.id, r.ToId) < 0));
                (int, long)? expected = history.Last(document);
                (int, long)? actual = salvaged.TryGetValue(document, out (int, long) got) ? got : null;
                Assert.True(actual == expected || (inDamagedRange && actual is null),
                    $"{document}: {actual} where {expected} was last written; {context}");
                checkedIds++;
            }
        });

        string summary = Summary(outcomes);
        Assert.True(checkedIds > 1000, $"rounds whose every document was checked ({checkedIds} ids; {summary})");
        Assert.True(outcomes.Keys.Any(o => o.Contains("commits", StringComparison.Ordinal)),
            $"a round lost commits ({summary})");
    }

    [Fact]
    public async Task A_store_whose_files_are_damaged_at_random_refuses_to_open_or_gives_every_last_version()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            DocumentStore store;
            try
            {
                store = DocumentStore.Open(dir, Options());
            }
            catch (StoreCorruptedException)
            {
                Count(outcomes, "refused");
                return;
            }

            await using (store)
            {
                int failed = AssertLastVersions(store, history, $"flips {flips}");
                Count(outcomes, failed == 0 ? "opened whole" : "opened, damaged pages");
                try
                {
                    long version = await store.PutAsync("items", "zz-after", Json(-1));
                    Assert.Equal(version, store.Get("items", "zz-after")?.Version);
                }
                catch (StoreCorruptedException)
                {
                    // The new id's place is in a damaged leaf: the write fails alone.
                }
            }
        });

        Assert.True(outcomes.ContainsKey("refused") && outcomes.ContainsKey("opened whole"), Summary(outcomes));
    }

    [Fact]
    public async Task A_scan_of_files_damaged_at_random_throws_or_gives_every_last_version()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            var scanned = new Dictionary<(string, string), (int Value, long Sequence)>();
            try
            {
                await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(dir))
                {
                    scanned.Add((document.Collection, document.Id),
                        (DamagedPageTests.JsonValue(document)!.Value, document.Version));
                }
            }
            catch (StoreCorruptedException)
            {
                Count(outcomes, "refused");
                return;
            }

            Count(outcomes, "read whole");
            foreach ((string, string) document in history.Documents)
            {
                (int, long)? actual = scanned.TryGetValue(document, out (int, long) got) ? got : null;
                Assert.True(actual == history.Last(document),
                    $"{document}: {actual} where {history.Last(document)} was last written; flips {flips}");
            }
        });

        Assert.True(outcomes.ContainsKey("refused") && outcomes.ContainsKey("read whole"), Summary(outcomes));
    }

    [Fact]
    public async Task A_change_feed_of_files_damaged_at_random_throws_or_gives_every_commit_the_journal_keeps()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            var changes = new List<(long, string, string, int?)>();
            long from = 1;
            try
            {
                while (true)
                {
                    try
                    {
                        changes.Clear();
                        await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(dir, from, false))
                        {
                            changes.Add((change.Sequence, change.Collection, change.Id,
                                change.Kind == ChangeKind.Put ? ValueOf(change.Json) : null));
                        }

                        break;
                    }
                    catch (JournalPositionPurgedException purged) when (from == 1)
                    {
                        from = purged.FirstAvailableSequence; // where the journal starts after its purges
                    }
                }
            }
            catch (StoreCorruptedException)
            {
                // Any damaged record refuses the feed (half the flips land in records): five times the rounds.
                Count(outcomes, "refused");
                return;
            }

            Count(outcomes, "read whole");
            Assert.True(from <= history.Commits[^1].Sequence + 1, $"the journal starts at {from}; flips {flips}");
            var expected = history.Commits.Where(c => c.Sequence >= from).ToList();
            Assert.True(expected.SequenceEqual(changes),
                $"from {from}: {changes.Count} changes read where {expected.Count} were committed, first difference " +
                $"{expected.Zip(changes).FirstOrDefault(p => p.First != p.Second)}; flips {flips}");
        }, roundsFactor: 5);

        Assert.True(outcomes.ContainsKey("refused") && outcomes.ContainsKey("read whole"), Summary(outcomes));
    }

    [Fact]
    public async Task A_backup_of_files_damaged_at_random_fails_or_restores_every_last_version()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            string backup = Path.Combine(Path.GetDirectoryName(dir)!, Path.GetFileName(dir) + ".backup");
            string restored = Path.Combine(Path.GetDirectoryName(dir)!, Path.GetFileName(dir) + ".restored");
            try
            {
                try
                {
                    await DocumentStore.BackupFilesAsync(dir, backup);
                }
                catch (Exception e) when (e is StoreCorruptedException or JournalPositionPurgedException)
                {
                    Assert.False(File.Exists(backup), $"a failed backup leaves no file; flips {flips}");
                    Count(outcomes, "refused");
                    return;
                }

                // A backup that was taken must restore: what it read, it checked.
                await DocumentStore.RestoreAsync([backup], restored);
                await using DocumentStore store = DocumentStore.Open(restored, Options());
                int failed = AssertLastVersions(store, history, $"flips {flips}");
                Assert.True(failed == 0, $"{failed} reads of the restored store failed; flips {flips}");
                Count(outcomes, "restored whole");
            }
            finally
            {
                File.Delete(backup);
                if (Directory.Exists(restored))
                {
                    Directory.Delete(restored, recursive: true);
                }
            }
        });

        Assert.True(outcomes.ContainsKey("refused") && outcomes.ContainsKey("restored whole"), Summary(outcomes));
    }

    [Fact]
    public async Task A_description_of_files_damaged_at_random_throws_or_counts_every_collection_exactly()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            StoreInfo info;
            try
            {
                info = await DocumentStore.ReadInfoAsync(dir);
            }
            catch (StoreCorruptedException)
            {
                Count(outcomes, "refused");
                return;
            }

            Count(outcomes, "described");
            Assert.Equal(history.Commits[^1].Sequence, info.LastCommittedSequence);
            var live = history.Documents.Where(d => history.Last(d) is not null)
                .GroupBy(d => d.Collection).ToDictionary(g => g.Key, g => (long)g.Count());
            Assert.True(
                live.OrderBy(p => p.Key, StringComparer.Ordinal).SequenceEqual(info.Collections
                    .Where(c => c.Documents > 0).Select(c => KeyValuePair.Create(c.Name, c.Documents))),
                $"counts {string.Join(", ", info.Collections)} where {string.Join(", ", live)} are live; " +
                $"flips {flips}");
        });

        Assert.True(outcomes.ContainsKey("refused") && outcomes.ContainsKey("described"), Summary(outcomes));
    }

    [Fact]
    public async Task A_verify_that_calls_damaged_files_healthy_leaves_a_store_that_opens_and_reads_them_whole()
    {
        var outcomes = new Dictionary<string, int>();
        await ForEachDamagedStoreAsync(async (dir, history, flips) =>
        {
            VerifyResult fromFiles = await DocumentStore.VerifyFilesAsync(dir);
            string context = $"flips {flips}; verify of the files: " + string.Join(" | ", fromFiles.Problems);
            DocumentStore store;
            try
            {
                store = DocumentStore.Open(dir, Options());
            }
            catch (StoreCorruptedException e)
            {
                Assert.False(fromFiles.IsHealthy, $"the files were called healthy, the open refused: {e.Message}; "
                    + context);
                Count(outcomes, "refused, reported");
                return;
            }

            await using (store)
            {
                int failed = AssertLastVersions(store, history, context);
                Assert.True(failed == 0 || !fromFiles.IsHealthy,
                    $"the files were called healthy, {failed} reads failed; {context}");

                // The store's own scrub of what it opened agrees with the scrub of the files on what the open kept.
                VerifyResult inStore = await store.VerifyAsync();
                Assert.True(failed == 0 || !inStore.IsHealthy,
                    $"the open store's scrub called it healthy, {failed} reads failed; {context}");
                Count(outcomes, (fromFiles.IsHealthy ? "healthy" : "reported")
                    + (failed == 0 ? ", opened whole" : ", damaged pages"));
            }
        });

        Assert.True(outcomes.ContainsKey("healthy, opened whole") && outcomes.ContainsKey("refused, reported"),
            Summary(outcomes));
    }

    /// <summary>Reads every document the history wrote and asserts each read gives its last version (none where it
    /// was deleted); returns how many reads failed with <see cref="StoreCorruptedException"/> (a document in a damaged
    /// page fails alone).</summary>
    private static int AssertLastVersions(DocumentStore store, History history, string context)
    {
        int failed = 0;
        foreach ((string collection, string id) key in history.Documents)
        {
            StoredDocument? document;
            try
            {
                document = store.Get(key.collection, key.id);
            }
            catch (StoreCorruptedException)
            {
                failed++;
                continue;
            }

            (int, long)? actual = document is { } found
                ? (DamagedPageTests.JsonValue(found)!.Value, found.Version) : null;
            Assert.True(actual == history.Last(key),
                $"{key}: {actual} where {history.Last(key)} was last written; {context}");
        }

        return failed;
    }

    /// <summary>Runs <paramref name="check"/> on each round's damaged store (<paramref name="roundsFactor"/> times the
    /// rounds asked): its folder, what was written, and the flips (file and offset each).</summary>
    private async Task ForEachDamagedStoreAsync(Func<string, History, string, Task> check, int roundsFactor = 1)
    {
        int rounds = roundsFactor * (int.TryParse(Environment.GetEnvironmentVariable("FOLIO_DAMAGE_ROUNDS"),
            out int asked) ? asked : 24);
        int seed = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_DAMAGE_SEED"), out int given)
            ? given : 20261130;
        var random = new Random(seed);
        for (int round = 0; round < rounds; round++)
        {
            using var dir = new TempDirectory();
            History history = await WriteHistoryAsync(dir.Path, random);
            string flips = Damage(dir.Path, random);
            try
            {
                await check(dir.Path, history, flips);
            }
            catch (Exception e) when (e is not Xunit.Sdk.XunitException)
            {
                throw new InvalidOperationException($"round {round} of seed {seed}, flips {flips}", e);
            }
        }

        output.WriteLine($"{rounds} rounds from seed {seed}");
    }

    /// <summary>400 commits over 250 ids in two collections (a tenth of them deletes), a checkpoint every 130 (half of
    /// them a compaction, which also rewrites sparse chunks and moves the file's last chunks into free space), closed
    /// without a last one.</summary>
    private static async Task<History> WriteHistoryAsync(string folder, Random random)
    {
        var history = new History();
        await using DocumentStore store = DocumentStore.Open(folder, Options());
        for (int i = 0; i < 400; i++)
        {
            (string Collection, string Id) key = (random.Next(10) < 7 ? "items" : "others",
                $"item-{random.Next(250):D4}");
            if (random.Next(10) == 0)
            {
                history.Delete(key, await store.DeleteAsync(key.Collection, key.Id));
            }
            else
            {
                history.Put(key, i, await store.PutAsync(key.Collection, key.Id, Json(i)));
            }

            if (i % 130 == 129)
            {
                if (random.Next(2) == 0)
                {
                    await store.CompactAsync();
                }
                else
                {
                    await store.CheckpointAsync();
                }
            }
        }

        return history;
    }

    /// <summary>Flips 1 to 3 bits: half in a journal segment's records, the rest anywhere in any file.</summary>
    private static string Damage(string folder, Random random)
    {
        string[] files = Directory.GetFiles(folder, "*", SearchOption.AllDirectories)
            .Where(f => !f.EndsWith(".lock", StringComparison.Ordinal) && new FileInfo(f).Length > 0).ToArray();
        string[] segments = files.Where(f => f.EndsWith(".journal", StringComparison.Ordinal)).ToArray();
        var flips = new List<string>();
        for (int flip = random.Next(1, 4); flip > 0; flip--)
        {
            string file = random.Next(2) == 0 ? segments[random.Next(segments.Length)]
                : files[random.Next(files.Length)];
            long length = segments.Contains(file) && random.Next(4) > 0 ? RecordsEnd(file)
                : new FileInfo(file).Length;
            long offset = random.NextInt64(length);
            FileDamage.FlipByte(file, offset, (byte)(1 << random.Next(8)));
            flips.Add($"{Path.GetFileName(file)}@{offset}");
        }

        return string.Join(", ", flips);
    }

    /// <summary>Where the records of a segment end (its header's size when it holds none).</summary>
    private static long RecordsEnd(string segment)
        => JournalTestExtensions.SegmentRecords(segment) is { Count: > 0 } records
            ? records[^1].Offset + records[^1].Header.Length
            : JournalFormat.SegmentHeaderSize;

    private static DocumentStoreOptions Options() => TestStoreOptions.KeepingJournal(TestStoreOptions.TinySegments());

    private string Summary(Dictionary<string, int> outcomes)
    {
        string summary = string.Join(", ", outcomes.OrderBy(o => o.Key, StringComparer.Ordinal)
            .Select(o => $"{o.Key} {o.Value}"));
        output.WriteLine(summary);
        return summary;
    }

    private static void Count(Dictionary<string, int> outcomes, string outcome)
        => outcomes[outcome] = outcomes.GetValueOrDefault(outcome) + 1;

    private static int ValueOf(ReadOnlyMemory<byte> json)
        => System.Text.Json.JsonDocument.Parse(json).RootElement.GetProperty("Value").GetInt32();

    private static byte[] Json(int value)
        => Encoding.UTF8.GetBytes($"{{\"Value\":{value},\"Pad\":\"{new string('p', 200 + Math.Abs(value) % 50)}\"}}");

    /// <summary>Every version each document (collection, id) was given, its last state (null: deleted), and every
    /// commit in order (a delete's value null).</summary>
    private sealed class History
    {
        private readonly Dictionary<(string, string), HashSet<(int, long)>> _written = [];
        private readonly Dictionary<(string, string), (int, long)?> _last = [];

        public IEnumerable<(string Collection, string Id)> Documents => _last.Keys;

        public List<(long Sequence, string Collection, string Id, int? Value)> Commits { get; } = [];

        public void Put((string Collection, string Id) document, int value, long sequence)
        {
            (_written.TryGetValue(document, out HashSet<(int, long)>? versions) ? versions : _written[document] = [])
                .Add((value, sequence));
            _last[document] = (value, sequence);
            Commits.Add((sequence, document.Collection, document.Id, value));
        }

        public void Delete((string Collection, string Id) document, long sequence)
        {
            _last[document] = null;
            Commits.Add((sequence, document.Collection, document.Id, null));
        }

        public bool WasWritten((string, string) document, int value, long sequence)
            => _written.TryGetValue(document, out HashSet<(int, long)>? versions)
                && versions.Contains((value, sequence));

        public (int, long)? Last((string, string) document) => _last.GetValueOrDefault(document);
    }
}
