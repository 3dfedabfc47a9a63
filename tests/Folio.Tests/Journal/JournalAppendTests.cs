using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

public sealed class JournalAppendTests
{
    [Fact]
    public void Appended_entries_get_gap_free_sequences_and_read_back_identically_after_sync()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path);
        Assert.Equal(0, journal.CommittedSequence);
        Assert.Equal(1, journal.Append("a"u8));
        Assert.Equal(2, journal.Append(new byte[] { 1, 2 }, Array.Empty<byte>(), new byte[] { 3 }));
        Assert.Equal(5, journal.Append("last"u8));

        Assert.Empty(journal.ReadAll(1));
        Assert.Equal(5, journal.Sync());
        Assert.Equal(5, journal.CommittedSequence);

        var all = journal.ReadAll(1);
        Assert.Equal([1L, 2, 3, 4, 5], all.Select(e => e.Sequence));
        Assert.Equal("a"u8.ToArray(), all[0].Data);
        Assert.Equal(new byte[] { 1, 2 }, all[1].Data);
        Assert.Empty(all[2].Data);
        Assert.Equal(new byte[] { 3 }, all[3].Data);
        Assert.Equal("last"u8.ToArray(), all[4].Data);
        Assert.Equal([3L, 4, 5], journal.ReadAll(3).Select(e => e.Sequence));
    }

    [Fact]
    public void Entries_survive_reopen_and_numbering_continues()
    {
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096)))
        {
            for (int i = 1; i <= 200; i++)
            {
                journal.Append(JournalTestExtensions.Payload(7, i, i % 50));
            }

            journal.Sync();
            Assert.True(journal.SegmentCount > 1);
        }

        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096)))
        {
            Assert.Equal(200, journal.CommittedSequence);
            Assert.Equal(200, journal.Recovery.Entries);
            Assert.Equal(0, journal.Recovery.TruncatedBytes);
            var all = journal.ReadAll(1);
            Assert.Equal(200, all.Count);
            for (int i = 0; i < all.Count; i++)
            {
                Assert.Equal(i + 1, all[i].Sequence);
                Assert.Equal(JournalTestExtensions.Payload(7, i + 1, (i + 1) % 50), all[i].Data);
            }

            Assert.Equal(201, journal.Append("next"u8));
        }
    }

    [Fact]
    public void The_time_of_the_last_purged_entry_outlives_the_purge_and_a_reopen_and_is_read_from_the_files_too()
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero));
        var times = new Dictionary<long, long>();
        long firstRetained;
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096, clock)))
        {
            for (int i = 1; i <= 200; i++)
            {
                clock.Advance(TimeSpan.FromMilliseconds(1));
                journal.Append(JournalTestExtensions.Payload(9, i, 60));
                times[i] = clock.GetUtcNow().UtcTicks;
            }

            journal.Sync();
            Assert.True(journal.Purge(150) > 0);
            firstRetained = journal.FirstSequence;
            Assert.InRange(firstRetained, 2, 150);
            for (long sequence = firstRetained - 1; sequence <= 200; sequence++)
            {
                Assert.True(journal.TryGetRecordTimestamp(sequence, out long ticks));
                Assert.Equal(times[sequence], ticks);
            }

            Assert.False(journal.TryGetRecordTimestamp(firstRetained - 2, out _)); // purged further back
            Assert.False(journal.TryGetRecordTimestamp(201, out _)); // not committed
        }

        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096, clock)))
        {
            Assert.True(journal.TryGetRecordTimestamp(firstRetained - 1, out long ticks));
            Assert.Equal(times[firstRetained - 1], ticks);
        }

        Assert.True(JournalFollower.TryGetRecordTimestamp(dir.Path, firstRetained - 1, out long fromFiles));
        Assert.Equal(times[firstRetained - 1], fromFiles);
        Assert.True(JournalFollower.TryGetRecordTimestamp(dir.Path, 180, out fromFiles));
        Assert.Equal(times[180], fromFiles);
        Assert.False(JournalFollower.TryGetRecordTimestamp(dir.Path, firstRetained - 2, out _));

        // A watermark an older build wrote (12 bytes: no time) opens as before; the time is then unknown.
        string watermark = Path.Combine(dir.Path, JournalFormat.PurgeWatermarkFileName);
        var legacy = new byte[12];
        BitConverter.TryWriteBytes(legacy, firstRetained);
        BitConverter.TryWriteBytes(legacy.AsSpan(8), Folio.Storage.Crc32C.Compute(legacy.AsSpan(0, 8)));
        File.WriteAllBytes(watermark, legacy);
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096, clock)))
        {
            Assert.Equal(firstRetained, journal.FirstSequence);
            Assert.False(journal.TryGetRecordTimestamp(firstRetained - 1, out _));
            Assert.True(journal.TryGetRecordTimestamp(firstRetained, out long ticks));
            Assert.Equal(times[firstRetained], ticks);
        }

        Assert.False(JournalFollower.TryGetRecordTimestamp(dir.Path, firstRetained - 1, out _));
        File.WriteAllBytes(watermark, legacy[..11]);
        Assert.Throws<JournalCorruptedException>(
            () => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096, clock)));
    }

    [Fact]
    public void A_record_that_cannot_fit_a_segment_is_refused_and_the_journal_stays_usable()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        var error = Assert.Throws<ArgumentException>(() => journal.Append(new byte[1024]));
        Assert.Contains("does not fit", error.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => journal.Append(ReadOnlySpan<ReadOnlyMemory<byte>>.Empty));

        var largest = new byte[journal.MaxRecordSize - JournalFormat.RecordHeaderSize - JournalFormat.EntryHeaderSize];
        Assert.Equal(1, journal.Append(largest));
        Assert.Equal(2, journal.Append("x"u8));
        journal.Sync();
        Assert.Equal(2, journal.ReadAll(1).Count);
    }

    [Fact]
    public void Invalid_options_are_rejected_at_open()
    {
        using var dir = new TempDirectory();
        Assert.Throws<ArgumentOutOfRangeException>(()
            => WriteAheadJournal.Open(dir.Path, new JournalOptions { SegmentSize = 100 }));
        Assert.Throws<ArgumentOutOfRangeException>(()
            => WriteAheadJournal.Open(dir.Path, new JournalOptions { SegmentSize = 4L << 30 }));
        Assert.Throws<ArgumentException>(() => WriteAheadJournal.Open(" "));
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
        Assert.Equal(0, journal.CommittedSequence);
    }

    [Fact]
    public void A_second_open_of_the_same_folder_throws_naming_the_folder()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
        var error = Assert.Throws<StoreLockedException>(()
            => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20)));
        Assert.Equal(journal.Directory, error.Directory);
        Assert.Contains(journal.Directory, error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_lock_held_by_another_process_makes_open_throw()
    {
        if (!OperatingSystem.IsLinux() || !File.Exists("/usr/bin/flock"))
        {
            return;
        }

        using var dir = new TempDirectory();
        string lockFile = Path.Combine(dir.Path, "journal.lock");
        File.WriteAllBytes(lockFile, []);
        using var holder = System.Diagnostics.Process.Start(
            new System.Diagnostics.ProcessStartInfo("/usr/bin/flock", ["-x", lockFile, "-c", "echo held; sleep 30"]) {
            RedirectStandardOutput = true })!;
        try
        {
            Assert.Equal("held", holder.StandardOutput.ReadLine());
            Assert.Throws<StoreLockedException>(()
                => WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20)));
        }
        finally
        {
            holder.Kill(entireProcessTree: true);
            holder.WaitForExit();
        }

        // The lock goes with the last process holding the descriptor; give the killed tree a moment to exit.
        var deadline = DateTime.UtcNow.AddSeconds(10);
        while (true)
        {
            try
            {
                using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
                Assert.Equal(0, journal.CommittedSequence);
                return;
            }
            catch (StoreLockedException) when (DateTime.UtcNow < deadline)
            {
                Thread.Sleep(50);
            }
        }
    }

    [Fact]
    public void Dispose_is_idempotent_releases_the_folder_and_later_calls_throw()
    {
        using var dir = new TempDirectory();
        var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
        journal.Append("x"u8);
        journal.Sync();
        journal.Dispose();
        journal.Dispose();
        Assert.Throws<ObjectDisposedException>(() => journal.Append("y"u8));
        Assert.Throws<ObjectDisposedException>(() => journal.OpenReader(1));
        using var again = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
        Assert.Equal(1, again.CommittedSequence);
    }

    [Fact]
    public void Timestamps_never_decrease_even_when_the_clock_steps_back()
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero));
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096, clock));
        journal.Append("a"u8);
        clock.Advance(TimeSpan.FromHours(-1));
        journal.Append("b"u8);
        journal.Sync();
        var all = journal.ReadAll(1);
        Assert.Equal(all[0].Timestamp, all[1].Timestamp);
    }
}
