using System.Text;
using System.Text.Json;
using Folio.Journal;
using Folio.Pages;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// A salvage (<see cref="DocumentStore.SalvageFilesAsync"/>) of a store whose newest checkpoint cannot be read: its
/// header slot is damaged (so the data file's other slot, the checkpoint before, is the newest valid one), or its
/// chunk's metadata is damaged (so it cannot be mounted). The salvage reads the checkpoint before it and the journal
/// after that; the commits the journal purged after the damaged checkpoint are in no file, and are named as one range.
/// When the journal still holds every commit after the checkpoint before, nothing is lost and nothing is reported.
/// And a salvage of files damaged at random, anywhere, against a model of what was written.
/// </summary>
public sealed class CheckpointSalvageTests(ITestOutputHelper output)
{
    public enum Damage
    {
        NewestHeaderSlot,
        NewestChunkMetadata,
    }

    [Theory]
    [InlineData(Damage.NewestHeaderSlot, true)]
    [InlineData(Damage.NewestChunkMetadata, true)]
    [InlineData(Damage.NewestChunkMetadata, false)]
    public async Task A_salvage_reads_the_checkpoint_before_a_damaged_newest_one_and_names_the_commits_purged_since(
        Damage damage, bool purged)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = purged ? TestStoreOptions.TinySegments() : TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 1L << 40;
        options.CheckpointOnClose = false;
        var history = new List<(long Sequence, string Id, int Value)>();
        long first;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            for (int round = 0; round < 3; round++)
            {
                // Round 0: new documents; rounds 1 and 2 overwrite some and add others.
                for (int i = 0; i < 150; i++)
                {
                    string id = $"item-{(round == 0 ? i : (i * 7 + round) % 300):D4}";
                    int value = round * 1000 + i;
                    history.Add((await store.PutAsync("items", id, Json(value)), id, value));
                }

                if (round < 2)
                {
                    await store.CheckpointAsync();
                }
            }

            first = store.Changes.FirstSequence;
        }

        string dataFile = Path.Combine(dir.Path, "data.folio");
        (DataFileHeader newest, DataFileHeader older) = Headers(dataFile);
        Assert.Equal(newest.Generation - 1, older.Generation);
        long checkpoint = older.CheckpointSequence; // what the salvage falls back to
        Assert.Equal(purged, first > checkpoint + 1);
        if (damage == Damage.NewestHeaderSlot)
        {
            FileDamage.FlipByte(dataFile, DataFileHeader.SlotOffset(newest.Generation) + 20, 0x01);
        }
        else
        {
            FileDamage.FlipByte(dataFile, newest.ChunkOffset + 9, 0x01); // the chunk's sequence, under its checksum
        }

        if (purged)
        {
            Assert.ThrowsAny<StoreCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
        }

        var ranges = new List<DamagedRange>();
        var salvaged = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, ranges.Add))
        {
            salvaged.Add(document.Id, (Value(document.Json), document.Version));
        }

        (long From, long To) lost = purged ? (checkpoint + 1, first - 1) : (0, -1);
        if (purged)
        {
            DamagedRange range = Assert.Single(ranges);
            Assert.Null(range.Collection);
            Assert.Equal(lost, (range.FromSequence, range.ToSequence));
            Assert.Contains("data.folio", range.Error.Message, StringComparison.Ordinal);
        }
        else
        {
            Assert.Empty(ranges);
        }

        var expected = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        foreach ((long sequence, string id, int value) in history)
        {
            if (sequence < lost.From || sequence > lost.To)
            {
                expected[id] = (value, sequence);
            }
        }

        Assert.Equal(expected, salvaged);
    }

    [Fact]
    public async Task A_salvage_whose_newest_and_previous_checkpoints_are_both_unreadable_reports_the_newest_damage()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            await store.PutAsync("items", "a", Json(1));
            await store.CheckpointAsync();
            await store.PutAsync("items", "b", Json(2));
            await store.CheckpointAsync();
        }

        string dataFile = Path.Combine(dir.Path, "data.folio");
        (DataFileHeader newest, DataFileHeader older) = Headers(dataFile);
        FileDamage.FlipByte(dataFile, newest.ChunkOffset + 9, 0x01);
        FileDamage.FlipByte(dataFile, older.ChunkOffset + 9, 0x01);

        var error = await Assert.ThrowsAnyAsync<StoreCorruptedException>(async () =>
        {
            await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, _ => { }))
            {
            }
        });
        Assert.Contains($"chunk {newest.ChunkId}", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_salvage_of_files_damaged_at_random_yields_only_written_versions_and_names_every_loss()
    {
        // FOLIO_SALVAGE_ROUNDS and FOLIO_SALVAGE_SEED run it longer, or from elsewhere (README, "Longer runs").
        int rounds = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_SALVAGE_ROUNDS"), out int asked)
            ? asked : 24;
        int seed = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_SALVAGE_SEED"), out int given)
            ? given : 20261130;
        var random = new Random(seed);
        int checkedIds = 0;
        var outcomes = new Dictionary<string, int>();
        for (int round = 0; round < rounds; round++)
        {
            using var dir = new TempDirectory();
            DocumentStoreOptions options = TestStoreOptions.TinySegments();
            options.CheckpointInterval = Timeout.InfiniteTimeSpan;
            options.CheckpointThreshold = 1L << 40;
            options.CheckpointOnClose = false;
            var written = new Dictionary<string, HashSet<(int, long)>>(StringComparer.Ordinal);
            var model = new Dictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
            await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
            {
                for (int i = 0; i < 400; i++)
                {
                    string id = $"item-{random.Next(250):D4}";
                    if (random.Next(10) == 0)
                    {
                        await store.DeleteAsync("items", id);
                        model.Remove(id);
                    }
                    else
                    {
                        long sequence = await store.PutAsync("items", id, Json(i));
                        model[id] = (i, sequence);
                        (written.TryGetValue(id, out HashSet<(int, long)>? versions) ? versions
                            : written[id] = []).Add((i, sequence));
                    }

                    if (i % 130 == 129)
                    {
                        await store.CheckpointAsync();
                    }
                }
            }

            string[] files = Directory.GetFiles(dir.Path, "*", SearchOption.AllDirectories)
                .Where(f => !f.EndsWith(".lock", StringComparison.Ordinal) && new FileInfo(f).Length > 0).ToArray();
            string[] segments = files.Where(f => f.EndsWith(".journal", StringComparison.Ordinal)).ToArray();
            var flips = new List<string>();
            for (int flip = random.Next(1, 4); flip > 0; flip--)
            {
                // Half the flips land in a segment's records, the rest anywhere in any file.
                string file = random.Next(2) == 0 ? segments[random.Next(segments.Length)]
                    : files[random.Next(files.Length)];
                long length = segments.Contains(file) && random.Next(4) > 0 ? RecordsEnd(file)
                    : new FileInfo(file).Length;
                long offset = random.NextInt64(length);
                FileDamage.FlipByte(file, offset, (byte)(1 << random.Next(8)));
                flips.Add($"{Path.GetFileName(file)}@{offset}");
            }

            var ranges = new List<DamagedRange>();
            var salvaged = new Dictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
            try
            {
                await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, ranges.Add))
                {
                    salvaged.Add(document.Id, (Value(document.Json), document.Version));
                }
            }
            catch (StoreCorruptedException e) when (e is not JournalCorruptedException)
            {
                // Only when neither checkpoint of the data file can be read (or a header names a chunk past the
                // file's end): a salvage cannot tell which collections exist without one.
                Count(outcomes, "refused");
                continue;
            }

            Count(outcomes, ranges.Count == 0 ? "nothing lost"
                : string.Join("+", ranges.Select(r => r.Collection is null ? "commits" : "documents").Distinct()));

            string context = $"round {round}, flips {string.Join(", ", flips)}, ranges "
                + string.Join("; ", ranges.Select(r => $"{r.Collection}:{r.FromId}-{r.ToId}:{r.FromSequence}-"
                + $"{r.ToSequence}"));
            bool commitsLost = ranges.Any(r => r.Collection is null);
            foreach ((string id, (int value, long sequence)) in salvaged)
            {
                Assert.True(written.TryGetValue(id, out HashSet<(int, long)>? versions)
                    && versions.Contains((value, sequence)), $"{id} {value}@{sequence} was written; {context}");
            }

            foreach (string id in written.Keys)
            {
                bool inDamagedRange = ranges.Any(r => r.Collection is not null
                    && (r.FromId is null || string.CompareOrdinal(id, r.FromId) >= 0)
                    && (r.ToId is null || string.CompareOrdinal(id, r.ToId) < 0));
                if (commitsLost)
                {
                    continue; // any document may be older, missing or back: only what was written is checked
                }

                (int, long)? expected = model.TryGetValue(id, out (int, long) last) ? last : null;
                (int, long)? actual = salvaged.TryGetValue(id, out (int, long) got) ? got : null;
                Assert.True(actual == expected || (inDamagedRange && actual is null),
                    $"{id}: {actual} where {expected} was last written; {context}");
                checkedIds++;
            }
        }

        string summary = string.Join(", ", outcomes.Select(o => $"{o.Key} {o.Value}"));
        output.WriteLine($"{rounds} rounds from seed {seed}: {summary}");
        Assert.True(checkedIds > 1000, $"rounds whose every document was checked ({checkedIds} ids; {summary})");
        Assert.True(outcomes.GetValueOrDefault("commits") + outcomes.GetValueOrDefault("commits+documents")
            + outcomes.GetValueOrDefault("documents+commits") > 0, $"a round lost commits ({summary})");
    }

    /// <summary>Where the records of a segment end (its header's size when it holds none).</summary>
    private static long RecordsEnd(string segment)
    {
        byte[] bytes = File.ReadAllBytes(segment);
        long at = JournalFormat.SegmentHeaderSize;
        while (at < bytes.Length
            && JournalFormat.TryReadRecordHeader(bytes.AsSpan((int)at), out JournalFormat.RecordHeader header))
        {
            at += header.Length;
        }

        return at;
    }

    private static void Count(Dictionary<string, int> outcomes, string outcome)
        => outcomes[outcome] = outcomes.GetValueOrDefault(outcome) + 1;

    /// <summary>The two valid header slots of the data file, newest first.</summary>
    private static (DataFileHeader Newest, DataFileHeader Older) Headers(string dataFile)
    {
        byte[] bytes = File.ReadAllBytes(dataFile);
        var headers = new List<DataFileHeader>();
        for (int slot = 0; slot < DataFileHeader.SlotCount; slot++)
        {
            int offset = slot * DataFileHeader.SlotSize;
            if (DataFileHeader.TryRead(bytes.AsSpan(offset, DataFileHeader.SlotSize), dataFile, offset) is { } header)
            {
                headers.Add(header);
            }
        }

        Assert.Equal(2, headers.Count);
        headers.Sort((a, b) => b.Generation.CompareTo(a.Generation));
        return (headers[0], headers[1]);
    }

    private static byte[] Json(int value)
        => Encoding.UTF8.GetBytes($"{{\"value\":{value},\"pad\":\"{new string('p', 200 + value % 50)}\"}}");

    private static int Value(ReadOnlyMemory<byte> json)
    {
        using JsonDocument document = JsonDocument.Parse(json);
        return document.RootElement.GetProperty("value").GetInt32();
    }
}
