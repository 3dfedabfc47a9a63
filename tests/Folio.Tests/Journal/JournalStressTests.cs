using System.Collections.Concurrent;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Journal;

/// <summary>
/// One writer on 1 KiB segments (a rotation every few records), eight tailing readers and a purger, for a bounded
/// time (3 s in CI; FOLIO_STRESS_SECONDS for long runs). Every reader must see a gap-free, in-order, byte-identical
/// sequence or a purged-position exception, and everything must finish (no deadlock).
/// </summary>
public sealed class JournalStressTests(ITestOutputHelper output)
{
    private const int Seed = 99;

    [Fact]
    public async Task Readers_see_gap_free_identical_entries_while_writer_rotates_and_purger_purges()
    {
        double seconds = StressDuration.Seconds(3);
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        using var stop = new CancellationTokenSource();
        var failures = new ConcurrentQueue<string>();
        long purgedExceptions = 0;
        long entriesRead = 0;

        // The writer and the purger get threads of their own: eight readers busy on the thread pool must not starve
        // the purger (with 1 KiB segments an unpurged journal grows by thousands of segments a second).
        var writer = Task.Factory.StartNew(() =>
        {
            var random = new Random(1);
            long sequence = 1;
            while (!stop.IsCancellationRequested)
            {
                int count = random.Next(1, 4);
                var group = new ReadOnlyMemory<byte>[count];
                for (int i = 0; i < count; i++)
                {
                    group[i] = JournalTestExtensions.Payload(Seed, sequence + i, Length(sequence + i));
                }

                if (journal.Append(group) != sequence)
                {
                    failures.Enqueue("writer got a wrong sequence");
                }

                sequence += count;
                if (random.Next(3) == 0)
                {
                    journal.Sync();
                }
            }

            journal.Sync();
        }, TaskCreationOptions.LongRunning);

        var readers = Enumerable.Range(0, 8).Select(r => Task.Run(async () =>
        {
            var random = new Random(r);
            long expected = Math.Max(journal.FirstSequence, journal.CommittedSequence - random.Next(0, 50));
            JournalReader? reader = null;
            try
            {
                while (true)
                {
                    try
                    {
                        reader ??= journal.OpenReader(Math.Max(expected, 1));
                        if (stop.IsCancellationRequested && expected > journal.CommittedSequence && writer.IsCompleted)
                        {
                            return;
                        }

                        using var wait = new CancellationTokenSource(TimeSpan.FromMilliseconds(200));
                        try
                        {
                            await reader.WaitToReadAsync(wait.Token);
                        }
                        catch (OperationCanceledException)
                        {
                            continue;
                        }

                        while (reader.TryRead(out JournalEntry entry))
                        {
                            if (entry.Sequence != expected)
                            {
                                failures.Enqueue($"reader {r}: got {entry.Sequence}, expected {expected}");
                                return;
                            }

                            if (!entry.Data.SequenceEqual(
                                JournalTestExtensions.Payload(Seed, expected, Length(expected))))
                            {
                                failures.Enqueue($"reader {r}: entry {expected} differs from what was appended");
                                return;
                            }

                            expected++;
                            Interlocked.Increment(ref entriesRead);
                        }
                    }
                    catch (JournalPositionPurgedException e)
                    {
                        // Legitimate: the purger removed what this reader was about to read. Jump to the oldest kept
                        // entry.
                        Interlocked.Increment(ref purgedExceptions);
                        if (e.FirstAvailableSequence <= expected)
                        {
                            failures.Enqueue(
                                $"reader {r}: purged exception for {expected} though " +
                                $"{e.FirstAvailableSequence} is kept");
                            return;
                        }

                        reader?.Dispose();
                        reader = null;
                        expected = journal.FirstSequence;
                    }
                }
            }
            finally
            {
                reader?.Dispose();
            }
        })).ToList();

        int maxSegments = 0;
        var purger = Task.Factory.StartNew(() =>
        {
            var random = new Random(7);
            while (!stop.IsCancellationRequested)
            {
                Thread.Sleep(random.Next(1, 20));
                maxSegments = Math.Max(maxSegments, journal.SegmentCount);
                journal.Purge(journal.CommittedSequence - random.Next(0, 400));
            }
        }, TaskCreationOptions.LongRunning);

        // Run for the configured time, and on a slow or busy machine (each 1 KiB segment costs several fsyncs) until
        // the readers have read enough to make the run count, within a minute (stopped from a thread of its own).
        using CancellationTokenSource stopper = DedicatedTimer.CancelAfter(
            TimeSpan.FromSeconds(seconds), () => Interlocked.Read(ref entriesRead) <= 1000, TimeSpan.FromSeconds(60));
        using CancellationTokenRegistration link = stopper.Token.UnsafeRegister(static state
            => ((CancellationTokenSource)state!).Cancel(), stop);
        Task all = Task.WhenAll(readers.Append(writer).Append(purger));
        Assert.Same(all, await Task.WhenAny(all, Task.Delay(TimeSpan.FromSeconds(seconds + 120))));
        await all;

        output.WriteLine(
            $"{journal.CommittedSequence} entries written, {entriesRead} read, {purgedExceptions} purged-position " +
            $"exceptions, {maxSegments} segments at most, {journal.SegmentCount} left, " +
            $"{GC.GetTotalMemory(false) >> 20} MiB managed, {Environment.WorkingSet >> 20} MiB working set");
        Assert.Empty(failures);
        Assert.True(Interlocked.Read(ref entriesRead) > 1000, $"readers read {entriesRead} entries");
        // The writer rotated while the readers read (the purger's last purge may leave only the active segment).
        Assert.True(maxSegments > 1, $"{maxSegments} segments at most");

        // Every purged segment's file was deleted once its last reader left.
        Assert.Equal(journal.SegmentCount, Directory.GetFiles(dir.Path, "*.journal").Length);
    }

    private static int Length(long sequence) => (int)(sequence * 31 % 150);
}
