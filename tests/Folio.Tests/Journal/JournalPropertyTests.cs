using FsCheck;
using FsCheck.Xunit;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// Random programs of appends, syncs, clock moves, reopens, purges, reads (by sequence and by time) and a disk that
/// fills and empties against an in-memory model; the journal must agree with the model after every step. Tiny
/// segments force many rotations. Readers must return exactly the model's entries up to the committed sequence, which
/// covers every synced entry. While the disk is full, an append that needs a new segment (or the mark naming one) is
/// refused with <see cref="StoreFullException"/> and changes nothing, and nothing faults the journal.
/// </summary>
public sealed class JournalPropertyTests
{
    private static readonly DateTimeOffset s_start = new(2026, 6, 1, 0, 0, 0, TimeSpan.Zero);

    [Property(MaxTest = 150, Arbitrary = [typeof(JournalPropertyTests)])]
    public void Journal_agrees_with_a_simple_model(int[] program)
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(s_start);
        var options = JournalTestExtensions.Tiny(1024, clock);
        var files = new FaultInjectingFileSystem();
        string[] fullFor = []; // the files that cannot grow while the disk is full
        DateTimeOffset lastFailedTry = DateTimeOffset.MinValue;
        files.Matches = path => Array.IndexOf(fullFor, Path.GetFileName(path)) >= 0
            || (path.EndsWith(".journal", StringComparison.Ordinal) && Array.IndexOf(fullFor, "*.journal") >= 0);
        options.FileSystem = files;
        var model = new List<(long Sequence, long Ticks, byte[] Data)>();
        int pending = 0;
        long firstAvailable = 1;
        var journal = WriteAheadJournal.Open(dir.Path, options);
        try
        {
            foreach (int op in program)
            {
                int argument = (op >>> 4) & 0xFFFF;
                switch (op & 0xF)
                {
                    case 0 or 1 or 2 or 3:
                        {
                            int count = 1 + (argument % 4);
                            var entries = new ReadOnlyMemory<byte>[count];
                            long first = model.Count + 1;
                            for (int i = 0; i < count; i++)
                            {
                                entries[i] = JournalTestExtensions.Payload(argument, first + i,
                                    (argument * (i + 1)) % 120);
                            }

                            long appended;
                            int writes = files.Writes;
                            try
                            {
                                appended = journal.Append(entries);
                            }
                            catch (StoreFullException full) when (files.NoSpace
                                || clock.GetUtcNow() - lastFailedTry < WriteAheadJournal.PreparationRetryInterval)
                            {
                                // Refused while the disk is full, or within the retry interval after a try that found
                                // it full (a try writes; a refusal within the interval writes nothing).
                                Assert.IsType<IOException>(full.InnerException);
                                Assert.NotNull(journal.DiskFull);
                                if (files.Writes != writes)
                                {
                                    lastFailedTry = clock.GetUtcNow();
                                }

                                break;
                            }

                            Assert.Equal(first, appended);
                            long ticks = clock.GetUtcNow().UtcTicks;
                            for (int i = 0; i < count; i++)
                            {
                                model.Add((first + i, ticks, entries[i].ToArray()));
                            }

                            pending += count;
                            break;
                        }

                    case 4 or 5:
                        journal.Sync();
                        pending = 0;
                        break;
                    case 6:
                        clock.Advance(TimeSpan.FromSeconds(argument % 10));
                        break;
                    case 7:
                        // Appended records reached the file (only a crash can tear them), so reopen keeps them.
                        journal.Dispose();
                        journal = WriteAheadJournal.Open(dir.Path, options);
                        Assert.Equal(0, journal.Recovery.TruncatedBytes);
                        pending = 0;
                        break;
                    case 8:
                        {
                            journal.Sync();
                            pending = 0;
                            long before = model.Count == 0 ? 1 : 1 + (argument % model.Count);
                            try
                            {
                                journal.Purge(before);
                            }
                            catch (IOException) when (files.NoSpace
                                && Array.IndexOf(fullFor, "journal.purged.tmp") >= 0)
                            {
                                // Its watermark, written first, found the disk full: nothing was purged.
                            }

                            Assert.InRange(journal.FirstSequence, firstAvailable, Math.Max(before, firstAvailable));
                            firstAvailable = journal.FirstSequence;
                            break;
                        }

                    case 9 or 10 or 11:
                        {
                            long from = 1 + (argument % (model.Count + 2));
                            if (from < firstAvailable)
                            {
                                Assert.Throws<JournalPositionPurgedException>(() => journal.OpenReader(from));
                                break;
                            }

                            var expected = model.Where(e => e.Sequence >= from
                                && e.Sequence <= journal.CommittedSequence).ToList();
                            AssertSame(expected, journal.ReadAll(from));
                            break;
                        }

                    case 12:
                        // The disk fills (for the next segment, the mark naming it, the purge watermark, the holes
                        // of the segments, or all of them) or empties again.
                        files.NoSpace = !files.NoSpace;
                        fullFor = (argument % 5) switch
                        {
                            0 => ["next-segment.tmp"],
                            1 => ["journal.state.tmp"],
                            2 => ["journal.purged.tmp"],
                            3 => ["*.journal"],
                            _ => ["next-segment.tmp", "journal.state.tmp", "journal.purged.tmp", "*.journal"],
                        };
                        break;
                    default:
                        {
                            var at = s_start.AddSeconds(argument % 200);
                            var expected = model.Where(e => e.Sequence >= firstAvailable
                                && e.Sequence <= journal.CommittedSequence && e.Ticks >= at.UtcTicks).Take(3).ToList();
                            using var reader = journal.OpenReader(at);
                            var actual = new List<(long, long, byte[])>();
                            while (actual.Count < 3 && reader.TryRead(out JournalEntry entry))
                            {
                                actual.Add((entry.Sequence, entry.TimestampTicks, entry.Data.ToArray()));
                            }

                            AssertSame(expected, actual);
                            break;
                        }
                }

                // Synced entries are committed; a rotation also commits (it syncs the sealed segment).
                Assert.InRange(journal.CommittedSequence, model.Count - pending, model.Count);
            }
        }
        finally
        {
            journal.Dispose();
        }
    }

    /// <summary>Programs of up to 80 steps; appends are the most common step.</summary>
    public static Arbitrary<int[]> Programs() => OperationPrograms.ShrinkingBySteps(80);

    private static void AssertSame(List<(long Sequence, long Ticks, byte[] Data)> expected,
        List<(long Sequence, long Timestamp, byte[] Data)> actual)
    {
        Assert.Equal(expected.Count, actual.Count);
        for (int i = 0; i < expected.Count; i++)
        {
            Assert.Equal(expected[i].Sequence, actual[i].Sequence);
            Assert.Equal(expected[i].Ticks, actual[i].Timestamp);
            Assert.Equal(expected[i].Data, actual[i].Data);
        }
    }
}
