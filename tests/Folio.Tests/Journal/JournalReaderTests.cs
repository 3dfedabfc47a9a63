using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

public sealed class JournalReaderTests
{
    private static readonly DateTimeOffset s_start = new(2026, 3, 1, 12, 0, 0, TimeSpan.Zero);

    /// <summary>
    /// Records from a few bytes to several index strides, some sharing a timestamp, over several segments: a seek to
    /// any time (exact record times, times between records, before the first and after the last) starts at the first
    /// entry of the first record at or after it, whether the index names that record directly or the reader walks to
    /// it.
    /// </summary>
    [Theory]
    [InlineData(11)]
    [InlineData(12)]
    public void Seeking_by_time_lands_on_the_first_record_at_or_after_it_with_records_of_every_size(int seed)
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(s_start);
        var random = new Random(seed);
        using var journal = WriteAheadJournal.Open(dir.Path,
            new JournalOptions { TimeProvider = clock, SegmentSize = 64 * 1024 });
        var records = new List<(long FirstSequence, long Timestamp)>();
        long sequence = 1;
        for (int r = 0; r < 400; r++)
        {
            int entries = 1 + random.Next(4);
            int size = random.Next(3) switch { 0 => 8, 1 => 300, _ => 1500 + random.Next(3000) };
            var payloads = Enumerable.Range(0, entries)
                .Select(e => (ReadOnlyMemory<byte>)JournalTestExtensions.Payload(seed, sequence + e, size)).ToArray();
            records.Add((sequence, clock.GetUtcNow().UtcTicks));
            journal.Append(payloads);
            sequence += entries;
            if (random.Next(4) != 0)
            {
                clock.Advance(TimeSpan.FromMilliseconds(1 + random.Next(3))); // else the next record shares this time
            }
        }

        journal.Sync();
        Assert.True(journal.SegmentCount > 3);
        var probes = records.SelectMany(r => new[] { r.Timestamp, r.Timestamp + 1, r.Timestamp - 1 })
            .Append(long.MinValue / 2).Append(clock.GetUtcNow().UtcTicks + 1);
        foreach (long ticks in probes)
        {
            using var reader = journal.OpenReader(
                new DateTimeOffset(Math.Max(ticks, DateTimeOffset.MinValue.UtcTicks), TimeSpan.Zero));
            int first = records.FindIndex(r => r.Timestamp >= ticks);
            if (first < 0)
            {
                Assert.False(reader.TryRead(out _));
                continue;
            }

            Assert.True(reader.TryRead(out JournalEntry entry));
            Assert.Equal(records[first].FirstSequence, entry.Sequence);
            Assert.Equal(records[first].Timestamp, entry.TimestampTicks);
            Assert.Equal(JournalTestExtensions.Payload(seed, entry.Sequence, entry.Data.Length), entry.Data.ToArray());
        }
    }

    [Fact]
    public void Seeking_by_time_finds_the_first_entry_at_or_after_it_across_segments()
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(s_start);
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024, clock));
        for (int i = 1; i <= 300; i++)
        {
            // Two entries per record, one record per second.
            journal.Append(JournalTestExtensions.Payload(1, (2 * i) - 1, 30),
                JournalTestExtensions.Payload(1, 2 * i, 30));
            clock.Advance(TimeSpan.FromSeconds(1));
        }

        journal.Sync();
        Assert.True(journal.SegmentCount > 10);

        for (int second = 0; second < 300; second += 7)
        {
            using var reader = journal.OpenReader(s_start.AddSeconds(second));
            Assert.True(reader.TryRead(out JournalEntry entry));
            Assert.Equal((2 * second) + 1, entry.Sequence);
            Assert.Equal(s_start.AddSeconds(second), entry.Timestamp);
        }

        using (var between = journal.OpenReader(s_start.AddSeconds(10.5)))
        {
            Assert.True(between.TryRead(out JournalEntry entry));
            Assert.Equal(23, entry.Sequence);
        }

        using (var before = journal.OpenReader(s_start.AddYears(-1)))
        {
            Assert.True(before.TryRead(out JournalEntry entry));
            Assert.Equal(1, entry.Sequence);
        }

        using (var after = journal.OpenReader(s_start.AddYears(1)))
        {
            Assert.False(after.TryRead(out _));
            Assert.Equal(601, after.NextSequence);
            journal.Append("later"u8);
            journal.Sync();
            Assert.True(after.TryRead(out JournalEntry entry));
            Assert.Equal(601, entry.Sequence);
        }
    }

    [Fact]
    public async Task A_tailing_reader_wakes_on_commit_and_never_sees_uncommitted_entries()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(2048));
        using var reader = journal.OpenReader(1);
        ValueTask<bool> waiting = reader.WaitToReadAsync();
        Assert.False(waiting.IsCompleted);

        journal.Append("one"u8);
        await Task.Delay(50);
        Assert.False(waiting.IsCompleted, "an appended but unsynced entry is not visible");
        Assert.False(reader.TryRead(out _));

        journal.Sync();
        Assert.True(await waiting.AsTask().WaitAsync(TestDeadline.Hang));
        Assert.True(reader.TryRead(out JournalEntry entry));
        Assert.Equal("one"u8.ToArray(), entry.Data.ToArray());
        Assert.False(reader.TryRead(out _));

        using var cancel = new CancellationTokenSource(50);
        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () => await reader.WaitToReadAsync(cancel.Token));

        ValueTask<bool> last = reader.WaitToReadAsync();
        journal.Dispose();
        Assert.False(await last.AsTask().WaitAsync(TestDeadline.Hang));
        Assert.Throws<ObjectDisposedException>(() => reader.TryRead(out _));
    }

    /// <summary>
    /// The thread that publishes a commit is usually a caller's (the first waiter commits) and goes back to that
    /// caller's code, which may block: a tailing reader's wake-up must not wait in that thread's local queue.
    /// </summary>
    [Fact]
    public async Task A_tailing_reader_wakes_when_the_thread_that_published_the_commit_blocks_right_after()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(2048));
        using var reader = journal.OpenReader(1);
        ValueTask<bool> waiting = reader.WaitToReadAsync();
        Assert.False(waiting.IsCompleted);

        Assert.True(await LocalQueueTrap.RunAsync(() =>
        {
            journal.Append("one"u8);
            journal.Sync();
        }, () => waiting.IsCompleted), "the reader's wake-up waited in the blocked publisher's local queue");
        Assert.True(await waiting);
        Assert.True(reader.TryRead(out JournalEntry entry));
        Assert.Equal(1, entry.Sequence);
    }

    [Fact]
    public void Reader_survives_many_rotations_while_writer_appends()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        using var reader = journal.OpenReader(1);
        long expected = 1;
        for (int i = 1; i <= 2000; i++)
        {
            journal.Append(JournalTestExtensions.Payload(3, i, i % 90));
            if (i % 3 == 0)
            {
                journal.Sync();
                while (reader.TryRead(out JournalEntry entry))
                {
                    Assert.Equal(expected, entry.Sequence);
                    Assert.Equal(JournalTestExtensions.Payload(3, expected, (int)(expected % 90)),
                        entry.Data.ToArray());
                    expected++;
                }
            }
        }

        Assert.True(journal.SegmentCount > 100);
        Assert.Equal(1999, expected);
    }

    [Fact]
    public void A_purged_position_throws_and_a_reader_inside_a_purged_segment_finishes_it()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        for (int i = 1; i <= 100; i++)
        {
            journal.Append(JournalTestExtensions.Payload(4, i, 100));
        }

        journal.Sync();
        using var inside = journal.OpenReader(1);
        Assert.True(inside.TryRead(out _));
        using var notStarted = journal.OpenReader(2);

        Assert.True(journal.Purge(60) > 0);
        long first = journal.FirstSequence;
        Assert.InRange(first, 2, 60);

        var purged = Assert.Throws<JournalPositionPurgedException>(() => journal.OpenReader(1));
        Assert.Equal(1, purged.RequestedSequence);
        Assert.Equal(first, purged.FirstAvailableSequence);

        // Opened before the purge but not yet inside a segment: purged, not wrong data.
        Assert.Throws<JournalPositionPurgedException>(() => notStarted.TryRead(out _));

        // Inside segment 1 when it was purged: reads to its end, then finds segment 2 gone too.
        long next = 2;
        var error = Record.Exception(() =>
        {
            while (inside.TryRead(out JournalEntry entry))
            {
                Assert.Equal(next, entry.Sequence);
                Assert.Equal(JournalTestExtensions.Payload(4, next, 100), entry.Data.ToArray());
                next++;
            }
        });

        if (next < first)
        {
            Assert.IsType<JournalPositionPurgedException>(error);
        }
        else
        {
            Assert.Null(error);
            Assert.Equal(101, next);
        }

        using var current = journal.OpenReader(first);
        Assert.Equal(101 - first, journal.ReadAll(first).Count);
    }

    [Fact]
    public void Holds_keep_what_they_hold_move_forward_and_a_bounded_hold_lapses_past_its_bound()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        for (int i = 1; i <= 100; i++)
        {
            journal.Append(JournalTestExtensions.Payload(4, i, 100));
        }

        journal.Sync();
        Assert.True(journal.SegmentCount > 8, $"many segments: {journal.SegmentCount}");
        using JournalRetention backup = journal.Retain(30); // unbounded
        using JournalRetention feed = journal.Retain(10, maxHeldBytes: 1 << 20);

        // Both holds keep their first entry: only segments wholly before 10 go.
        Assert.Equal(0, journal.HeldBytes);
        journal.Purge(90);
        Assert.InRange(journal.FirstSequence, 2, 10);
        Assert.True(journal.HeldBytes > 1024, $"held: {journal.HeldBytes}");
        using (JournalReader reader = journal.OpenReader(10))
        {
            Assert.True(reader.TryRead(out JournalEntry entry));
            Assert.Equal(10, entry.Sequence);
        }

        // The feed reads on: the backup's hold is now the oldest.
        feed.Advance(50);
        feed.Advance(40); // never backwards
        Assert.Equal(50, feed.FromSequence);
        journal.Purge(90);
        Assert.InRange(journal.FirstSequence, 11, 30);
        Assert.False(feed.IsLapsed);

        // Without the backup, the feed holds from 50; a bound smaller than what it holds lapses it.
        backup.Dispose();
        backup.Dispose(); // idempotent
        using JournalRetention tight = journal.Retain(60, maxHeldBytes: 1);
        journal.Purge(90);
        Assert.True(tight.IsLapsed);
        Assert.False(feed.IsLapsed);
        Assert.Equal(1, journal.LapsedHolds);
        Assert.InRange(journal.FirstSequence, 31, 50);

        // Released, the feed holds nothing; a hold past its bound lapses, and the limit alone decides.
        feed.Dispose();
        using JournalRetention small = journal.Retain(journal.FirstSequence, maxHeldBytes: 1);
        journal.Purge(90);
        Assert.True(small.IsLapsed);
        Assert.Equal(2, journal.LapsedHolds);
        Assert.InRange(journal.FirstSequence, 51, 90);
        Assert.Equal(0, journal.HeldBytes);
        Assert.Equal(0, journal.Purge(journal.FirstSequence));
    }

    [Fact]
    public void Purge_by_time_removes_only_segments_entirely_older_than_the_time()
    {
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(s_start);
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024, clock));
        for (int i = 1; i <= 100; i++)
        {
            journal.Append(JournalTestExtensions.Payload(4, i, 100));
            clock.Advance(TimeSpan.FromMinutes(1));
        }

        journal.Sync();
        Assert.True(journal.Purge(s_start.AddMinutes(50)) > 0);
        long first = journal.FirstSequence;
        var oldest = journal.ReadAll(first)[0];
        Assert.True(oldest.Timestamp <= s_start.AddMinutes(50).UtcTicks, "nothing at or after the time was removed");
        Assert.True(first > 1);
        Assert.Equal(0, journal.Purge(s_start));
    }

    [Fact]
    public void Concurrent_first_readers_of_an_unindexed_segment_agree()
    {
        using var dir = new TempDirectory();
        using (var writer = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1L << 20)))
        {
            for (int i = 1; i <= 5000; i++)
            {
                writer.Append(JournalTestExtensions.Payload(6, i, 50));
            }

            writer.Sync();
        }

        // Reopened: no segment has an index yet; many readers race to build it.
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1L << 20));
        using var start = new Barrier(8);
        var failures = new System.Collections.Concurrent.ConcurrentQueue<Exception>();
        var threads = Enumerable.Range(0, 8).Select(t => new Thread(() =>
        {
            try
            {
                var random = new Random(t);
                start.SignalAndWait();
                for (int q = 0; q < 300; q++)
                {
                    long at = random.Next(1, 5001);
                    using var reader = journal.OpenReader(at);
                    for (int k = 0; k < 3 && at + k <= 5000; k++)
                    {
                        Assert.True(reader.TryRead(out JournalEntry entry));
                        Assert.Equal(at + k, entry.Sequence);
                        Assert.Equal(JournalTestExtensions.Payload(6, at + k, 50), entry.Data.ToArray());
                    }
                }
            }
            catch (Exception e)
            {
                failures.Enqueue(e);
            }
        })).ToList();
        threads.ForEach(t => t.Start());
        threads.ForEach(t => t.Join());
        Assert.Empty(failures);
    }

    [Fact]
    public void A_reader_can_start_past_the_end_and_waits_for_that_entry()
    {
        using var dir = new TempDirectory();
        using var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1024));
        using var reader = journal.OpenReader(3);
        journal.Append("1"u8);
        journal.Append("2"u8);
        journal.Sync();
        Assert.False(reader.TryRead(out _));
        journal.Append("3"u8);
        journal.Sync();
        Assert.True(reader.TryRead(out JournalEntry entry));
        Assert.Equal(3, entry.Sequence);
        Assert.Throws<ArgumentOutOfRangeException>(() => journal.OpenReader(0));
    }

    [Theory]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    public void Seeks_by_time_and_sequence_find_the_first_match_when_timestamps_are_skewed(int seed)
    {
        // Thousands of records with bursts of equal timestamps and long, irregular gaps: the index's interpolation
        // probes guess badly here and must still end at the right record (the binary search finishes the job).
        using var dir = new TempDirectory();
        var clock = new ManualTimeProvider(s_start);
        using var journal = WriteAheadJournal.Open(dir.Path,
            new JournalOptions { TimeProvider = clock, SegmentSize = 1 << 20 });
        var random = new Random(seed);
        var model = new List<(long Sequence, long Ticks)>();
        for (int r = 0; r < 6000; r++)
        {
            int gap = random.Next(10) switch { < 5 => 0, < 8 => random.Next(1, 5), < 9 => random.Next(1_000, 100_000), _
                => random.Next(10_000_000, 50_000_000) };
            clock.Advance(TimeSpan.FromTicks(gap));
            int count = 1 + random.Next(6);
            var entries = new ReadOnlyMemory<byte>[count];
            for (int i = 0; i < count; i++)
            {
                entries[i] = new byte[1 + random.Next(300)];
            }

            long first = journal.Append(entries);
            for (int i = 0; i < count; i++)
            {
                model.Add((first + i, clock.GetUtcNow().UtcTicks));
            }
        }

        journal.Sync();
        long lastTicks = model[^1].Ticks;
        for (int q = 0; q < 3000; q++)
        {
            long at = s_start.UtcTicks + random.NextInt64(-1_000, lastTicks - s_start.UtcTicks + 1_000);
            int expected = model.FindIndex(e => e.Ticks >= at);
            using JournalReader byTime = journal.OpenReader(new DateTimeOffset(at, TimeSpan.Zero));
            if (expected < 0)
            {
                Assert.False(byTime.TryRead(out _));
            }
            else
            {
                Assert.True(byTime.TryRead(out JournalEntry entry));
                Assert.Equal(model[expected].Sequence, entry.Sequence);
            }

            long sequence = 1 + random.NextInt64(model.Count);
            using JournalReader bySequence = journal.OpenReader(sequence);
            Assert.True(bySequence.TryRead(out JournalEntry read));
            Assert.Equal(sequence, read.Sequence);
            Assert.Equal(model[(int)sequence - 1].Ticks, read.TimestampTicks);
        }
    }
}
