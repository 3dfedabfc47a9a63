using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>Syncs in flight at once (the merger's pipeline): separate handles, ordered publication, sealed
/// files.</summary>
public sealed class JournalSyncTests
{
    [Fact]
    public void Concurrent_syncs_of_a_segment_run_on_separate_file_handles_and_publish_as_a_monotonic_maximum()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        using var journal = OpenJournal(dir, files);

        journal.Append("one"u8);
        Assert.True(journal.TryBeginSync(out JournalSyncPoint first));
        int opensBefore = files.Opens;
        journal.Append("two"u8);
        Assert.True(journal.TryBeginSync(out JournalSyncPoint second));

        // Each sync in flight has a handle of its own (Linux reports a writeback error once per open file description:
        // on one shared handle, one sync could consume the error meant for the other's pages).
        Assert.NotEqual(first.Slot, second.Slot);
        Assert.NotSame(first.Segment.SyncFile(first.Slot), second.Segment.SyncFile(second.Slot));
        Assert.Equal(opensBefore + 1, files.Opens);
        Assert.Equal((1, 2), (first.Sequence, second.Sequence));

        // Completed and published out of order, the committed sequence only grows.
        journal.CompleteSync(second);
        journal.CompleteSync(first);
        journal.PublishSync(second);
        Assert.Equal(2, journal.CommittedSequence);
        journal.PublishSync(first);
        Assert.Equal(2, journal.CommittedSequence);
        Assert.Equal(["one", "two"], journal.ReadAll(1).Select(e => System.Text.Encoding.UTF8.GetString(e.Data)));

        // A slot given back is reused: no new handle for the next sync.
        journal.Append("three"u8);
        Assert.True(journal.TryBeginSync(out JournalSyncPoint third));
        Assert.Equal(first.Slot, third.Slot);
        journal.CompleteSync(third);
        journal.PublishSync(third);
        Assert.Equal(opensBefore + 1, files.Opens);
    }

    [Fact]
    public void A_segment_sealed_while_a_sync_of_it_is_in_flight_keeps_its_files_until_that_sync_ends()
    {
        using var dir = new TempDirectory();
        var options = JournalTestExtensions.Tiny(1024);
        using var journal = WriteAheadJournal.Open(dir.Path, options);
        journal.Append(new byte[400]);
        Assert.True(journal.TryBeginSync(out JournalSyncPoint inFlight));

        // Two more records do not fit: the segment is sealed (synced on a slot of its own) and the next one started.
        journal.Append(new byte[400]);
        journal.Append(new byte[400]);
        Assert.True(journal.SegmentCount >= 2);

        journal.CompleteSync(inFlight); // its handle was not closed under it
        journal.PublishSync(inFlight);
        journal.Sync();
        Assert.Equal(3, journal.CommittedSequence);
        Assert.Throws<ObjectDisposedException>(() => inFlight.Segment.File); // closed once no sync was using it
        Assert.Equal(3, journal.ReadAll(1).Count);
    }

    [Fact]
    public void A_failed_sync_in_flight_faults_the_journal_and_publishes_nothing()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        using var journal = OpenJournal(dir, files);
        journal.Append("one"u8);
        Assert.True(journal.TryBeginSync(out JournalSyncPoint point));
        files.Arm(FileFault.SyncFails);

        var error = Assert.Throws<StoreFaultedException>(() => journal.CompleteSync(point));
        Assert.IsType<IOException>(error.InnerException);
        Assert.Equal(0, journal.CommittedSequence);
        Assert.Throws<StoreFaultedException>(() => journal.TryBeginSync(out _));
        Assert.Throws<StoreFaultedException>(() => journal.Append("two"u8));
    }

    /// <summary>A journal of 64 KiB segments on <paramref name="files"/>.</summary>
    private static WriteAheadJournal OpenJournal(TempDirectory dir, FaultInjectingFileSystem files)
    {
        var options = JournalTestExtensions.Tiny(1 << 16);
        options.FileSystem = files;
        return WriteAheadJournal.Open(dir.Path, options);
    }
}
