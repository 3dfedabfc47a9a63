using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// Reading a store's change feed from its journal files (<see cref="DocumentChanges.ReadFilesAsync"/>, over
/// <see cref="JournalFollower"/>) while the store is open and writing: the same changes as the store's own feed, across
/// rotations; a record still being written is held back until complete; damage the writer has moved past is a
/// corruption; purged positions and missing stores are refused.
/// </summary>
public sealed class JournalFollowerTests
{
    [Fact]
    public async Task Reading_the_files_of_an_open_store_returns_what_its_own_feed_returns_across_rotations()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        await WriteHistoryAsync(store, 1000);
        Assert.True(Directory.GetFiles(Path.Combine(dir.Path, "journal"), "*.journal").Length > 3, "rotated");

        long last = store.LastCommittedSequence;
        List<DocumentChange> expected = await ToListAsync(store.Changes.ReadAsync(1, last));
        AssertSameChanges(expected, await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false)));

        long middle = last / 2;
        AssertSameChanges(expected.Where(c => c.Sequence >= middle).ToList(),
            await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, middle, follow: false)));
        Assert.Empty(await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, last + 1, follow: false)));
    }

    [Fact]
    public async Task A_follower_sees_every_commit_made_while_it_follows_in_order_and_stops_when_cancelled()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        await store.PutAsync("people", "first", "{\"n\":0}"u8.ToArray());
        using var stop = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        const int Writes = 600;
        var seen = new List<DocumentChange>();
        Task follow = Task.Run(async () =>
        {
            await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: true,
                stop.Token))
            {
                seen.Add(change);
                if (seen.Count == Writes + 1)
                {
                    await stop.CancelAsync();
                }
            }
        });

        Task[] writers = Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            for (int i = 0; i < Writes / 4; i++)
            {
                await store.PutAsync("people", $"w{w}-{i}", System.Text.Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
            }
        })).ToArray();
        await Task.WhenAll(writers);

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => follow);
        List<DocumentChange> expected = await ToListAsync(store.Changes.ReadAsync(1, store.LastCommittedSequence));
        AssertSameChanges(expected, seen);
    }

    [Fact]
    public async Task A_follower_keeps_following_while_the_store_closes_and_reopens()
    {
        using var dir = new TempDirectory();
        using var stop = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        await using (DocumentStore first = DocumentStore.Open(dir.Path, options))
        {
            await first.PutAsync("people", "start", "{}"u8.ToArray());
        }

        var seen = new List<DocumentChange>();
        const long Target = 1 + (3 * 150); // one commit, then three rounds of 150
        Task follow = Task.Run(async () =>
        {
            await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: true,
                stop.Token))
            {
                seen.Add(change);
                if (change.Sequence == Target)
                {
                    await stop.CancelAsync();
                }
            }
        });

        var expected = new List<DocumentChange>();
        for (int round = 0; round < 3; round++)
        {
            await using DocumentStore store = DocumentStore.Open(dir.Path, options);
            await WriteHistoryAsync(store, 150);
            if (round == 2)
            {
                Assert.Equal(Target, store.LastCommittedSequence);
                expected = await ToListAsync(store.Changes.ReadAsync(1, store.LastCommittedSequence));
            }
        }

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => follow);
        AssertSameChanges(expected, seen);
    }

    [Fact]
    public async Task A_follower_that_starts_ahead_of_the_writer_skips_to_its_sequence_across_rotations()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        await WriteHistoryAsync(store, 10);
        long from = store.LastCommittedSequence + 500; // several segments ahead of the newest one
        const int Writes = 800;
        long target = store.LastCommittedSequence + Writes;
        using var follower = new JournalFollower(Path.Combine(dir.Path, "journal"), from);
        var entries = new List<JournalEntryCopy>();
        Assert.Equal(0, follower.ReadAvailable(entries, 1024)); // positioned in today's newest segment

        int segmentsBefore = Directory.GetFiles(Path.Combine(dir.Path, "journal"), "*.journal").Length;
        await WriteHistoryAsync(store, Writes);
        Assert.True(Directory.GetFiles(Path.Combine(dir.Path, "journal"), "*.journal").Length > segmentsBefore + 2,
            "the writes rotated through several segments");
        while (follower.ReadAvailable(entries, 1024) > 0)
        {
        }

        Assert.Equal(from, entries[0].Sequence);
        Assert.Equal(target, entries[^1].Sequence);
        Assert.Equal(Enumerable.Range(0, (int)(target - from + 1)).Select(i => from + i),
            entries.Select(e => e.Sequence));
    }

    /// <summary>The follower found no complete record at the end of its segment and no file named after the next
    /// sequence; meanwhile the writer completed records in that segment and rotated, so the next file is named after
    /// those records. That later file once read as "the segment you need was purged" (a stress run's
    /// <see cref="JournalPositionPurgedException"/>); the follower reads on in its segment instead.</summary>
    [Fact]
    public void Records_completed_in_the_current_segment_before_the_writer_rotated_are_read_not_taken_for_a_purge()
    {
        using var dir = new TempDirectory();
        using WriteAheadJournal journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(8192));
        for (long i = 1; i <= 5; i++)
        {
            journal.Append(JournalTestExtensions.Payload(3, i, 100));
        }

        journal.Sync();
        using var follower = new JournalFollower(dir.Path, 1);
        var entries = new List<JournalEntryCopy>();
        Assert.Equal(5, follower.ReadAvailable(entries, 1000));
        Assert.Equal(1, journal.SegmentCount);

        long appended = 5;
        follower.AfterNextSegmentMissing = () =>
        {
            follower.AfterNextSegmentMissing = null;
            while (journal.SegmentCount == 1)
            {
                journal.Append(JournalTestExtensions.Payload(3, ++appended, 100)); // fills the segment, then rotates
            }

            journal.Sync();
        };

        entries.Clear();
        while (follower.ReadAvailable(entries, 1000) > 0)
        {
        }

        Assert.True(appended > 10, $"appended {appended}");
        Assert.Equal(Enumerable.Range(6, (int)appended - 5).Select(i => (long)i), entries.Select(e => e.Sequence));
        Assert.Equal(appended + 1, follower.NextSequence);
    }

    [Fact]
    public void A_read_stops_once_its_entries_hold_the_bytes_asked_for_and_says_more_follow()
    {
        using var dir = new TempDirectory();
        using WriteAheadJournal journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20));
        for (long i = 1; i <= 40; i++)
        {
            journal.Append(JournalTestExtensions.Payload(5, i, 20_000));
        }

        journal.Sync();
        using var follower = new JournalFollower(dir.Path, 1);
        var entries = new List<JournalEntryCopy>();
        var reads = new List<int>();
        while (true)
        {
            int before = entries.Count;
            int read = follower.ReadAvailable(entries, 1000, maxBytes: 100_000);
            Assert.Equal(entries.Count - before, read);
            if (read == 0)
            {
                Assert.False(follower.HitLimit);
                break;
            }

            reads.Add(read);
            Assert.True(follower.HitLimit || entries.Count == 40); // each read before the last stopped at its bytes
        }

        // Five entries of 20,000 bytes reach the 100,000 bytes of each read (records hold one entry each here).
        Assert.Equal(new[] { 5, 5, 5, 5, 5, 5, 5, 5 }, reads);
        Assert.Equal(Enumerable.Range(1, 40).Select(i => (long)i), entries.Select(e => e.Sequence));
        for (int i = 0; i < 40; i++)
        {
            Assert.Equal(JournalTestExtensions.Payload(5, i + 1, 20_000), entries[i].Data);
        }

        // By default a read takes up to 4 MiB: here, everything, and nothing is left.
        using var all = new JournalFollower(dir.Path, 1);
        entries.Clear();
        Assert.Equal(40, all.ReadAvailable(entries, 1000));
        Assert.False(all.HitLimit);
    }

    [Fact]
    public async Task A_follower_left_behind_by_a_purge_is_told_so_instead_of_waiting_forever()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        await WriteHistoryAsync(store, 10);
        using var follower = new JournalFollower(Path.Combine(dir.Path, "journal"), 1);
        var entries = new List<JournalEntryCopy>();
        Assert.Equal(10, follower.ReadAvailable(entries, 10)); // reading the first segment, which stays open

        await WriteHistoryAsync(store, 1000);
        await store.CheckpointAsync(); // purges the segments the checkpoint covers, the follower's next ones too
        long oldest = store.Changes.FirstSequence;
        Assert.True(oldest > 11, $"the checkpoint purged the segments after the follower's ({oldest})");

        var purged = Assert.Throws<JournalPositionPurgedException>(() =>
        {
            for (int i = 0; i < 1000; i++)
            {
                entries.Clear();
                follower.ReadAvailable(entries, 1024); // the rest of the open segment, then the gap
            }
        });
        Assert.True(purged.FirstAvailableSequence >= oldest, $"{purged.FirstAvailableSequence} >= {oldest}");
    }

    [Fact]
    public async Task Records_a_later_header_covers_come_without_a_sync_of_the_followers_own_and_the_tail_with_one()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = DurabilityMode.Durable;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        using var follower = new JournalFollower(Path.Combine(dir.Path, "journal"), 1);
        var entries = new List<JournalEntryCopy>();

        await store.PutAsync("people", "a", "{}"u8.ToArray());
        Assert.Equal(0, follower.ReadAvailable(entries, 1024, allowSync: false)); // no later header covers it yet
        await store.PutAsync("people", "b", "{}"u8.ToArray()); // written after the first one's fdatasync completed
        Assert.Equal(1, follower.ReadAvailable(entries, 1024, allowSync: false));
        Assert.Equal(1, entries[^1].Sequence);
        Assert.Equal(0, follower.SyncCount);
        Assert.Equal(1, follower.ReadAvailable(entries, 1024, allowSync: true)); // the tail: synced by the follower
        Assert.Equal(2, entries[^1].Sequence);
        Assert.Equal(OperatingSystem.IsLinux() ? 1 : 0, follower.SyncCount);

        // A follower polling while writers commit takes what the writer's syncs cover, and syncs only at the end.
        Task writers = Task.WhenAll(Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            for (int i = 0; i < 150; i++)
            {
                await store.PutAsync("people", $"w{w}-{i}", "{\"v\":1}"u8.ToArray());
            }
        })));
        while (!writers.IsCompleted)
        {
            follower.ReadAvailable(entries, 1024, allowSync: false);
        }

        await writers;
        while (follower.ReadAvailable(entries, 1024, allowSync: true) > 0)
        {
        }

        Assert.Equal(Enumerable.Range(1, 602).Select(i => (long)i), entries.Select(e => e.Sequence));
        Assert.Equal(OperatingSystem.IsLinux() ? 2 : 0, follower.SyncCount);
    }

    [Fact]
    public async Task A_record_still_being_written_is_held_back_until_it_is_complete()
    {
        using var dir = new TempDirectory();
        (string segment, List<(long Offset, int Length)> records) = await ClosedStoreWithRecordsAsync(dir.Path);
        (long lastOffset, int lastLength) = records[^1];
        byte[] whole = ReadBytes(segment, lastOffset, lastLength);

        // The last record half written: its second half still zero. A writer's durable mark never covers a record it
        // is writing: the clean close's mark goes.
        WriteBytes(segment, lastOffset + (lastLength / 2), new byte[lastLength - (lastLength / 2)]);
        File.Delete(Path.Combine(dir.Path, "journal", JournalDurableMark.FileName));
        List<DocumentChange> before = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        long lastSequence = before[^1].Sequence;

        using var stop = new CancellationTokenSource(TimeSpan.FromMinutes(1));
        var seen = new List<DocumentChange>();
        Task follow = Task.Run(async () =>
        {
            await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(dir.Path, lastSequence + 1,
                follow: true, stop.Token))
            {
                seen.Add(change);
                await stop.CancelAsync();
            }
        });

        await Task.Delay(300);
        Assert.Empty(seen); // nothing returned from the torn record
        WriteBytes(segment, lastOffset, whole); // the writer finishes it
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => follow);
        Assert.Single(seen);
        Assert.Equal(lastSequence + 1, seen[0].Sequence);

        List<DocumentChange> after = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        Assert.Equal(lastSequence + 1, after[^1].Sequence);
    }

    [Fact]
    public async Task The_first_record_of_a_segment_still_being_written_is_held_back_not_a_corruption()
    {
        using var dir = new TempDirectory();
        (string segment, List<(long Offset, int Length)> records) = await ClosedStoreWithRecordsAsync(dir.Path);
        (long firstOffset, int firstLength) = records[0];
        long end = records[^1].Offset + records[^1].Length;
        byte[] first = ReadBytes(segment, firstOffset, firstLength);

        // The segment as a writer that just rotated into it leaves it: its first record half written, nothing after,
        // and no durable mark covering it (the clean close's goes).
        WriteBytes(segment, firstOffset + (firstLength / 2), new byte[end - firstOffset - (firstLength / 2)]);
        File.Delete(Path.Combine(dir.Path, "journal", JournalDurableMark.FileName));
        List<DocumentChange> before = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        long lastSequence = before.Count > 0 ? before[^1].Sequence : 0;

        WriteBytes(segment, firstOffset, first); // the writer finishes it
        List<DocumentChange> after = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        Assert.Equal(lastSequence + 1, after[before.Count].Sequence);
    }

    [Fact]
    public async Task A_damaged_record_the_writer_has_written_past_is_a_corruption_not_the_end()
    {
        using var dir = new TempDirectory();
        (string segment, List<(long Offset, int Length)> records) = await ClosedStoreWithRecordsAsync(dir.Path);
        (long offset, int length) = records[records.Count / 2];
        FileDamage.FlipByte(segment, offset + length - 1, 0x10);

        var error = await Assert.ThrowsAsync<JournalCorruptedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false)));
        Assert.Contains(Path.GetFileName(segment), error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Damage_to_the_last_records_the_durable_mark_covers_is_a_corruption_not_a_torn_tail()
    {
        using var dir = new TempDirectory();
        (string segment, List<(long Offset, int Length)> records) = await ClosedStoreWithRecordsAsync(dir.Path);
        (long lastOffset, int lastLength) = records[^1];
        List<DocumentChange> whole = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        FileDamage.FlipByte(segment, lastOffset + lastLength - 1, 0x08); // nothing after it to tell it from a torn tail

        // The clean close's mark says the record was durable: the reader says so rather than end early.
        var error = await Assert.ThrowsAsync<JournalCorruptedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false)));
        Assert.Contains("durable mark", error.Message, StringComparison.Ordinal);

        // Past damage, the lost commits are the last record's, up to the mark.
        var damage = new List<(long From, long To)>();
        var entries = new List<JournalEntryCopy>();
        using (var follower = new JournalFollower(Path.Combine(dir.Path, "journal"), 1,
            (from, to, _) => damage.Add((from, to))))
        {
            while (follower.ReadAvailable(entries, 64) > 0)
            {
            }
        }

        long last = whole[^1].Sequence;
        Assert.Equal([(entries[^1].Sequence + 1, last)], damage);
        Assert.True(entries[^1].Sequence < last);

        // Without a mark, the same bytes are a torn tail: the end of the data.
        File.Delete(Path.Combine(dir.Path, "journal", JournalDurableMark.FileName));
        List<DocumentChange> torn = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        Assert.Equal(entries[^1].Sequence, torn[^1].Sequence);
    }

    [Fact]
    public async Task A_missing_segment_no_purge_removed_is_a_corruption_and_a_salvage_reads_past_it()
    {
        using var dir = new TempDirectory();
        await using (DocumentStore store = DocumentStore.Open(dir.Path,
            TestStoreOptions.KeepingJournal(TestStoreOptions.TinySegments())))
        {
            await WriteHistoryAsync(store, 600);
        }

        string journal = Path.Combine(dir.Path, "journal");
        string[] segments = Directory.GetFiles(journal, "*.journal").Order(StringComparer.Ordinal).ToArray();
        Assert.True(segments.Length >= 4, $"rotated ({segments.Length})");
        List<DocumentChange> whole = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        long First(int segment)
            => JournalFormat.TryParseSegmentFileName(Path.GetFileName(segments[segment]), out long first) ? first : 0;
        (long from, long to) = (First(2), First(3) - 1);
        File.Delete(segments[2]);

        // Not a purge: the watermark does not cover it, so the reader says damage, not "purged".
        var error = await Assert.ThrowsAsync<JournalCorruptedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false)));
        Assert.Contains($"sequences {from} to {to}", error.Message, StringComparison.Ordinal);
        await Assert.ThrowsAsync<JournalCorruptedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, from, follow: false)));

        // Past damage: the commits of the missing segment are reported once, before the entries after them, and a
        // reader that starts after them, or reads only before them, is told of nothing.
        foreach ((long start, bool reported) in new[] { (1L, true), (from + 1, true), (to + 1, false) })
        {
            var damage = new List<(long From, long To, int EntriesBefore)>();
            var entries = new List<JournalEntryCopy>();
            using var follower = new JournalFollower(journal, start,
                (first, last, _) => damage.Add((first, last, entries.Count)));
            while (follower.ReadAvailable(entries, 64) > 0)
            {
            }

            Assert.Equal(reported ? [(Math.Max(start, from), to)] : [],
                damage.Select(d => (d.From, d.To)).ToList());
            List<long> expected = whole.Select(c => c.Sequence).Distinct()
                .Where(sequence => sequence >= start && (sequence < from || sequence > to)).ToList();
            Assert.Equal(expected, entries.Select(e => e.Sequence).ToList());
            if (reported)
            {
                Assert.All(entries.Take(damage[0].EntriesBefore), e => Assert.True(e.Sequence < from));
            }
        }
    }

    [Fact]
    public async Task A_reader_that_starts_after_a_damaged_record_passes_it_on_its_header_alone()
    {
        using var dir = new TempDirectory();
        (string segment, List<(long Offset, int Length)> records) = await ClosedStoreWithRecordsAsync(dir.Path);
        List<DocumentChange> whole = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false));
        (long offset, int length) = records[records.Count / 2];
        FileDamage.FlipByte(segment, offset + length - 1, 0x10); // in its payload: the header stays whole

        // Its commits and the ones before it are history this reader skips, as the store's open skips what its
        // checkpoint holds: the damage is not its to report.
        long after = whole.Where(c => c.Sequence > 0).Select(c => c.Sequence).Distinct().Order()
            .First(sequence => sequence > DamagedSequences(segment, offset).Last);
        List<DocumentChange> read = await ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, after, follow: false));
        AssertSameChanges(whole.Where(c => c.Sequence >= after).ToList(), read);

        // A reader that starts at or before its commits meets it.
        await Assert.ThrowsAsync<JournalCorruptedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, DamagedSequences(segment, offset).First,
                follow: false)));
    }

    /// <summary>The first and last sequence of the record at <paramref name="offset"/> of a segment, by its
    /// header.</summary>
    private static (long First, long Last) DamagedSequences(string segment, long offset)
    {
        Assert.True(JournalFormat.TryReadRecordHeader(File.ReadAllBytes(segment).AsSpan((int)offset),
            out JournalFormat.RecordHeader header));
        return (header.FirstSequence, header.FirstSequence + header.EntryCount - 1);
    }

    [Fact]
    public async Task A_purged_position_a_bad_sequence_and_a_missing_store_are_refused()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(dir.Path, TestStoreOptions.TinySegments());
        await WriteHistoryAsync(store, 400);
        await store.CheckpointAsync();
        long oldest = store.Changes.FirstSequence;
        Assert.True(oldest > 1, "the checkpoint let the journal purge its oldest segments");

        var purged = await Assert.ThrowsAsync<JournalPositionPurgedException>(() =>
            ToListAsync(DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: false)));
        Assert.True(purged.FirstAvailableSequence >= oldest, $"{purged.FirstAvailableSequence} >= {oldest}");
        List<DocumentChange> rest = await ToListAsync(
            DocumentChanges.ReadFilesAsync(dir.Path, purged.FirstAvailableSequence, follow: false));
        Assert.Equal(store.LastCommittedSequence, rest[^1].Sequence);

        Assert.Throws<ArgumentOutOfRangeException>(() => DocumentChanges.ReadFilesAsync(dir.Path, 0, follow: false));
        Assert.Throws<DirectoryNotFoundException>(() =>
            DocumentChanges.ReadFilesAsync(Path.Combine(dir.Path, "nothing"), 1, follow: false));
    }

    /// <summary>Puts (several documents per batch now and then) and deletes: <paramref name="commits"/>
    /// commits.</summary>
    private static async Task WriteHistoryAsync(DocumentStore store, int commits)
    {
        for (int i = 0; i < commits; i++)
        {
            if (i % 7 == 3)
            {
                await store.DeleteAsync("people", $"p{i - 1}");
            }
            else if (i % 5 == 0)
            {
                string pad = new('x', 200);
                await store.WriteAsync(new CommitBatch()
                    .Put("people", $"p{i}", System.Text.Encoding.UTF8.GetBytes($"{{\"i\":{i},\"pad\":\"{pad}\"}}"))
                    .Put("orders", $"o{i}", System.Text.Encoding.UTF8.GetBytes($"{{\"i\":{i}}}")));
            }
            else
            {
                await store.PutAsync("people", $"p{i}",
                    System.Text.Encoding.UTF8.GetBytes($"{{\"i\":{i},\"pad\":\"{new string('y', 300)}\"}}"));
            }
        }
    }

    private static void AssertSameChanges(List<DocumentChange> expected, List<DocumentChange> actual)
    {
        Assert.Equal(expected.Count, actual.Count);
        for (int i = 0; i < expected.Count; i++)
        {
            Assert.Equal(expected[i].Sequence, actual[i].Sequence);
            Assert.Equal(expected[i].Timestamp, actual[i].Timestamp);
            Assert.Equal(expected[i].Collection, actual[i].Collection);
            Assert.Equal(expected[i].Id, actual[i].Id);
            Assert.Equal(expected[i].Kind, actual[i].Kind);
            Assert.Equal(expected[i].Json.ToArray(), actual[i].Json.ToArray());
        }
    }

    private static async Task<List<DocumentChange>> ToListAsync(IAsyncEnumerable<DocumentChange> changes)
    {
        var list = new List<DocumentChange>();
        await foreach (DocumentChange change in changes)
        {
            list.Add(change);
        }

        return list;
    }

    /// <summary>A store of 20 commits, closed: its newest segment and that segment's records.</summary>
    private static async Task<(string Segment, List<(long Offset, int Length)> Records)> ClosedStoreWithRecordsAsync(
        string folder)
    {
        await using (DocumentStore store = DocumentStore.Open(folder, TestStoreOptions.SmallSegments()))
        {
            await WriteHistoryAsync(store, 20);
        }

        string segment = Directory.GetFiles(Path.Combine(folder, "journal"), "*.journal")
            .Order(StringComparer.Ordinal).Last();
        return (segment, Records(segment));
    }

    /// <summary>The records of a segment file, by their headers (offset and length each).</summary>
    private static List<(long Offset, int Length)> Records(string segment)
    {
        List<(long Offset, int Length)> records = JournalTestExtensions.SegmentRecords(segment)
            .Select(r => (r.Offset, r.Header.Length)).ToList();
        Assert.True(records.Count >= 4, $"the segment holds records ({records.Count})");
        return records;
    }

    private static byte[] ReadBytes(string path, long offset, int length)
    {
        using var file = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite);
        byte[] bytes = new byte[length];
        file.Position = offset;
        file.ReadExactly(bytes);
        return bytes;
    }

    private static void WriteBytes(string path, long offset, byte[] bytes)
    {
        using var file = new FileStream(path, FileMode.Open, FileAccess.Write, FileShare.ReadWrite);
        file.Position = offset;
        file.Write(bytes);
    }
}
