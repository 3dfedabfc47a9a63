using Folio.Journal;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>Write and sync failures injected through the internal file abstraction.</summary>
public sealed class JournalFaultTests
{
    [Theory]
    [InlineData(FileFault.WriteFails)]
    [InlineData(FileFault.ShortWrite)]
    [InlineData(FileFault.DiskFull)]
    [InlineData(FileFault.SyncFails)]
    public void A_failed_write_or_sync_faults_the_journal_and_nothing_unsynced_becomes_visible(FileFault fault)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        var options = JournalTestExtensions.Tiny(4096);
        options.FileSystem = files;
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            journal.Append("durable"u8);
            journal.Sync();

            files.Arm(fault);
            var error = Record.Exception(() =>
            {
                journal.Append("lost"u8);
                journal.Sync();
            });
            var faulted = Assert.IsType<StoreFaultedException>(error);
            Assert.IsType<IOException>(faulted.InnerException);
            Assert.Equal(1, journal.CommittedSequence);

            // Faulted: later writes fail fast with the cause; reads of committed data keep working.
            var again = Assert.Throws<StoreFaultedException>(() => journal.Append("more"u8));
            Assert.IsType<IOException>(again.InnerException);
            Assert.Throws<StoreFaultedException>(() => journal.Sync());
            Assert.Equal("durable"u8.ToArray(), journal.ReadAll(1).Single().Data);
        }

        // Reopen recovers: what was synced is there; the failed record is gone or (if it reached the disk whole)
        // intact.
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4096)))
        {
            var all = journal.ReadAll(1);
            Assert.Equal("durable"u8.ToArray(), all[0].Data);
            Assert.InRange(all.Count, 1, 2);
            if (all.Count == 2)
            {
                Assert.Equal("lost"u8.ToArray(), all[1].Data);
            }

            journal.Append("after"u8);
            journal.Sync();
        }
    }

    /// <summary>
    /// At a rotation, a failed sync of the active segment faults the journal, as any failed sync; a failed write of
    /// the next segment's header into its prepared file, before the active segment is sealed, fails the append
    /// alone. Either way nothing committed is lost.
    /// </summary>
    [Theory]
    [InlineData(".journal", FileFault.SyncFails, true)]
    [InlineData(".tmp", FileFault.WriteFails, false)]
    public void A_failure_while_rotating_loses_no_committed_entry_and_faults_only_for_the_active_segment(
        string failingFile, FileFault fault, bool faults)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = path => path.EndsWith(failingFile, StringComparison.Ordinal),
        };
        var options = JournalTestExtensions.Tiny(1024);
        options.FileSystem = files;
        using var journal = WriteAheadJournal.Open(dir.Path, options);
        journal.Append(new byte[500]);
        journal.Sync();
        files.Arm(fault);
        Exception error = Assert.ThrowsAny<FolioException>(() => journal.Append(new byte[700]));
        Assert.IsType(faults ? typeof(StoreFaultedException) : typeof(StoreUnavailableException), error);
        Assert.Equal(1, journal.CommittedSequence);
        Assert.Single(journal.ReadAll(1));
        if (!faults)
        {
            journal.Append(new byte[100]); // fits the active segment, which was not sealed
            journal.Sync();
            Assert.Equal(2, journal.ReadAll(1).Count);
        }
    }

    [Fact]
    public void A_journal_whose_folder_was_deleted_while_open_leaves_the_new_journal_made_there_alone()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // elsewhere the open lock file cannot be deleted, or the check has nothing to ask
        }

        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "journal");
        using var old = WriteAheadJournal.Open(path, JournalTestExtensions.Tiny(4096));
        for (int i = 1; i <= 5; i++)
        {
            old.Append(JournalTestExtensions.Payload(1, i, 100));
        }

        old.Sync();

        // The folder is deleted under the open journal, and another journal is made at the same path.
        Directory.Delete(path, recursive: true);
        var written = new List<byte[]>();
        using (var fresh = WriteAheadJournal.Open(path, JournalTestExtensions.Tiny(4096)))
        {
            for (int i = 1; i <= 200; i++)
            {
                written.Add(JournalTestExtensions.Payload(2, i, 100));
                fresh.Append(written[^1]);
            }

            fresh.Sync();
            Assert.True(fresh.SegmentCount > 3);
            var files = Directory.GetFiles(path).Where(f => !f.EndsWith(".lock", StringComparison.Ordinal))
                .ToDictionary(f => f, File.ReadAllBytes);

            // The old journal refuses what it would do by path (a new segment, a purge, its marks) and faults; its
            // close neither throws nor writes.
            StoreFaultedException refused = Assert.Throws<StoreFaultedException>(() =>
            {
                for (int i = 0; i < 100; i++)
                {
                    old.Append(new byte[500]);
                }
            });
            Assert.Contains("was deleted or moved while the journal was open", refused.Message,
                StringComparison.Ordinal);
            Assert.Throws<StoreFaultedException>(() => old.Purge(long.MaxValue));
            old.Dispose();
            Assert.Equal(files.Keys.Order(), Directory.GetFiles(path)
                .Where(f => !f.EndsWith(".lock", StringComparison.Ordinal)).Order());
            foreach ((string file, byte[] bytes) in files)
            {
                Assert.Equal(bytes, File.ReadAllBytes(file));
            }
        }

        using (var reopened = WriteAheadJournal.Open(path, JournalTestExtensions.Tiny(4096)))
        {
            Assert.Equal(written, reopened.ReadAll(1).Select(e => e.Data));
        }
    }

    [Fact]
    public void A_journal_opened_through_a_symbolic_link_is_not_taken_for_one_whose_folder_moved()
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        using var dir = new TempDirectory();
        string real = Path.Combine(dir.Path, "real");
        Directory.CreateDirectory(real);
        string link = Path.Combine(dir.Path, "link");
        Directory.CreateSymbolicLink(link, real);
        using (var journal = WriteAheadJournal.Open(Path.Combine(link, "journal"), JournalTestExtensions.Tiny(4096)))
        {
            for (int i = 1; i <= 200; i++)
            {
                journal.Append(JournalTestExtensions.Payload(3, i, 100));
                journal.Sync();
            }

            Assert.True(journal.SegmentCount > 3);
            Assert.True(journal.Purge(100) > 0);
            Assert.Equal(200, journal.CommittedSequence);
        }

        using var reopened = WriteAheadJournal.Open(Path.Combine(real, "journal"), JournalTestExtensions.Tiny(4096));
        Assert.Equal(200, reopened.CommittedSequence);
    }

    [Fact]
    public void A_full_disk_met_by_a_zero_fill_fails_that_append_alone_and_is_reported_until_a_fill_succeeds()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => path.EndsWith(".journal", StringComparison.Ordinal) };
        var options = new JournalOptions
        {
            SegmentSize = 256 * 1024, MinFillPiece = 8 * 1024, MaxFillPiece = 8 * 1024, FileSystem = files,
        };
        var acknowledged = new List<byte[]>();
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            // The segment's holes cannot be filled: the records that fit in what is filled are written, the first that
            // does not fails alone.
            files.NoSpace = true;
            StoreFullException? full = null;
            for (int i = 0; i < 100 && full is null; i++)
            {
                byte[] entry = JournalTestExtensions.Payload(1, acknowledged.Count + 1, 3000);
                try
                {
                    journal.Append(entry);
                    journal.Sync();
                    acknowledged.Add(entry);
                }
                catch (StoreFullException e)
                {
                    full = e;
                }
            }

            Assert.NotNull(full);
            Assert.Contains("zero-fill the space for this commit", full.Message, StringComparison.Ordinal);
            Assert.Same(full.InnerException, journal.DiskFull);
            Assert.InRange(acknowledged.Count, 1, 3);
            Assert.Equal(acknowledged.Count, journal.CommittedSequence);

            // Still full: the next try fails the same way, and the journal is not faulted.
            Assert.Throws<StoreFullException>(() => journal.Append(JournalTestExtensions.Payload(1, 99, 3000)));
            Assert.NotNull(journal.DiskFull);
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));

            // Space is freed: the next append fills, the disk is no longer reported full, and appends go on through
            // fills and rotations.
            files.NoSpace = false;
            for (int i = 0; i < 200; i++)
            {
                byte[] entry = JournalTestExtensions.Payload(2, acknowledged.Count + 1, 3000);
                journal.Append(entry);
                journal.Sync();
                acknowledged.Add(entry);
                Assert.Null(journal.DiskFull);
            }

            Assert.True(journal.SegmentCount > 1);
        }

        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));
        }
    }

    [Fact]
    public void A_full_disk_at_rotation_fails_the_append_alone_and_appends_resume_once_space_is_freed()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == "next-segment.tmp" };
        var clock = new ManualTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero));
        JournalOptions options = JournalTestExtensions.Tiny(1024, clock);
        options.FileSystem = files;
        var acknowledged = new List<byte[]>();
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            // Two 300-byte entries fill a segment; the next one's file was prepared before the disk filled or is
            // still being prepared, so a rotation or two may succeed first.
            files.NoSpace = true;
            StoreFullException full = AppendUntilRefused<StoreFullException>(journal, acknowledged);
            Assert.IsType<IOException>(full.InnerException);
            Assert.Contains("disk is full", full.Message, StringComparison.Ordinal);
            Assert.False(File.Exists(Path.Combine(dir.Path, "next-segment.tmp"))); // its space is given back
            Assert.Same(full.InnerException, journal.DiskFull);

            // Not faulted: a sync works and what was acknowledged reads back.
            journal.Sync();
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));

            // Within the retry interval an append that needs the segment fails at once, writing nothing.
            int writes = files.Writes;
            Assert.Throws<StoreFullException>(() => journal.Append(JournalTestExtensions.Payload(2, 0, 300)));
            Assert.Equal(writes, files.Writes);

            // After it, one more try, which fails while the disk is still full.
            clock.Advance(WriteAheadJournal.PreparationRetryInterval);
            Assert.Throws<StoreFullException>(() => journal.Append(JournalTestExtensions.Payload(2, 1, 300)));
            Assert.True(files.Writes > writes);

            // Space is freed: the first try after the interval rotates, and appends go on.
            files.NoSpace = false;
            Assert.Throws<StoreFullException>(() => journal.Append(JournalTestExtensions.Payload(2, 2, 300)));
            clock.Advance(WriteAheadJournal.PreparationRetryInterval);
            AppendAcknowledged(journal, acknowledged, writer: 3, count: 6);

            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));
            Assert.Null(journal.DiskFull);
        }

        AssertReopensWithExactly(dir.Path, acknowledged);
    }

    /// <summary>
    /// Too many open files (a process whose sockets leaked, say) when the next segment must be created: nothing of the
    /// active segment has changed, so the append fails alone with <see cref="StoreUnavailableException"/> (not a full
    /// disk, not a fault), tries again at most once a second, and appends go on, without a reopen, once files can be
    /// created again.
    /// </summary>
    [Fact]
    public void A_next_segment_that_cannot_be_created_fails_the_append_alone_and_appends_resume_once_it_can()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == "next-segment.tmp" };
        var clock = new ManualTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero));
        JournalOptions options = JournalTestExtensions.Tiny(1024, clock);
        options.FileSystem = files;
        var acknowledged = new List<byte[]>();
        var tooMany = new IOException("Too many open files", 24);
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            files.CreateFailure = tooMany;
            StoreUnavailableException unavailable =
                AppendUntilRefused<StoreUnavailableException>(journal, acknowledged);
            Assert.IsNotType<StoreFullException>(unavailable);
            Assert.Same(tooMany, unavailable.InnerException);
            Assert.Contains("could not create its next segment file (Too many open files)", unavailable.Message,
                StringComparison.Ordinal);
            Assert.Same(tooMany, journal.SegmentUnavailable);
            Assert.Null(journal.DiskFull);

            // Not faulted: a sync works and what was acknowledged reads back.
            journal.Sync();
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));

            // Within the retry interval an append that needs the segment fails at once, without trying.
            int opens = files.Opens;
            Assert.Throws<StoreUnavailableException>(() => journal.Append(JournalTestExtensions.Payload(2, 0, 300)));
            Assert.Equal(opens, files.Opens);

            // Files can be created again: the first try after the interval rotates, and appends go on.
            files.CreateFailure = null;
            clock.Advance(WriteAheadJournal.PreparationRetryInterval);
            AppendAcknowledged(journal, acknowledged, writer: 3, count: 6);

            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));
            Assert.Null(journal.SegmentUnavailable);
        }

        AssertReopensWithExactly(dir.Path, acknowledged);
    }

    /// <summary>
    /// The next segment was prepared before the process ran out of descriptors, and the rotation cannot open it: by
    /// its prepared name (before the rename) or by its segment name (after it, when the file must be renamed back).
    /// Either way the active segment was not sealed, the append fails alone, no segment file is left that the journal
    /// does not write to, and appends go on once files can be opened again.
    /// </summary>
    [Theory]
    [InlineData("next-segment.tmp")]
    [InlineData(".journal")]
    public void A_prepared_segment_that_cannot_be_opened_at_rotation_fails_the_append_alone(string failingFile)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = path => path.EndsWith(failingFile, StringComparison.Ordinal),
        };
        var clock = new ManualTimeProvider(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero));
        JournalOptions options = JournalTestExtensions.Tiny(1024, clock);
        options.FileSystem = files;
        var acknowledged = new List<byte[]>();
        string journalFolder = dir.Path;
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            string[] segmentsBefore = Directory.GetFiles(journalFolder, "*.journal");
            files.OpenExistingFailure = new IOException("Too many open files", 24);
            StoreUnavailableException unavailable =
                AppendUntilRefused<StoreUnavailableException>(journal, acknowledged);
            Assert.Equal(segmentsBefore, Directory.GetFiles(journalFolder, "*.journal"));
            Assert.True(File.Exists(Path.Combine(journalFolder, "next-segment.tmp")));
            Assert.Same(files.OpenExistingFailure, journal.SegmentUnavailable);
            journal.Sync();
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));

            files.OpenExistingFailure = null;
            clock.Advance(WriteAheadJournal.PreparationRetryInterval);
            AppendAcknowledged(journal, acknowledged, writer: 2, count: 6);

            Assert.True(Directory.GetFiles(journalFolder, "*.journal").Length > segmentsBefore.Length);
            Assert.Null(journal.SegmentUnavailable);
        }

        AssertReopensWithExactly(dir.Path, acknowledged);
    }

    [Fact]
    public void A_full_disk_when_a_rotation_names_its_new_segment_keeps_records_out_of_it_until_the_mark_is_written()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == "journal.state.tmp" };
        JournalOptions options = JournalTestExtensions.Tiny(1024);
        options.FileSystem = files;
        var acknowledged = new List<byte[]>();
        using (var journal = WriteAheadJournal.Open(dir.Path, options))
        {
            for (int i = 0; i < 2; i++)
            {
                byte[] entry = JournalTestExtensions.Payload(1, i, 300);
                journal.Append(entry);
                journal.Sync();
                acknowledged.Add(entry);
            }

            files.NoSpace = true;
            var full = Assert.Throws<StoreFullException>(()
                => journal.Append(JournalTestExtensions.Payload(2, 0, 300)));
            Assert.IsType<IOException>(full.InnerException);
            Assert.Contains("mark", full.Message, StringComparison.Ordinal);
            Assert.Equal(2, Directory.GetFiles(dir.Path, "*.journal").Length); // the rotation itself happened
            Assert.True(JournalDurableMark.TryRead(PhysicalFileSystem.Instance, dir.Path, out var mark));
            Assert.Equal(1, mark.SegmentFirstSequence);

            // While the mark cannot be written, no record goes into the segment it does not name.
            Assert.Throws<StoreFullException>(() => journal.Append(JournalTestExtensions.Payload(2, 1, 300)));
            journal.Sync();
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));

            files.NoSpace = false;
            byte[] after = JournalTestExtensions.Payload(3, 0, 300);
            Assert.Equal(3, journal.Append(after));
            journal.Sync();
            acknowledged.Add(after);
            Assert.True(JournalDurableMark.TryRead(PhysicalFileSystem.Instance, dir.Path, out mark));
            Assert.Equal(3, mark.SegmentFirstSequence);
        }

        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            Assert.Equal(acknowledged, journal.ReadAll(1).Select(e => e.Data));
        }
    }

    [Fact]
    public void The_purge_watermark_and_the_durable_mark_are_read_from_a_folder_that_refuses_writes()
    {
        // What the readers of a store's files (a backup, an export, a feed) read of the journal's own files: on a
        // read-only mount or snapshot an open for writing fails, so they open for reading.
        using var dir = new TempDirectory();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024)))
        {
            for (int i = 0; i < 10; i++)
            {
                journal.Append(JournalTestExtensions.Payload(1, i, 300));
                journal.Sync();
            }

            Assert.True(journal.Purge(5) > 0);
        }

        var readOnly = new FaultInjectingFileSystem
        {
            Matches = static _ => true,
            WritableOpenFailure = new IOException("Read-only file system"),
        };
        (long firstRetained, long purgedTimestamp) = WriteAheadJournal.ReadPurgeWatermark(readOnly, dir.Path);
        Assert.InRange(firstRetained, 2, 5);
        Assert.NotEqual(0, purgedTimestamp);
        Assert.True(JournalDurableMark.TryRead(readOnly, dir.Path, out JournalDurableMark mark));
        Assert.True(mark.SegmentFirstSequence >= firstRetained);
        Assert.Equal(2, readOnly.Opens);
    }

    /// <summary>Appends 300-byte entries, each synced and added to <paramref name="acknowledged"/>, until one is
    /// refused (within 20); returns the refusal, which must be a <typeparamref name="TRefusal"/>.</summary>
    private static TRefusal AppendUntilRefused<TRefusal>(WriteAheadJournal journal, List<byte[]> acknowledged)
        where TRefusal : Exception
    {
        for (int i = 0; i < 20; i++)
        {
            byte[] entry = JournalTestExtensions.Payload(1, i, 300);
            Exception? error = Record.Exception(() => journal.Append(entry));
            if (error is not null)
            {
                return error as TRefusal ?? throw new Xunit.Sdk.XunitException(error.ToString());
            }

            journal.Sync();
            acknowledged.Add(entry);
        }

        throw new Xunit.Sdk.XunitException("no append was refused in 20 tries");
    }

    /// <summary>Appends <paramref name="count"/> 300-byte entries of <paramref name="writer"/>, each synced and added
    /// to <paramref name="acknowledged"/>.</summary>
    private static void AppendAcknowledged(WriteAheadJournal journal, List<byte[]> acknowledged, int writer, int count)
    {
        for (int i = 0; i < count; i++)
        {
            byte[] entry = JournalTestExtensions.Payload(writer, i, 300);
            journal.Append(entry);
            journal.Sync();
            acknowledged.Add(entry);
        }
    }

    /// <summary>Reopens the journal in <paramref name="folder"/>: it holds exactly <paramref name="acknowledged"/>,
    /// numbered from 1 without a gap.</summary>
    private static void AssertReopensWithExactly(string folder, List<byte[]> acknowledged)
    {
        using var journal = WriteAheadJournal.Open(folder, JournalTestExtensions.Tiny(1024));
        var all = journal.ReadAll(1);
        Assert.Equal(acknowledged, all.Select(e => e.Data));
        Assert.Equal(Enumerable.Range(1, acknowledged.Count).Select(i => (long)i), all.Select(e => e.Sequence));
    }
}
