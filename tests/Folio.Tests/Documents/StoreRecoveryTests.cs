using System.Buffers.Binary;
using System.Text;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// What a reopened store makes of damaged or missing journal files: synced records that were damaged, a newest
/// segment file that is gone, and a store reopened with another segment size.
/// </summary>
public sealed class StoreRecoveryTests
{
    public static TheoryData<DurabilityMode, int> Modes => new()
    {
        { DurabilityMode.Buffered, 1 },
        { DurabilityMode.Durable, 2 },
        { DurabilityMode.Durable, 1 },
    };

    [Theory]
    [MemberData(nameof(Modes))]
    public async Task A_flipped_bit_in_any_synced_record_of_the_newest_segment_is_corruption_not_a_torn_tail(
        DurabilityMode mode, int groupsInFlight)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = DamageOptions(mode, groupsInFlight);
        (string newest, byte[] original, List<long> records) = await WriteFourWritersAsync(dir.Path, options);

        // Without the data file, every record is one the open replays. Every record, the last one included: the
        // clean close marked them all durable.
        File.Delete(Path.Combine(dir.Path, DocumentStore.DataFileName));
        var random = new Random(14);
        foreach (long record in records)
        {
            File.WriteAllBytes(newest, FlipPayloadBit(original, record, random));
            var error = Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
            Assert.Equal(newest, error.FilePath);
            Assert.Equal(record, error.Offset);
        }

        File.WriteAllBytes(newest, original);
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            Assert.Equal(1600, store.LastCommittedSequence);
        }
    }

    [Theory]
    [MemberData(nameof(Modes))]
    public async Task Damage_in_a_record_the_checkpoint_holds_leaves_the_store_whole_and_fails_the_change_feed_there(
        DurabilityMode mode, int groupsInFlight)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = DamageOptions(mode, groupsInFlight);
        // The close's checkpoint holds all 1,600 entries.
        (string newest, byte[] original, List<long> records) = await WriteFourWritersAsync(dir.Path, options);
        var random = new Random(15);
        foreach (long record in records)
        {
            File.WriteAllBytes(newest, FlipPayloadBit(original, record, random));
            await using var store = DocumentStore.Open(dir.Path, options); // the open replays none of them
            Assert.Equal(1600, store.LastCommittedSequence);
            for (int w = 0; w < 4; w++)
            {
                Assert.Equal("{\"n\":399}", Encoding.UTF8.GetString(store.Get("C", $"{w}-399")!.Value.Json.Span));
            }

            // A reader of the history checks what the open did not, and names the damaged record.
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(30));
            var error = await Assert.ThrowsAsync<JournalCorruptedException>(async () =>
            {
                await foreach (DocumentChange change in store.Changes.ReadAsync(1, timeout.Token))
                {
                    if (change.Sequence == 1600)
                    {
                        break;
                    }
                }
            });
            Assert.Equal(newest, error.FilePath);
            Assert.Equal(record, error.Offset);
        }
    }

    private static DocumentStoreOptions DamageOptions(DurabilityMode mode, int groupsInFlight) => new()
    {
        SegmentSize = 64 * 1024,
        MaxDocumentSize = 8 * 1024,
        MaxGroupBytes = 16 * 1024,
        Durability = mode,
        MaxGroupsInFlight = groupsInFlight,
    };

    /// <summary>Four writers put 400 documents each and the store closes; returns the newest journal segment, its
    /// bytes and its records' offsets (at least three).</summary>
    private static async Task<(string Newest, byte[] Original, List<long> Records)> WriteFourWritersAsync(string path,
        DocumentStoreOptions options)
    {
        await using (var store = DocumentStore.Open(path, options))
        {
            await Task.WhenAll(Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
            {
                for (int i = 0; i < 400; i++)
                {
                    await store.PutAsync("C", $"{w}-{i}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
                }
            })));
        }

        string newest = Directory.GetFiles(Path.Combine(path, "journal"), "*.journal").Max()!;
        byte[] original = File.ReadAllBytes(newest);
        List<long> records = RecordOffsets(original);
        Assert.True(records.Count >= 3, $"{records.Count} records in the newest segment");
        return (newest, original, records);
    }

    private static byte[] FlipPayloadBit(byte[] segment, long record, Random random)
    {
        byte[] damaged = (byte[])segment.Clone();
        int length = (int)BinaryPrimitives.ReadUInt32LittleEndian(damaged.AsSpan((int)record + 8));
        damaged[record + JournalFormat.RecordHeaderSize + random.Next(length - JournalFormat.RecordHeaderSize)] ^=
            (byte)(1 << random.Next(8));
        return damaged;
    }

    [Fact]
    public async Task An_idle_store_marks_its_last_records_durable_so_a_crash_copy_with_one_damaged_is_refused()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.BufferedSyncInterval = TimeSpan.FromMilliseconds(20);
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 10; i++)
        {
            await store.PutAsync("C", $"k{i}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
        }

        // No clean close: wait for the idle mark, then copy the files as a crash would leave them.
        string journal = Path.Combine(dir.Path, "journal");
        var deadline = System.Diagnostics.Stopwatch.StartNew();
        JournalDurableMark mark;
        while (!JournalDurableMark.TryRead(Folio.Storage.PhysicalFileSystem.Instance, journal, out mark)
            || mark.Sequence < 10)
        {
            Assert.True(deadline.Elapsed < TestDeadline.Hang, "the idle store never wrote its durable mark");
            await Task.Delay(20);
        }

        using var copy = new TempDirectory();
        Directory.CreateDirectory(Path.Combine(copy.Path, "journal"));
        foreach (string file in Directory.GetFiles(journal).Where(f => !f.EndsWith(".lock", StringComparison.Ordinal)))
        {
            File.Copy(file, Path.Combine(copy.Path, "journal", Path.GetFileName(file)));
        }

        string newest = Directory.GetFiles(Path.Combine(copy.Path, "journal"), "*.journal").Max()!;
        byte[] bytes = File.ReadAllBytes(newest);
        long last = RecordOffsets(bytes)[^1];
        bytes[last + JournalFormat.RecordHeaderSize + 2] ^= 0x04;
        File.WriteAllBytes(newest, bytes);
        var error = Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(copy.Path, options).Dispose());
        Assert.Equal(last, error.Offset);
    }

    [Fact]
    public async Task A_deleted_newest_segment_file_is_detected_at_open()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 2000; i++)
            {
                await store.PutAsync("C", $"k{i}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
            }

            Assert.True(store.Journal.SegmentCount >= 3);
        }

        string journal = Path.Combine(dir.Path, "journal");
        string newest = Directory.GetFiles(journal, "*.journal").Max()!;
        File.Delete(newest);
        var error = Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
        Assert.Contains("is missing", error.Message, StringComparison.Ordinal);

        // A failed open leaves the evidence in place: the next open fails the same way.
        error = Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
        Assert.Contains("is missing", error.Message, StringComparison.Ordinal);

        // The only segment of a store, too.
        using var single = new TempDirectory();
        await using (var store = DocumentStore.Open(single.Path, options))
        {
            await store.PutAsync("C", "k", "{}"u8.ToArray());
        }

        File.Delete(Directory.GetFiles(Path.Combine(single.Path, "journal"), "*.journal").Single());
        Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(single.Path, options).Dispose());
    }

    [Fact]
    public async Task A_newest_segment_cut_short_is_detected_at_open()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 100; i++)
            {
                await store.PutAsync("C", $"k{i}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
            }
        }

        // Zero the last half of the records, as a file restored from an older copy would look.
        string newest = Directory.GetFiles(Path.Combine(dir.Path, "journal"), "*.journal").Max()!;
        byte[] bytes = File.ReadAllBytes(newest);
        List<long> records = RecordOffsets(bytes);
        Array.Clear(bytes, (int)records[records.Count / 2], bytes.Length - (int)records[records.Count / 2]);
        File.WriteAllBytes(newest, bytes);
        Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
        Assert.Throws<JournalCorruptedException>(() => DocumentStore.Open(dir.Path, options).Dispose());
    }

    [Fact]
    public async Task A_store_created_with_small_segments_takes_a_large_document_after_reopening_with_larger_ones()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { SegmentSize = 64 * 1024, MaxDocumentSize = 16 * 1024 };
        await using (DocumentStore.Open(dir.Path, options))
        {
        }

        var larger = new DocumentStoreOptions { SegmentSize = 4 << 20, MaxDocumentSize = 1 << 20 };
        string json = $"{{\"p\":\"{new string('x', 100 * 1024)}\"}}";
        for (int reopen = 0; reopen < 2; reopen++)
        {
            await using var store = DocumentStore.Open(dir.Path, larger);
            long version = await store.PutAsync("C", $"big{reopen}", Encoding.UTF8.GetBytes(json));
            Assert.Equal(reopen + 1, version);
            Assert.Equal(json.Length, store.Get("C", $"big{reopen}")!.Value.Json.Length);
        }

        await using (var store = DocumentStore.Open(dir.Path, larger))
        {
            Assert.NotNull(store.Get("C", "big0"));
            Assert.NotNull(store.Get("C", "big1"));
        }
    }

    /// <summary>The offsets of the records of a segment file, in order.</summary>
    private static List<long> RecordOffsets(byte[] segment)
    {
        var offsets = new List<long>();
        long offset = JournalFormat.SegmentHeaderSize;
        while (JournalFormat.TryReadRecordHeader(segment.AsSpan((int)offset), out JournalFormat.RecordHeader header))
        {
            offsets.Add(offset);
            offset += header.Length;
        }

        return offsets;
    }
}
