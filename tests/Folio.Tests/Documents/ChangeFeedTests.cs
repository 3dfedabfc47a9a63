using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

public sealed class ChangeFeedTests
{
    /// <summary>A document of about 200 bytes.</summary>
    private static readonly byte[] s_padded = Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('x', 200)}\"}}");

    /// <summary>A stream the feed returns reads from its start every time it is enumerated, alone or beside another
    /// enumeration of it (as LINQ over it, a retry, or two consumers do); before, only the first enumeration read
    /// anything and every other one silently ended empty.</summary>
    [Fact]
    public async Task A_change_feed_stream_enumerated_again_or_twice_at_once_reads_from_its_start_each_time()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        await using DocumentStore store = DocumentStore.Open(folder, TestStoreOptions.SmallSegments());
        for (int i = 0; i < 30; i++)
        {
            await store.PutAsync("c", $"d{i}", "{}"u8.ToArray());
        }

        using var stop = new CancellationTokenSource(TestDeadline.Hang);
        var streams = new (string Name, IAsyncEnumerable<DocumentChange> Stream)[]
        {
            ("bounded", store.Changes.ReadAsync(11, 30)),
            ("tailing, taken 20", store.Changes.ReadAsync(11, stop.Token)),
            ("by time, taken 20", store.Changes.ReadAsync(DateTimeOffset.MinValue, stop.Token)),
            ("files", DocumentChanges.ReadFilesAsync(folder, 11, follow: false)),
        };
        foreach ((string name, IAsyncEnumerable<DocumentChange> stream) in streams)
        {
            long first = name.StartsWith("by time", StringComparison.Ordinal) ? 1 : 11;
            long[] expected = [.. Enumerable.Range((int)first, 20).Select(n => (long)n)];
            Assert.Equal(expected, await Sequences(stream));
            Assert.Equal(expected, await Sequences(stream)); // again, from the start
            long[][] together = await Task.WhenAll(Sequences(stream), Sequences(stream));
            Assert.All(together, sequences => Assert.Equal(expected, sequences));
        }

        static async Task<long[]> Sequences(IAsyncEnumerable<DocumentChange> stream)
        {
            var sequences = new List<long>();
            await foreach (DocumentChange change in stream)
            {
                sequences.Add(change.Sequence);
                if (sequences.Count == 20)
                {
                    break;
                }
            }

            return [.. sequences];
        }
    }

    [Fact]
    public async Task A_subscriber_sees_every_change_once_in_order_across_rotations_and_reopen_and_resumes()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { SegmentSize = 8 * 1024, MaxDocumentSize = 1024 };
        var expected = new List<(string Id, ChangeKind Kind)>();
        long saved;
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(30));
            var seen = new List<DocumentChange>();
            var subscriber = Task.Run(async () =>
            {
                await foreach (DocumentChange change in store.Changes.ReadAsync(1, stop.Token))
                {
                    seen.Add(change);
                    if (seen.Count == 300)
                    {
                        return;
                    }
                }
            });

            for (int i = 0; i < 100; i++)
            {
                await store.PutAsync("items", $"i/{i}",
                    Encoding.UTF8.GetBytes($"{{\"n\":{i},\"pad\":\"{new string('p', 100)}\"}}"));
                expected.Add(($"i/{i}", ChangeKind.Put));
            }

            await using (var session = store.OpenSession())
            {
                for (int i = 0; i < 100; i++)
                {
                    session.Store(new User { Name = $"u{i}" }, $"u/{i}");
                    expected.Add(($"u/{i}", ChangeKind.Put));
                }

                await session.SaveChangesAsync();
            }

            for (int i = 0; i < 100; i++)
            {
                await store.DeleteAsync("items", $"i/{i}");
                expected.Add(($"i/{i}", ChangeKind.Delete));
            }

            await subscriber.WaitAsync(TimeSpan.FromSeconds(30));
            Assert.Equal(expected, seen.Select(c => (c.Id, c.Kind)));
            Assert.True(store.Journal.SegmentCount > 3, "rotations happened");
            Assert.Equal(seen.Select(c => c.Sequence).Order(), seen.Select(c => c.Sequence));
            Assert.Equal(Encoding.UTF8.GetBytes($"{{\"n\":7,\"pad\":\"{new string('p', 100)}\"}}"),
                seen[7].Json.ToArray());
            Assert.True(seen[^1].Kind == ChangeKind.Delete && seen[^1].Json.IsEmpty);
            saved = seen[149].Sequence; // a subscriber that handled up to here saved this sequence
        }

        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(30));
            var resumed = new List<DocumentChange>();
            await foreach (DocumentChange change in store.Changes.ReadAsync(saved + 1, stop.Token))
            {
                resumed.Add(change);
                if (change.Sequence == store.LastCommittedSequence && change.Id == "i/99")
                {
                    break;
                }
            }

            // The batch of 100 session puts shares one sequence: resuming after it skips it whole.
            Assert.Equal(expected.SkipWhile(e => e.Id != "i/0" || e.Kind != ChangeKind.Delete),
                resumed.Select(c => (c.Id, c.Kind)));

            var fromTime = store.Changes.ReadAsync(DateTimeOffset.UtcNow.AddDays(-1), stop.Token);
            await using var enumerator = fromTime.GetAsyncEnumerator(stop.Token);
            Assert.True(await enumerator.MoveNextAsync());
            Assert.Equal("i/0", enumerator.Current.Id);
        }
    }

    /// <summary>A delete is a blind write, as its documentation says: of an id that does not exist it commits, takes
    /// a sequence number and shows in the feed; with an expected version it is checked like a put.</summary>
    [Fact]
    public async Task A_delete_of_an_absent_document_commits_and_shows_in_the_feed_unless_it_names_a_version()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        long put = await store.PutAsync("c", "x", "{}"u8.ToArray());
        long blind = await store.DeleteAsync("c", "never");
        Assert.Equal(put + 1, blind);
        await Assert.ThrowsAsync<ConcurrencyException>(() => store.DeleteAsync("c", "never", 3).AsTask());
        Assert.Equal(blind, store.LastCommittedSequence);
        long required = await store.DeleteAsync("c", "never", 0);

        var changes = new List<(long, ChangeKind, string)>();
        await foreach (DocumentChange change in store.Changes.ReadAsync(1))
        {
            changes.Add((change.Sequence, change.Kind, change.Id));
            if (change.Sequence == required)
            {
                break;
            }
        }

        Assert.Equal([(put, ChangeKind.Put, "x"), (blind, ChangeKind.Delete, "never"),
            (required, ChangeKind.Delete, "never")], changes);
        Assert.Null(store.Get("c", "never"));
    }

    [Fact]
    public async Task The_feed_tails_new_commits_and_a_cancelled_subscriber_stops()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path);
        using var stop = new CancellationTokenSource();
        var received = new TaskCompletionSource<DocumentChange>();
        var subscriber = Task.Run(async () =>
        {
            await foreach (DocumentChange change in store.Changes.ReadAsync(1, stop.Token))
            {
                received.TrySetResult(change);
            }
        });
        await Task.Delay(50);
        Assert.False(received.Task.IsCompleted);
        await store.PutAsync("c", "x", "{}"u8.ToArray());
        Assert.Equal("x", (await received.Task.WaitAsync(TestDeadline.Hang)).Id);
        stop.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => subscriber.WaitAsync(TestDeadline.Hang));
    }

    [Fact]
    public async Task A_purged_position_fails_with_a_clear_exception()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { SegmentSize = 8 * 1024, MaxDocumentSize = 1024 });
        for (int i = 0; i < 200; i++)
        {
            await store.PutAsync("c", $"k{i}", Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('x', 100)}\"}}"));
        }

        Assert.True(store.Journal.Purge(100) > 0);
        var error = Assert.Throws<JournalPositionPurgedException>(() => store.Changes.ReadAsync(1));
        Assert.Equal(1, error.RequestedSequence);
    }

    [Fact]
    public async Task Cancelling_a_subscriber_far_behind_stops_it_at_once_not_when_it_catches_up()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        var batch = new CommitBatch();
        for (int i = 0; i < 1000; i++)
        {
            batch.Put("C", $"k{i}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
        }

        for (int commit = 0; commit < 20; commit++)
        {
            await store.Merger.CommitAsync(batch);
        }

        using var cancel = new CancellationTokenSource();
        int read = 0;
        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () =>
        {
            await foreach (DocumentChange _ in store.Changes.ReadAsync(1, cancel.Token))
            {
                if (++read == 100)
                {
                    cancel.Cancel();
                }
            }
        });
        Assert.Equal(100, read);
    }

    [Fact]
    public async Task A_subscriber_that_falls_behind_checkpoints_still_reads_every_change_and_then_lets_them_go()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = FeedOptions();
        await using var store = DocumentStore.Open(dir.Path, options);
        using var stop = new CancellationTokenSource(TestDeadline.Hang);
        await using IAsyncEnumerator<DocumentChange> feed = await SubscribeAfterFirstChangeAsync(store, stop.Token);
        Assert.Equal(1, feed.Current.Sequence);

        // The subscriber stops reading while the writer fills many segments and checkpoints after each few.
        long last = await WriteAndCheckpointAsync(store, 600);
        Assert.True(store.Journal.SegmentCount > 10, "the writes rotated through many segments");
        Assert.True(store.Changes.FirstSequence <= 2,
            $"the hold kept the unread journal: {store.Changes.FirstSequence}");
        Assert.True(store.Journal.HeldBytes > 8 * 8192, $"held: {store.Journal.HeldBytes}");

        var sequences = new List<long> { feed.Current.Sequence };
        while (sequences[^1] < last && await feed.MoveNextAsync())
        {
            sequences.Add(feed.Current.Sequence);
        }

        Assert.Equal(Enumerable.Range(1, (int)last).Select(i => (long)i), sequences);

        // Read up to the end, the hold lets the next checkpoint purge what the subscriber read.
        await store.PutAsync("c", "more", "{}"u8.ToArray());
        Assert.True(await feed.MoveNextAsync());
        await store.CheckpointAsync();
        Assert.True(store.Changes.FirstSequence > last / 2, $"purged after reading: {store.Changes.FirstSequence}");
    }

    [Fact]
    public async Task A_subscriber_further_behind_than_MaxChangeFeedLag_loses_its_hold_and_fails_saying_so()
    {
        using var dir = new TempDirectory();
        var recorded = new System.Collections.Concurrent.ConcurrentDictionary<string, long>();
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener = meters.Listen();
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) => recorded[instrument.Name] = value);
        listener.Start();
        DocumentStoreOptions options = FeedOptions();
        options.MaxChangeFeedLag = 32 * 1024;
        options.MeterFactory = meters;
        await using var store = DocumentStore.Open(dir.Path, options);
        using var stop = new CancellationTokenSource(TestDeadline.Hang);
        await using IAsyncEnumerator<DocumentChange> feed = await SubscribeAfterFirstChangeAsync(store, stop.Token);

        await WriteAndCheckpointAsync(store, 600);
        Assert.True(store.Changes.FirstSequence > 100, $"the journal was purged: {store.Changes.FirstSequence}");
        listener.RecordObservableInstruments();
        Assert.Equal(1, recorded.GetValueOrDefault("folio.changefeed.holds_lapsed"));
        Assert.Equal(0, recorded.GetValueOrDefault("folio.journal.held_bytes", -1));

        JournalPositionPurgedException error = await ReadToTheGapAsync(feed);
        Assert.Contains("MaxChangeFeedLag", error.Message, StringComparison.Ordinal);
        Assert.Equal(store.Changes.FirstSequence, error.FirstAvailableSequence);
    }

    [Fact]
    public async Task While_the_disk_is_full_a_subscribers_hold_gives_way_to_the_checkpoints_purge()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            // the journal cannot grow
            Matches = static path => Path.GetFileName(path) == "next-segment.tmp"
                || path.EndsWith(".journal", StringComparison.Ordinal),
        };
        DocumentStoreOptions options = FeedOptions();
        options.FileSystem = files;
        options.MaxChangeFeedLag = long.MaxValue; // no bound on the lag: a full disk still comes first
        await using var store = DocumentStore.Open(dir.Path, options);
        using var stop = new CancellationTokenSource(TestDeadline.Hang);
        await using IAsyncEnumerator<DocumentChange> feed = await SubscribeAfterFirstChangeAsync(store, stop.Token);
        await WriteAndCheckpointAsync(store, 300);
        Assert.True(store.Changes.FirstSequence <= 2, $"held: {store.Changes.FirstSequence}");

        files.NoSpace = true;
        await Assert.ThrowsAsync<StoreFullException>(async () =>
        {
            for (int i = 0; i < 1000; i++)
            {
                await store.PutAsync("c", $"full{i}", s_padded);
            }
        });
        await store.CheckpointAsync();
        Assert.True(store.Changes.FirstSequence > 100, $"purged while full: {store.Changes.FirstSequence}");

        files.NoSpace = false;
        JournalPositionPurgedException error = await ReadToTheGapAsync(feed);
        Assert.Contains("disk was full", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_reader_of_the_files_keeps_the_journal_it_has_not_read_through_its_pin_until_it_is_done()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, FeedOptions());
        await store.PutAsync("c", "first", "{}"u8.ToArray());
        string readers = Path.Combine(dir.Path, "readers");
        using var stop = new CancellationTokenSource(TestDeadline.Hang);
        long last;
        await using (IAsyncEnumerator<DocumentChange> feed = DocumentChanges.ReadFilesAsync(dir.Path, 1, follow: true,
            stop.Token).GetAsyncEnumerator(stop.Token))
        {
            Assert.True(await feed.MoveNextAsync());
            Assert.Single(Directory.GetFiles(readers, "*.feed"));

            // The writer checkpoints past the reader, which has stopped reading: its pin keeps the journal.
            last = await WriteAndCheckpointAsync(store, 600);
            Assert.True(store.Journal.SegmentCount > 10, "the writes rotated through many segments");
            Assert.True(store.Changes.FirstSequence <= 2, $"the pin kept the journal: {store.Changes.FirstSequence}");

            var sequences = new List<long> { feed.Current.Sequence };
            while (sequences[^1] < last && await feed.MoveNextAsync())
            {
                sequences.Add(feed.Current.Sequence);
            }

            Assert.Equal(Enumerable.Range(1, (int)last).Select(i => (long)i), sequences);
        }

        // Disposed, the reader's pin is gone, and the next checkpoint purges.
        Assert.Empty(Directory.GetFiles(readers, "*.feed"));
        await store.PutAsync("c", "more", "{}"u8.ToArray());
        await store.CheckpointAsync();
        Assert.True(store.Changes.FirstSequence > last / 2, $"purged: {store.Changes.FirstSequence}");

        // A pin a crashed reader left (no lock held) keeps nothing and is deleted by the next checkpoint.
        string orphan = Path.Combine(readers, "orphan" + Folio.Journal.FeedPin.Extension);
        await File.WriteAllBytesAsync(orphan, Folio.Journal.FeedPin.Encode(store.Changes.FirstSequence));
        long purgedTo = store.Changes.FirstSequence;
        await WriteAndCheckpointAsync(store, 200);
        Assert.False(File.Exists(orphan));
        Assert.True(store.Changes.FirstSequence > purgedTo, $"purged past the orphan: {store.Changes.FirstSequence}");
    }

    [Fact]
    public async Task With_MaxChangeFeedLag_0_a_subscriber_holds_nothing_and_a_negative_lag_is_refused()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = FeedOptions();
        options.MaxChangeFeedLag = -1;
        var refused = Assert.Throws<ArgumentOutOfRangeException>(() => DocumentStore.Open(dir.Path, options));
        Assert.Equal(nameof(DocumentStoreOptions.MaxChangeFeedLag), refused.ParamName);

        options.MaxChangeFeedLag = 0;
        await using var store = DocumentStore.Open(dir.Path, options);
        await using IAsyncEnumerator<DocumentChange> feed = await SubscribeAfterFirstChangeAsync(store, default);
        await WriteAndCheckpointAsync(store, 300);
        Assert.True(store.Changes.FirstSequence > 100, $"the journal was purged: {store.Changes.FirstSequence}");
    }

    /// <summary>Commits a first document and returns a subscriber from sequence 1 that has read it and then stops
    /// reading.</summary>
    private static async Task<IAsyncEnumerator<DocumentChange>> SubscribeAfterFirstChangeAsync(DocumentStore store,
        CancellationToken cancellationToken)
    {
        await store.PutAsync("c", "first", "{}"u8.ToArray(), cancellationToken: cancellationToken);
        IAsyncEnumerator<DocumentChange> feed = store.Changes.ReadAsync(1, cancellationToken)
            .GetAsyncEnumerator(cancellationToken);
        Assert.True(await feed.MoveNextAsync());
        return feed;
    }

    /// <summary>Reads <paramref name="feed"/> on until it fails at a purged commit, and returns that failure.</summary>
    private static Task<JournalPositionPurgedException> ReadToTheGapAsync(IAsyncEnumerator<DocumentChange> feed) =>
        Assert.ThrowsAsync<JournalPositionPurgedException>(async () =>
        {
            while (await feed.MoveNextAsync())
            {
            }
        });

    /// <summary>8 KiB segments and checkpoints after every 4 KiB of journal.</summary>
    private static DocumentStoreOptions FeedOptions() => new()
    {
        SegmentSize = 8 * 1024, MaxDocumentSize = 1024, MaxGroupBytes = 4096, CheckpointThreshold = 4096,
    };

    /// <summary>Writes <paramref name="count"/> documents of ~200 bytes, a checkpoint after every 50; returns the
    /// last commit's sequence.</summary>
    private static async Task<long> WriteAndCheckpointAsync(DocumentStore store, int count)
    {
        long last = 0;
        for (int i = 0; i < count; i++)
        {
            last = await store.PutAsync("c", $"k{i}", s_padded);
            if (i % 50 == 49)
            {
                await store.CheckpointAsync();
            }
        }

        await store.CheckpointAsync();
        return last;
    }
}
