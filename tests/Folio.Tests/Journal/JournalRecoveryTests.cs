using System.Buffers.Binary;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>Crash and corruption tests: damage bytes on disk, reopen, and check what recovery keeps or
/// refuses.</summary>
public sealed class JournalRecoveryTests
{
    private const int Seed = 11;
    private const long SegmentSize = 8192;

    [Fact]
    public void A_damaged_durable_mark_is_refused_with_the_way_out_and_without_it_every_entry_is_there()
    {
        using var dir = new TempDirectory();
        WriteRecords(dir.Path, records: 12, out long entries, out _);
        string mark = Path.Combine(dir.Path, JournalDurableMark.FileName);
        byte[] bytes = File.ReadAllBytes(mark);
        bytes[10] ^= 0x40;
        File.WriteAllBytes(mark, bytes);
        var error = Assert.Throws<JournalCorruptedException>(
            () => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)));
        Assert.Contains("durable mark is damaged", error.Message, StringComparison.Ordinal);
        Assert.Contains("if no segment file is missing, delete it", error.Message, StringComparison.Ordinal);

        File.Delete(mark);
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize));
        Assert.Equal(entries, journal.CommittedSequence);
    }

    [Fact]
    public void Cutting_the_newest_segment_at_every_offset_of_its_last_record_drops_only_that_record()
    {
        using var source = new TempDirectory();
        long lastRecordStart = WriteRecords(source.Path, records: 12, out long entries, out int lastRecordEntries);
        string segmentName = Path.GetFileName(NewestSegment(source.Path));
        byte[] original = File.ReadAllBytes(NewestSegment(source.Path));
        long lastRecordEnd = RecordEnd(original, lastRecordStart);

        for (long cut = lastRecordStart; cut < lastRecordEnd; cut++)
        {
            using var copy = new TempDirectory();
            byte[] torn = (byte[])original.Clone();
            Array.Clear(torn, (int)cut, (int)(lastRecordEnd - cut));
            File.WriteAllBytes(Path.Combine(copy.Path, segmentName), torn);

            using var journal = WriteAheadJournal.Open(copy.Path, JournalTestExtensions.Tiny(SegmentSize));
            long kept = entries - lastRecordEntries;
            Assert.Equal(kept, journal.CommittedSequence);
            Assert.Equal(torn.AsSpan((int)lastRecordStart, (int)(cut - lastRecordStart)).LastIndexOfAnyExcept((byte)0)
                + 1, journal.Recovery.TruncatedBytes);
            AssertEntriesIntact(journal, kept);

            // The journal keeps working where the torn record was.
            Assert.Equal(kept + 1, journal.Append("after"u8));
            journal.Sync();
            Assert.Equal("after"u8.ToArray(), journal.ReadAll(kept + 1).Single().Data);
        }
    }

    [Theory]
    [InlineData(1)]
    [InlineData(31)]
    [InlineData(500)]
    public void Garbage_after_the_last_record_is_truncated_and_every_record_kept(int garbageLength)
    {
        using var dir = new TempDirectory();
        WriteRecords(dir.Path, records: 5, out long entries, out _);
        string segment = NewestSegment(dir.Path);
        byte[] bytes = File.ReadAllBytes(segment);
        long end = DataEnd(bytes);
        new Random(garbageLength).NextBytes(bytes.AsSpan((int)end, garbageLength));
        bytes[end] |= 1; // never all zeros
        File.WriteAllBytes(segment, bytes);

        var logs = new CapturingLoggerFactory();
        var options = JournalTestExtensions.Tiny(SegmentSize);
        options.LoggerFactory = logs;
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            Assert.Equal(entries, journal.CommittedSequence);
            Assert.True(journal.Recovery.TruncatedBytes > 0);
            AssertEntriesIntact(journal, entries);
        }

        // Recovery says what it did: the truncation (a warning naming the file, offset and bytes) and a summary.
        var torn = Assert.Single(logs.Lines, l => l.Id.Id == 1002);
        Assert.Equal(Microsoft.Extensions.Logging.LogLevel.Warning, torn.Level);
        Assert.Contains(segment, torn.Message, StringComparison.Ordinal);
        Assert.Contains($"offset {end}", torn.Message, StringComparison.Ordinal);
        var summary = Assert.Single(logs.Lines, l => l.Id.Id == 1001);
        Assert.Contains($"{entries} entries", summary.Message, StringComparison.Ordinal);

        // Truncation is durable: the second open finds a clean tail.
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            Assert.Equal(0, journal.Recovery.TruncatedBytes);
            Assert.Equal(entries, journal.CommittedSequence);
        }
    }

    [Fact]
    public void A_damaged_record_followed_by_a_valid_one_is_corruption_naming_file_and_offset()
    {
        using var dir = new TempDirectory();
        WriteRecords(dir.Path, records: 6, out _, out _);
        string segment = NewestSegment(dir.Path);
        byte[] bytes = File.ReadAllBytes(segment);
        long second = RecordEnd(bytes, JournalFormat.SegmentHeaderSize);
        bytes[second + JournalFormat.RecordHeaderSize + 2] ^= 0x10;
        File.WriteAllBytes(segment, bytes);

        // The durable mark written at the clean close covers every record...
        var error = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)));
        Assert.Equal(segment, error.FilePath);
        Assert.Equal(second, error.Offset);
        Assert.Contains("durable mark says was synced", error.Message, StringComparison.Ordinal);

        // ...and without it (a crash before any mark), the later records prove the damaged one was durable.
        LoseDurableMark(dir.Path);
        error = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)));
        Assert.Equal(segment, error.FilePath);
        Assert.Equal(second, error.Offset);
        Assert.Contains("followed by a valid record", error.Message, StringComparison.Ordinal);

        // The failed open released the folder.
        File.WriteAllBytes(segment, File.ReadAllBytes(segment));
    }

    [Fact]
    public void Every_record_names_how_much_of_its_segment_was_durable_when_it_was_written()
    {
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            journal.Append("a"u8); // the first record of a fresh segment: only the header is durable
            journal.Append("b"u8); // "a" not yet synced
            journal.Sync();
            journal.Append("c"u8); // everything before it synced
            journal.Sync();
        }

        byte[] bytes = File.ReadAllBytes(NewestSegment(dir.Path));
        var synced = new List<long>();
        var offsets = new List<long>();
        for (long offset = JournalFormat.SegmentHeaderSize; offset < DataEnd(bytes); offset = RecordEnd(bytes, offset))
        {
            Assert.Equal(JournalFormat.RecordMagic, BinaryPrimitives.ReadUInt32LittleEndian(bytes.AsSpan((int)offset)));
            offsets.Add(offset);
            synced.Add(BinaryPrimitives.ReadInt64LittleEndian(bytes.AsSpan((int)offset + 32)));
        }

        Assert.Equal([JournalFormat.SegmentHeaderSize, JournalFormat.SegmentHeaderSize, offsets[2]], synced);
    }

    [Fact]
    public void The_first_record_after_a_reopen_knows_every_recovered_record_is_durable()
    {
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            journal.Append("a"u8);
            journal.Append("b"u8); // never synced by the writer: the process "dies" here (no clean close below)
        }

        LoseDurableMark(dir.Path);
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            Assert.Equal(3, journal.Append("c"u8));
            journal.Sync();
        }

        byte[] bytes = File.ReadAllBytes(NewestSegment(dir.Path));
        long third = RecordEnd(bytes, RecordEnd(bytes, JournalFormat.SegmentHeaderSize));
        Assert.Equal(third, BinaryPrimitives.ReadInt64LittleEndian(bytes.AsSpan((int)third + 32)));
    }

    [Fact]
    public void A_damaged_record_followed_only_by_overlapped_records_is_a_torn_tail_and_all_of_them_are_dropped()
    {
        // After a power loss, records written while the damaged one was still being made durable may be on disk
        // although it is not; none of them was acknowledged as durable, so recovery drops them with it.
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            journal.Append("durable"u8);
            journal.Sync();
            journal.Append("torn"u8);
            journal.Append("overlapped 1"u8);
            journal.Append("overlapped 2"u8);
            journal.Sync();
        }

        LoseDurableMark(dir.Path); // as after a power loss before the store marked these records durable
        string segment = NewestSegment(dir.Path);
        byte[] bytes = File.ReadAllBytes(segment);
        long torn = RecordEnd(bytes, JournalFormat.SegmentHeaderSize);
        long end = DataEnd(bytes);
        bytes[torn + JournalFormat.RecordHeaderSize + 4] ^= 0x01;
        File.WriteAllBytes(segment, bytes);

        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            Assert.Equal(1, journal.CommittedSequence);
            Assert.Equal(end - torn, journal.Recovery.TruncatedBytes);
            Assert.Equal(["durable"], journal.ReadAll(1).Select(e => System.Text.Encoding.UTF8.GetString(e.Data)));
            Assert.Equal(2, journal.Append("after"u8));
            journal.Sync();
        }
    }

    [Fact]
    public void A_damaged_record_before_a_record_written_after_it_was_durable_is_corruption()
    {
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)))
        {
            journal.Append("durable"u8);
            journal.Sync();
            journal.Append("damaged"u8);
            journal.Append("overlapped"u8);
            journal.Sync();
            journal.Append("written after both were durable"u8);
            journal.Sync();
        }

        LoseDurableMark(dir.Path);
        string segment = NewestSegment(dir.Path);
        byte[] bytes = File.ReadAllBytes(segment);
        long damaged = RecordEnd(bytes, JournalFormat.SegmentHeaderSize);
        long last = RecordEnd(bytes, RecordEnd(bytes, damaged));
        bytes[damaged + JournalFormat.RecordHeaderSize + 4] ^= 0x01;
        File.WriteAllBytes(segment, bytes);

        var error = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)));
        Assert.Equal(damaged, error.Offset);
        Assert.Contains($"valid record at offset {last}", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Random_bit_flips_in_older_records_are_always_detected_at_recovery()
    {
        using var source = new TempDirectory();
        long lastRecordStart = WriteRecords(source.Path, records: 10, out _, out _);
        string segmentName = Path.GetFileName(NewestSegment(source.Path));
        byte[] original = File.ReadAllBytes(NewestSegment(source.Path));
        var random = new Random(5);
        for (int trial = 0; trial < 200; trial++)
        {
            using var copy = new TempDirectory();
            byte[] damaged = (byte[])original.Clone();
            int at = random.Next(JournalFormat.SegmentHeaderSize, (int)lastRecordStart);
            damaged[at] ^= (byte)(1 << random.Next(8));
            File.WriteAllBytes(Path.Combine(copy.Path, segmentName), damaged);

            var error = Assert.Throws<JournalCorruptedException>(()
                => WriteAheadJournal.Open(copy.Path, JournalTestExtensions.Tiny(SegmentSize)));
            Assert.InRange(error.Offset, JournalFormat.SegmentHeaderSize, at);
        }
    }

    [Fact]
    public void Records_a_checkpoint_holds_are_walked_at_recovery_and_checked_by_each_reader_that_reads_them()
    {
        using var dir = new TempDirectory();
        WriteRecords(dir.Path, records: 10, out long entries, out _);
        string segment = NewestSegment(dir.Path);
        byte[] original = File.ReadAllBytes(segment);
        var starts = new List<long>();
        long dataEnd = DataEnd(original);
        for (long offset = JournalFormat.SegmentHeaderSize; offset < dataEnd; offset = RecordEnd(original, offset))
        {
            starts.Add(offset);
        }

        // The checkpoint holds the first five records' entries; the second record's payload is damaged.
        long covered = BinaryPrimitives.ReadInt64LittleEndian(original.AsSpan((int)starts[5] + 16)) - 1;
        byte[] damaged = (byte[])original.Clone();
        damaged[starts[1] + JournalFormat.RecordHeaderSize + 3] ^= 0x10;
        File.WriteAllBytes(segment, damaged);
        var unguarded = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize)));
        Assert.Equal(starts[1], unguarded.Offset);

        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize),
            () => new CheckpointOfJournal(covered, Guid.Empty, null)))
        {
            Assert.Equal(entries, journal.LastAppendedSequence);
            using (JournalReader after = journal.OpenReader(covered + 1))
            {
                long read = 0;
                while (after.TryRead(out JournalEntry entry))
                {
                    Assert.True(entry.Data.SequenceEqual(
                        JournalTestExtensions.Payload(Seed, entry.Sequence, 20 + (int)(entry.Sequence % 17))));
                    read++;
                }

                Assert.Equal(entries - covered, read);
            }

            for (int pass = 0; pass < 2; pass++)
            {
                using JournalReader reader = journal.OpenReader(1);
                var error = Assert.Throws<JournalCorruptedException>(() =>
                {
                    while (reader.TryRead(out _))
                    {
                    }
                });
                Assert.Equal(starts[1], error.Offset);
            }

            Assert.Equal(entries + 1, journal.Append([new byte[] { 1, 2, 3 }]));
        }

        // A record the checkpoint holds was durable: a damaged header there is corruption, never a torn tail.
        damaged = (byte[])original.Clone();
        damaged[starts[3] + 16] ^= 0x01;
        File.WriteAllBytes(segment, damaged);
        File.Delete(Path.Combine(dir.Path, JournalDurableMark.FileName)); // no durable mark to say so
        var header = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize),
            () => new CheckpointOfJournal(covered, Guid.Empty, null)));
        Assert.Equal(starts[3], header.Offset);
        Assert.Contains("checkpoint covers it", header.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Damage_in_a_sealed_segment_is_corruption_even_at_its_tail()
    {
        using var dir = new TempDirectory();
        WriteSmallSegments(dir.Path, entries: 40);
        Assert.True(Directory.GetFiles(dir.Path, "*.journal").Length >= 3);

        string sealedSegment = Directory.GetFiles(dir.Path, "*.journal").Order(StringComparer.Ordinal).First();
        byte[] bytes = File.ReadAllBytes(sealedSegment);
        long end = DataEnd(bytes);
        long lastStart = JournalFormat.SegmentHeaderSize;
        while (RecordEnd(bytes, lastStart) < end)
        {
            lastStart = RecordEnd(bytes, lastStart);
        }

        bytes[lastStart + JournalFormat.RecordHeaderSize + 5] ^= 0x01;
        File.WriteAllBytes(sealedSegment, bytes);

        var error = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)));
        Assert.Equal(sealedSegment, error.FilePath);
        Assert.Equal(lastStart, error.Offset);
    }

    [Fact]
    public void A_missing_middle_segment_or_a_damaged_segment_header_is_corruption()
    {
        using var dir = new TempDirectory();
        WriteSmallSegments(dir.Path, entries: 60);

        string[] segments = Directory.GetFiles(dir.Path, "*.journal").Order(StringComparer.Ordinal).ToArray();
        Assert.True(segments.Length >= 4);
        byte[] header = File.ReadAllBytes(segments[1]);
        header[20] ^= 0xFF;
        File.WriteAllBytes(segments[1], header);
        var headerError = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)));
        Assert.Equal(segments[1], headerError.FilePath);
        Assert.Equal(0, headerError.Offset);

        File.Delete(segments[1]);
        var gap = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)));
        Assert.Equal(segments[2], gap.FilePath);
        Assert.Contains("previous one ends", gap.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_missing_oldest_segment_without_a_purge_is_corruption_but_after_a_purge_is_expected()
    {
        using var dir = new TempDirectory();
        string[] segments;
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            for (int i = 1; i <= 60; i++)
            {
                journal.Append(JournalTestExtensions.Payload(Seed, i, 60));
            }

            journal.Sync();
            segments = Directory.GetFiles(dir.Path, "*.journal").Order(StringComparer.Ordinal).ToArray();
            Assert.Equal(1, journal.Purge(JournalFormatFirst(segments[1])));
        }

        Assert.False(File.Exists(segments[0]));
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            Assert.Equal(JournalFormatFirst(segments[1]), journal.FirstSequence);
            Assert.Equal(60, journal.CommittedSequence);
        }

        File.Delete(segments[1]);
        var error = Assert.Throws<JournalCorruptedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)));
        Assert.Contains("a segment file is missing", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Segments_left_behind_by_an_interrupted_purge_are_removed_at_recovery()
    {
        using var dir = new TempDirectory();
        WriteSmallSegments(dir.Path, entries: 60);

        string[] segments = Directory.GetFiles(dir.Path, "*.journal").Order(StringComparer.Ordinal).ToArray();
        long firstKept = JournalFormatFirst(segments[2]);

        // A purge of the first two segments wrote its watermark, deleted segment 1, and crashed before deleting
        // segment 0 (a reader was still inside it): put segment 0 back as the crash would have left it.
        byte[] oldest = File.ReadAllBytes(segments[0]);
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            using var reader = journal.OpenReader(1);
            Assert.True(reader.TryRead(out _));
            Assert.Equal(2, journal.Purge(firstKept));
            Assert.True(File.Exists(segments[0]), "a segment a reader is inside is not deleted");
            Assert.False(File.Exists(segments[1]));
            Assert.True(reader.TryRead(out JournalEntry second));
            Assert.Equal(2, second.Sequence);
        }

        Assert.False(File.Exists(segments[0]), "the last reader leaving deletes the purged segment");
        File.WriteAllBytes(segments[0], oldest);
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            Assert.False(File.Exists(segments[0]));
            Assert.Equal(firstKept, journal.FirstSequence);
            AssertEntriesIntact(journal, 60, from: firstKept, seed: Seed, length: 60);
        }
    }

    [Fact]
    public void A_reader_reports_a_record_damaged_before_its_first_read_instead_of_returning_it()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(SegmentSize));
        journal.Append("first"u8);
        journal.Append("second"u8);
        journal.Sync();
        string segment = NewestSegment(dir.Path);
        using (var file = new FileStream(segment, FileMode.Open, FileAccess.Write,
            FileShare.ReadWrite | FileShare.Delete))
        {
            // Damage the second record (appended in this process, never read yet): its checksum is checked at first
            // read.
            file.Position = JournalFormat.SegmentHeaderSize + JournalFormat.RecordHeaderSize + 4 + 5
                + JournalFormat.RecordHeaderSize + 6;
            file.WriteByte(0xEE);
        }

        using var reader = journal.OpenReader(1);
        Assert.True(reader.TryRead(out JournalEntry first));
        Assert.Equal("first"u8.ToArray(), first.Data.ToArray());
        var error = Assert.Throws<JournalCorruptedException>(() => reader.TryRead(out _));
        Assert.Equal(JournalFormat.SegmentHeaderSize + JournalFormat.RecordHeaderSize + 4 + 5, error.Offset);
    }

    /// <summary>Writes entries of 60 bytes, one record each, to 1 KiB segments (about ten records a segment).</summary>
    private static void WriteSmallSegments(string path, int entries)
    {
        using var journal = WriteAheadJournal.Open(path, JournalTestExtensions.Tiny(1024));
        for (int i = 1; i <= entries; i++)
        {
            journal.Append(JournalTestExtensions.Payload(Seed, i, 60));
        }

        journal.Sync();
    }

    /// <summary>Writes records of 1 to 3 entries to one segment; returns the offset of the last record.</summary>
    private static long WriteRecords(string path, int records, out long entries, out int lastRecordEntries)
    {
        using var journal = WriteAheadJournal.Open(path, JournalTestExtensions.Tiny(SegmentSize));
        long sequence = 1;
        lastRecordEntries = 0;
        for (int r = 0; r < records; r++)
        {
            lastRecordEntries = (r % 3) + 1;
            var group = new ReadOnlyMemory<byte>[lastRecordEntries];
            for (int i = 0; i < group.Length; i++)
            {
                group[i] = JournalTestExtensions.Payload(Seed, sequence + i, 20 + (int)((sequence + i) % 17));
            }

            Assert.Equal(sequence, journal.Append(group));
            journal.Sync(); // each record durable before the next is written: none is overlapped
            sequence += group.Length;
        }

        entries = sequence - 1;
        Assert.Equal(1, journal.SegmentCount);
        byte[] bytes = File.ReadAllBytes(NewestSegment(path));
        long offset = JournalFormat.SegmentHeaderSize;
        long end = DataEnd(bytes);
        while (RecordEnd(bytes, offset) < end)
        {
            offset = RecordEnd(bytes, offset);
        }

        return offset;
    }

    private static void AssertEntriesIntact(WriteAheadJournal journal, long count, long from = 1, int seed = Seed,
        int length = -1)
    {
        var all = journal.ReadAll(from);
        Assert.Equal(count - from + 1, all.Count);
        foreach (var (sequence, _, data) in all)
        {
            int expectedLength = length >= 0 ? length : 20 + (int)(sequence % 17);
            Assert.Equal(JournalTestExtensions.Payload(seed, sequence, expectedLength), data);
        }
    }

    private static string NewestSegment(string path) => Directory.GetFiles(path, "*.journal")
        .Order(StringComparer.Ordinal).Last();

    private static long JournalFormatFirst(string segmentPath)
        => long.Parse(Path.GetFileNameWithoutExtension(segmentPath), System.Globalization.CultureInfo.InvariantCulture);

    private static long RecordEnd(byte[] bytes, long offset) => offset
        + BinaryPrimitives.ReadUInt32LittleEndian(bytes.AsSpan((int)offset + 8));

    private static long DataEnd(byte[] bytes)
    {
        long offset = JournalFormat.SegmentHeaderSize;
        while (offset + 4 <= bytes.Length
            && BinaryPrimitives.ReadUInt32LittleEndian(
            bytes.AsSpan((int)offset)) is JournalFormat.RecordMagic or JournalFormat.OverlappedRecordMagic)
        {
            offset = RecordEnd(bytes, offset);
        }

        return offset;
    }

    /// <summary>Deletes the durable mark, as if the store lost power before it ever wrote one covering these
    /// records.</summary>
    private static void LoseDurableMark(string directory)
        => File.Delete(Path.Combine(directory, JournalDurableMark.FileName));
}
