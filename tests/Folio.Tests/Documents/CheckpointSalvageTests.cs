using System.Text;
using Folio.Pages;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A salvage (<see cref="DocumentStore.SalvageFilesAsync"/>) of a store whose newest checkpoint cannot be read: its
/// header slot is damaged (so the data file's other slot, the checkpoint before, is the newest valid one), or its
/// chunk's metadata is damaged (so it cannot be mounted). The salvage reads the checkpoint before it and the journal
/// after that; the commits the journal purged after the damaged checkpoint are in no file, and are named as one range.
/// When the journal still holds every commit after the checkpoint before, nothing is lost and nothing is reported. When
/// neither checkpoint can be read, the journal alone is read, and the commits its purges removed are named.
/// </summary>
public sealed class CheckpointSalvageTests
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
        DocumentStoreOptions options = TestStoreOptions.KeepingJournal(
            purged ? TestStoreOptions.TinySegments() : TestStoreOptions.SmallSegments());
        (List<(long Sequence, string Id, int Value)> history, long first) = await WriteHistoryAsync(dir.Path, options);
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

        await AssertSalvageAsync(dir.Path, history, purged ? (checkpoint + 1, first - 1) : null, "data.folio");
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_salvage_whose_newest_and_previous_checkpoints_are_both_unreadable_reads_the_journal_alone(
        bool purged)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.KeepingJournal(
            purged ? TestStoreOptions.TinySegments() : TestStoreOptions.SmallSegments());
        (List<(long Sequence, string Id, int Value)> history, long first) = await WriteHistoryAsync(dir.Path, options);
        Assert.Equal(purged, first > 1);
        string dataFile = Path.Combine(dir.Path, "data.folio");
        (DataFileHeader newest, DataFileHeader older) = Headers(dataFile);
        FileDamage.FlipByte(dataFile, newest.ChunkOffset + 9, 0x01); // each chunk's sequence, under its checksum
        FileDamage.FlipByte(dataFile, older.ChunkOffset + 9, 0x01);
        Assert.ThrowsAny<StoreCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());

        // The journal holds every commit from the first it keeps: those before it are lost, named with the newest
        // checkpoint's damage; without a purge, nothing is lost.
        await AssertSalvageAsync(dir.Path, history, purged ? (1, first - 1) : null, $"chunk {newest.ChunkId}");
    }

    /// <summary>450 puts in three rounds (round 0: new documents; rounds 1 and 2 overwrite some and add others), a
    /// checkpoint after each of the first two, closed without a last one; returns every put and the first commit the
    /// journal keeps.</summary>
    private static async Task<(List<(long Sequence, string Id, int Value)> History, long First)> WriteHistoryAsync(
        string folder, DocumentStoreOptions options)
    {
        var history = new List<(long Sequence, string Id, int Value)>();
        await using DocumentStore store = DocumentStore.Open(folder, options);
        for (int round = 0; round < 3; round++)
        {
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

        return (history, store.Changes.FirstSequence);
    }

    /// <summary>Salvages <paramref name="folder"/>: it must name exactly the commits <paramref name="lost"/> (one
    /// range, no collection, its error naming <paramref name="damageNamed"/>; nothing when null) and give the last
    /// version of every document among the other puts.</summary>
    private static async Task AssertSalvageAsync(string folder, List<(long Sequence, string Id, int Value)> history,
        (long From, long To)? lost, string damageNamed)
    {
        var ranges = new List<DamagedRange>();
        var salvaged = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(folder, ranges.Add))
        {
            salvaged.Add(document.Id, (DamagedPageTests.JsonValue(document)!.Value, document.Version));
        }

        if (lost is { } commits)
        {
            DamagedRange range = Assert.Single(ranges);
            Assert.Null(range.Collection);
            Assert.Equal(commits, (range.FromSequence, range.ToSequence));
            Assert.Contains(damageNamed, range.Error.Message, StringComparison.Ordinal);
        }
        else
        {
            Assert.Empty(ranges);
        }

        var expected = new SortedDictionary<string, (int Value, long Sequence)>(StringComparer.Ordinal);
        foreach ((long sequence, string id, int value) in history)
        {
            if (lost is not { } gone || sequence < gone.From || sequence > gone.To)
            {
                expected[id] = (value, sequence);
            }
        }

        Assert.Equal(expected, salvaged);
    }

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
        => Encoding.UTF8.GetBytes($"{{\"Value\":{value},\"Pad\":\"{new string('p', 200 + value % 50)}\"}}");
}
