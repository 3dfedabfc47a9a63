using Folio.Journal;
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

    [Fact]
    public void A_failure_while_rotating_faults_the_journal_without_losing_committed_entries()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem { Matches = static path
            => path.EndsWith(".tmp", StringComparison.Ordinal) };
        var options = JournalTestExtensions.Tiny(1024);
        options.FileSystem = files;
        using var journal = WriteAheadJournal.Open(dir.Path, options);
        journal.Append(new byte[500]);
        journal.Sync();
        files.Arm(FileFault.WriteFails);
        Assert.Throws<StoreFaultedException>(() => journal.Append(new byte[700]));
        Assert.Equal(1, journal.CommittedSequence);
        Assert.Single(journal.ReadAll(1));
    }
}
