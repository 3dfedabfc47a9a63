using FsCheck;
using FsCheck.Xunit;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// Random programs of appends, syncs, clock moves, reopens, purges and reads (by sequence and by time) against an
/// in-memory model; the journal must agree with the model after every step. Tiny segments force many rotations.
/// Readers must return exactly the model's entries up to the committed sequence, which covers every synced entry.
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

                            Assert.Equal(first, journal.Append(entries));
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
                            journal.Purge(before);
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
