using System.Text;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A salvage (<see cref="DocumentStore.SalvageFilesAsync"/>) of a store whose journal after its checkpoint is
/// damaged: a record that fails its checksum, a record whose length field is garbage (so the next record must be
/// found by its magic), a damaged segment header, a missing segment. The store refuses to open and a plain scan
/// throws; the salvage reports exactly the commits the damage took and yields every document as the commits it could
/// read left it, compared with a model of the history that leaves out the reported commits.
/// </summary>
public sealed class JournalSalvageTests
{
    public enum Damage
    {
        RecordChecksum,
        RecordLength,
        SegmentHeader,
        MissingSegment,
        NewestSegmentRecord,
        NewestSegmentHeader,
    }

    [Theory]
    [InlineData(Damage.RecordChecksum)]
    [InlineData(Damage.RecordLength)]
    [InlineData(Damage.SegmentHeader)]
    [InlineData(Damage.MissingSegment)]
    [InlineData(Damage.NewestSegmentRecord)]
    [InlineData(Damage.NewestSegmentHeader)]
    public async Task A_salvage_reads_past_journal_damage_and_names_exactly_the_commits_it_took(Damage damage)
    {
        using var dir = new TempDirectory();
        (List<Commit> history, long checkpoint) = await WriteHistoryAsync(dir.Path);
        List<Segment> segments = Segments(dir.Path, checkpoint);
        (long from, long to) = Inflict(damage, segments);
        Assert.True(from > checkpoint && to >= from, $"damage after the checkpoint ({from} to {to}, C {checkpoint})");

        Assert.ThrowsAny<StoreCorruptedException>(() => DocumentStore.Open(dir.Path, Options()).Dispose());
        await Assert.ThrowsAnyAsync<StoreCorruptedException>(async () =>
        {
            await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(dir.Path))
            {
            }
        });

        var ranges = new List<DamagedRange>();
        var salvaged = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, ranges.Add))
        {
            Assert.DoesNotContain(ranges, r => r.Collection is not null); // the data file is whole
            salvaged.Add(document.Id, (DamagedPageTests.JsonValue(document)!.Value, document.Version));
        }

        DamagedRange lost = Assert.Single(ranges);
        Assert.Null(lost.Collection);
        Assert.Null(lost.FromId);
        Assert.Null(lost.ToId);
        Assert.Equal((from, to), (lost.FromSequence, lost.ToSequence));
        JournalCorruptedException error = Assert.IsType<JournalCorruptedException>(lost.Error);
        Assert.Contains(".journal", error.Message, StringComparison.Ordinal);

        // The model: every commit but the lost ones, in order.
        var expected = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        foreach (Commit commit in history)
        {
            if (commit.Sequence >= from && commit.Sequence <= to)
            {
                continue;
            }

            if (commit.Value is int value)
            {
                expected[commit.Id] = (value, commit.Sequence);
            }
            else
            {
                expected.Remove(commit.Id);
            }
        }

        Assert.Equal(expected, salvaged);
    }

    [Fact]
    public async Task A_salvage_of_a_whole_journal_reports_nothing_and_matches_a_plain_scan()
    {
        using var dir = new TempDirectory();
        await WriteHistoryAsync(dir.Path);
        var ranges = new List<DamagedRange>();
        var salvaged = new List<string>();
        await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, ranges.Add))
        {
            salvaged.Add($"{document.Id}={Encoding.UTF8.GetString(document.Json.Span)}@{document.Version}");
        }

        var scanned = new List<string>();
        await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(dir.Path))
        {
            scanned.Add($"{document.Id}={Encoding.UTF8.GetString(document.Json.Span)}@{document.Version}");
        }

        Assert.Empty(ranges);
        Assert.Equal(scanned, salvaged);
        Assert.NotEmpty(salvaged);
    }

    /// <summary>One commit of the history: a put of <see cref="Value"/>, or a delete (null).</summary>
    public sealed record Commit(long Sequence, string Id, int? Value);

    /// <summary>A segment file after the checkpoint: its first sequence, path and records.</summary>
    private sealed record Segment(long First, string Path, List<Record> Records);

    private sealed record Record(long Offset, int Length, long First, int Count);

    /// <summary>
    /// Puts 200 documents, checkpoints, then makes 900 more commits (new documents, overwrites and deletes of
    /// earlier ones, one document each) over tiny segments, and closes without a last checkpoint: the journal after
    /// the checkpoint spans many segments. Returns every commit and the checkpoint's sequence.
    /// </summary>
    private static async Task<(List<Commit> History, long Checkpoint)> WriteHistoryAsync(string folder)
    {
        var history = new List<Commit>();
        long checkpoint;
        await using (DocumentStore store = DocumentStore.Open(folder, Options()))
        {
            for (int i = 0; i < 200; i++)
            {
                history.Add(new Commit(await store.PutAsync("items", Id(i), Json(i)), Id(i), i));
            }

            await store.CheckpointAsync();
            checkpoint = store.LastCommittedSequence;
            for (int i = 200; i < 1100; i++)
            {
                if (i % 9 == 4)
                {
                    string victim = Id((i * 7) % i);
                    history.Add(new Commit(await store.DeleteAsync("items", victim), victim, null));
                }
                else
                {
                    string id = i % 3 == 0 ? Id((i * 13) % i) : Id(i);
                    history.Add(new Commit(await store.PutAsync("items", id, Json(i)), id, i));
                }
            }
        }

        return (history, checkpoint);
    }

    /// <summary>Damages the journal as <paramref name="damage"/> says; returns the commits the damage takes.</summary>
    private static (long From, long To) Inflict(Damage damage, List<Segment> segments)
    {
        Assert.True(segments.Count >= 4, $"the journal after the checkpoint spans segments ({segments.Count})");
        Segment middle = segments[segments.Count / 2];
        Segment after = segments[segments.Count / 2 + 1];
        Record record = middle.Records[middle.Records.Count / 2];
        switch (damage)
        {
            case Damage.RecordChecksum:
                FileDamage.FlipByte(middle.Path, record.Offset + record.Length - 3, 0x04);
                return (record.First, record.First + record.Count - 1);
            case Damage.RecordLength:
                FileDamage.FlipByte(middle.Path, record.Offset + 10, 0x5A); // bits 16-23 of the length
                return (record.First, record.First + record.Count - 1);
            case Damage.SegmentHeader:
                FileDamage.FlipByte(middle.Path, 20, 0x01); // the first sequence, under the header's checksum
                return (middle.First, after.First - 1);
            case Damage.MissingSegment:
                File.Delete(middle.Path);
                return (middle.First, after.First - 1);
            case Damage.NewestSegmentHeader:
                // Nothing after it says how many commits the segment held: the range runs to the end.
                FileDamage.FlipByte(segments[^1].Path, 20, 0x01);
                return (segments[^1].First, long.MaxValue);
            default:
                Segment newest = segments[^1];
                Assert.True(newest.Records.Count >= 3, "the newest segment holds records");
                Record inNewest = newest.Records[newest.Records.Count / 2];
                FileDamage.FlipByte(newest.Path, inNewest.Offset + inNewest.Length - 1, 0x80);
                return (inNewest.First, inNewest.First + inNewest.Count - 1);
        }
    }

    /// <summary>The segments holding commits after <paramref name="checkpoint"/>, oldest first, with their
    /// records.</summary>
    private static List<Segment> Segments(string folder, long checkpoint)
    {
        var segments = new List<Segment>();
        foreach (string path in Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal")
            .Order(StringComparer.Ordinal))
        {
            Assert.True(JournalFormat.TryParseSegmentFileName(Path.GetFileName(path), out long first));
            List<Record> records = JournalTestExtensions.SegmentRecords(path)
                .Select(r => new Record(r.Offset, r.Header.Length, r.Header.FirstSequence, r.Header.EntryCount))
                .ToList();

            if (records.Count > 0 && records[^1].First + records[^1].Count - 1 > checkpoint)
            {
                segments.Add(new Segment(first, path, records));
            }
        }

        return segments;
    }

    private static DocumentStoreOptions Options() => TestStoreOptions.KeepingJournal(TestStoreOptions.TinySegments());

    private static string Id(int i) => $"item-{i:D5}";

    private static byte[] Json(int value)
        => Encoding.UTF8.GetBytes($"{{\"Value\":{value},\"Pad\":\"{new string('p', 150 + value % 100)}\"}}");
}
