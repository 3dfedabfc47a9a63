using System.Buffers.Binary;
using System.Security.Cryptography;
using System.Text;
using Folio.Journal;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A store's files carry the id of the store that wrote them (every journal segment's header, every checkpoint's
/// header slot), so files of two stores mixed in one folder (a segment or a data file copied from another store's
/// folder, a restore by hand gone wrong) are refused at open, instead of opening as one store with the other's
/// documents, or a mix of both. Files written before stores had ids carry none and match any.
/// </summary>
public sealed class StoreIdentityTests
{
    [Fact]
    public async Task A_journal_segment_copied_from_another_store_is_refused_at_open_and_nothing_is_changed()
    {
        using var dir = new TempDirectory();
        string first = Path.Combine(dir.Path, "first");
        string second = Path.Combine(dir.Path, "second");
        await WriteAsync(first, "first", 100, checkpointOnClose: false);
        await WriteAsync(second, "second", 120, checkpointOnClose: false);
        string segment = Path.Combine(JournalFormat.SegmentFileName(1));
        File.Copy(Path.Combine(second, "journal", segment), Path.Combine(first, "journal", segment), overwrite: true);
        Dictionary<string, string> before = Fingerprint(first);

        var error = Assert.Throws<JournalCorruptedException>(
            () => DocumentStore.Open(first, TestStoreOptions.SmallSegments()));
        Assert.Contains("belongs to another store", error.Message, StringComparison.Ordinal);
        Assert.Contains(segment, error.Message, StringComparison.Ordinal);
        Assert.Equal(before, Fingerprint(first));

        VerifyResult verified = await DocumentStore.VerifyFilesAsync(first);
        Assert.Contains(verified.Problems, p => p.Contains("another store", StringComparison.Ordinal));

        // Each store's own files still open as that store.
        await using DocumentStore other = DocumentStore.Open(second, TestStoreOptions.SmallSegments());
        Assert.Equal(120, other.Scan("c").Count());
        Assert.True((await DocumentStore.VerifyFilesAsync(second)).IsHealthy);
    }

    [Fact]
    public async Task A_later_segment_of_another_store_is_refused_by_the_open_and_by_readers_of_the_files()
    {
        using var dir = new TempDirectory();
        string first = Path.Combine(dir.Path, "first");
        string second = Path.Combine(dir.Path, "second");
        await WriteAsync(first, "first", 3000, checkpointOnClose: false, padding: 600);
        await WriteAsync(second, "other", 3000, checkpointOnClose: false, padding: 600); // same sizes
        string[] segments = Directory.GetFiles(Path.Combine(first, "journal"), "*.journal").Order().ToArray();
        Assert.True(segments.Length >= 2);
        string replaced = Path.GetFileName(segments[1]);
        string copied = Path.Combine(second, "journal", replaced);
        Assert.True(File.Exists(copied)); // the same sizes rotate at the same sequences
        File.Copy(copied, segments[1], overwrite: true);

        var error = Assert.Throws<JournalCorruptedException>(
            () => DocumentStore.Open(first, TestStoreOptions.SmallSegments()));
        Assert.Contains("belongs to another store", error.Message, StringComparison.Ordinal);

        // A reader of the files (the change feed of another process, export, backup) stops at that segment.
        var read = await Assert.ThrowsAsync<JournalCorruptedException>(async () =>
        {
            await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(first, 1, follow: false))
            {
                Assert.Contains("\"first\"", Encoding.UTF8.GetString(change.Json.Span), StringComparison.Ordinal);
            }
        });
        Assert.Contains(replaced, read.Message, StringComparison.Ordinal);
        Contains("another store", await DocumentStore.VerifyFilesAsync(first));
    }

    [Fact]
    public async Task A_data_file_copied_from_another_store_is_refused_at_open_and_nothing_is_changed()
    {
        using var dir = new TempDirectory();
        string first = Path.Combine(dir.Path, "first");
        string second = Path.Combine(dir.Path, "second");
        await WriteAsync(first, "first", 100, checkpointOnClose: true);
        await WriteAsync(second, "second", 100, checkpointOnClose: true);
        File.Copy(Path.Combine(second, "data.folio"), Path.Combine(first, "data.folio"), overwrite: true);
        Dictionary<string, string> before = Fingerprint(first);

        var error = Assert.Throws<JournalCorruptedException>(
            () => DocumentStore.Open(first, TestStoreOptions.SmallSegments()));
        Assert.Contains("belongs to another store", error.Message, StringComparison.Ordinal);
        Assert.Contains("data.folio", error.Message, StringComparison.Ordinal);
        Assert.Equal(before, Fingerprint(first));
        Assert.False((await DocumentStore.VerifyFilesAsync(first)).IsHealthy);
    }

    [Fact]
    public async Task Files_written_before_stores_had_ids_open_and_the_next_checkpoint_names_the_store()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        await WriteAsync(folder, "old", 200, checkpointOnClose: true);
        Guid id = SegmentIds(folder).Distinct().Single(); // one store: every segment carries its id
        Assert.NotEqual(Guid.Empty, id);
        Assert.Equal(id, HeaderIds(folder).Distinct().Single());
        Assert.Equal(id, (await DocumentStore.ReadInfoAsync(folder)).StoreId);

        // As an earlier Folio wrote them: no id in the segments' headers or the data file's slots.
        ClearIds(folder);
        Assert.Equal([Guid.Empty], SegmentIds(folder).Distinct());
        Assert.Equal([Guid.Empty], HeaderIds(folder).Distinct());

        Assert.Equal(Guid.Empty, (await DocumentStore.ReadInfoAsync(folder)).StoreId);
        await using (DocumentStore store = DocumentStore.Open(folder, TestStoreOptions.SmallSegments()))
        {
            Assert.Equal(200, store.Scan("c").Count());
            Assert.NotEqual(Guid.Empty, store.GetInfo().StoreId);
            await store.PutAsync("c", "new", "{}"u8.ToArray());
            await store.CheckpointAsync();
        }

        // The store took an id at the open: the checkpoint carries it, and so does every segment written since.
        Guid taken = HeaderIds(folder).Where(h => h != Guid.Empty).Distinct().Single();
        Assert.NotEqual(id, taken);
        Assert.Equal(taken, (await DocumentStore.ReadInfoAsync(folder)).StoreId);
        Assert.All(SegmentIds(folder), s => Assert.True(s == Guid.Empty || s == taken));
        await using (DocumentStore reopened = DocumentStore.Open(folder, TestStoreOptions.SmallSegments()))
        {
            Assert.Equal(201, reopened.Scan("c").Count());
        }

        Assert.True((await DocumentStore.VerifyFilesAsync(folder)).IsHealthy);
    }

    [Fact]
    public async Task A_restored_store_and_its_source_are_two_stores_and_each_opens()
    {
        using var dir = new TempDirectory();
        string source = Path.Combine(dir.Path, "source");
        await WriteAsync(source, "source", 50, checkpointOnClose: true);
        string backup = Path.Combine(dir.Path, "full.bak");
        await using (DocumentStore store = DocumentStore.Open(source, TestStoreOptions.SmallSegments()))
        {
            await store.BackupAsync(backup);
        }

        string restored = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync(backup, restored);
        await using (DocumentStore store = DocumentStore.Open(restored, TestStoreOptions.SmallSegments()))
        {
            Assert.Equal(50, store.Scan("c").Count());
            await store.PutAsync("c", "after", "{}"u8.ToArray());
            await store.CheckpointAsync();
        }

        Guid restoredId = SegmentIds(restored).Distinct().Single();
        Assert.NotEqual(SegmentIds(source).Distinct().Single(), restoredId);
        Assert.Contains(restoredId, HeaderIds(restored));
    }

    private static async Task WriteAsync(string folder, string tag, int documents, bool checkpointOnClose,
        int padding = 0)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointOnClose = checkpointOnClose;
        options.CheckpointThreshold = 64L << 20; // no checkpoint (and no purge) while writing
        await using DocumentStore store = DocumentStore.Open(folder, options);
        string pad = new('p', padding);
        var batch = new CommitBatch();
        for (int i = 0; i < documents; i++)
        {
            batch.Put("c", $"d/{i}", Encoding.UTF8.GetBytes($"{{\"store\":\"{tag}\",\"i\":{i},\"p\":\"{pad}\"}}"));
            if (batch.Count == 100 || i == documents - 1)
            {
                await store.WriteAsync(batch);
                batch = new CommitBatch();
            }
        }
    }

    private static void Contains(string verifiedProblem, VerifyResult verified)
        => Assert.Contains(verified.Problems, p => p.Contains(verifiedProblem, StringComparison.Ordinal));

    /// <summary>A hash of every file of the store by path, but its lock files and the temporary files a writer
    /// leaves (an open deletes those first, whatever it finds next).</summary>
    private static Dictionary<string, string> Fingerprint(string folder)
    {
        var files = new Dictionary<string, string>(StringComparer.Ordinal);
        foreach (string file in Directory.EnumerateFiles(folder, "*", SearchOption.AllDirectories))
        {
            if (!file.EndsWith(".lock", StringComparison.Ordinal) && !file.EndsWith(".tmp", StringComparison.Ordinal))
            {
                files[Path.GetRelativePath(folder, file)] =
                    Convert.ToHexString(SHA256.HashData(File.ReadAllBytes(file)));
            }
        }

        return files;
    }

    private static List<Guid> SegmentIds(string folder)
    {
        var ids = new List<Guid>();
        foreach (string file in Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal"))
        {
            byte[] header = new byte[JournalFormat.SegmentHeaderSize];
            using (FileStream stream = File.OpenRead(file))
            {
                stream.ReadExactly(header);
            }

            ids.Add(JournalFormat.ReadSegmentStoreId(header));
        }

        return ids;
    }

    /// <summary>The store ids of the data file's written header slots.</summary>
    private static List<Guid> HeaderIds(string folder)
    {
        byte[] bytes = File.ReadAllBytes(Path.Combine(folder, "data.folio"));
        var ids = new List<Guid>();
        for (int slot = 0; slot < 2 && (slot + 1) * 4096 <= bytes.Length; slot++)
        {
            if (BinaryPrimitives.ReadUInt64LittleEndian(bytes.AsSpan(slot * 4096)) != 0)
            {
                ids.Add(new Guid(bytes.AsSpan((slot * 4096) + 60, 16)));
            }
        }

        return ids;
    }

    /// <summary>Zeroes the store id in every segment header (checksum recomputed) and data file slot (bytes 60 to
    /// 80), and writes the journal's durable mark as version 1 (36 bytes, no id), as files written before stores had
    /// ids have them.</summary>
    private static void ClearIds(string folder)
    {
        string markPath = Path.Combine(folder, "journal", JournalDurableMark.FileName);
        byte[] mark = File.ReadAllBytes(markPath);
        Assert.Equal(52, mark.Length);
        byte[] legacy = mark[..36];
        BinaryPrimitives.WriteUInt32LittleEndian(legacy.AsSpan(4), 1);
        BinaryPrimitives.WriteUInt32LittleEndian(legacy.AsSpan(32), Crc32C.Compute(legacy.AsSpan(0, 32)));
        File.WriteAllBytes(markPath, legacy);

        foreach (string file in Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal"))
        {
            using FileStream stream = File.Open(file, FileMode.Open, FileAccess.ReadWrite);
            byte[] header = new byte[JournalFormat.SegmentHeaderSize];
            stream.ReadExactly(header);
            header.AsSpan(JournalFormat.SegmentStoreIdOffset, 16).Clear();
            BinaryPrimitives.WriteUInt32LittleEndian(header.AsSpan(JournalFormat.SegmentHeaderCrcOffset),
                Crc32C.Compute(header.AsSpan(0, JournalFormat.SegmentHeaderCrcOffset)));
            stream.Position = 0;
            stream.Write(header);
        }

        using FileStream data = File.Open(Path.Combine(folder, "data.folio"), FileMode.Open, FileAccess.ReadWrite);
        for (int slot = 0; slot < 2; slot++)
        {
            data.Position = (slot * 4096) + 60;
            data.Write(new byte[20]);
        }
    }
}
