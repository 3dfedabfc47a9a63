using System.Collections.Concurrent;
using System.IO.Pipelines;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Backups;

/// <summary>
/// Online backup and restore through the public API: a backup taken while writers commit and checkpoints purge the
/// journal restores exactly the state at its sequence; a backup cut short or bit-flipped anywhere is refused and
/// leaves nothing; point-in-time restores match a model of the history; a slow destination holds the backup back.
/// </summary>
public sealed class BackupRestoreTests
{
    [Fact]
    public async Task A_backup_restores_every_document_with_its_version_and_time()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, model, 0, 600, seed: 1);
            await store.CheckpointAsync();
            await WriteHistoryAsync(store, model, 600, 300, seed: 2); // after the checkpoint: journal entries

            string file = Path.Combine(dir.Path, "backup.folio");
            BackupResult backup = await store.BackupAsync(file);
            Assert.Equal(store.LastCommittedSequence, backup.Sequence);
            Assert.True(backup.CheckpointSequence > 0 && backup.CheckpointSequence < backup.Sequence);
            Assert.True(backup.Chunks >= 1);
            Assert.Equal(backup.Sequence - backup.CheckpointSequence, backup.Entries);
            Assert.Equal(new FileInfo(file).Length, backup.Bytes);

            string target = Path.Combine(dir.Path, "restored");
            RestoreResult restored = await DocumentStore.RestoreAsync(file, target);
            Assert.Equal(backup.Sequence, restored.Sequence);
            Assert.Equal(backup.CheckpointSequence, restored.CheckpointSequence);
            Assert.Equal(backup.Entries, restored.Entries);
            Assert.Equal(backup.Bytes, restored.Bytes);

            await using DocumentStore copy = DocumentStore.Open(target, options);
            Assert.Equal(model.At(backup.Sequence).Count, restored.Documents);
            AssertSameDocuments(store, copy);
            Assert.Empty(StagingFolders(target));
        }
    }

    [Fact]
    public async Task A_backup_taken_during_concurrent_writes_and_checkpoints_restores_exactly_its_sequence()
    {
        using var dir = new TempDirectory();
        // Tiny segments: the checkpoints below purge the journal many times during each backup.
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CacheSize = 4 << 20;
        var model = new History();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        await WriteHistoryAsync(store, model, 0, 500, seed: 3);

        using var stop = new CancellationTokenSource();
        Task[] writers = StartWritersAndCheckpoints(store, model, seed: 100, checkpointEvery: 20, stop.Token);

        var backups = new List<(MemoryStream Bytes, BackupResult Result)>();
        for (int i = 0; i < 3; i++)
        {
            await Task.Delay(150);
            // A destination slower than the writers: the backup spans checkpoints that would purge its entries.
            var bytes = new MemoryStream();
            var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: 32 * 1024, resumeWriterThreshold: 16 * 1024));
            Task drain = DrainSlowlyAsync(pipe.Reader, bytes, delayEvery: 64 * 1024);
            BackupResult result = await store.BackupAsync(pipe.Writer);
            await pipe.Writer.CompleteAsync();
            await drain;
            backups.Add((bytes, result));
        }

        // The last backup may end before the next checkpoint does (a checkpoint every 20 ms), and a checkpoint is
        // published before it purges the journal below it: give both that long (a loaded machine runs few
        // checkpoints while the backups drain).
        DateTime until = DateTime.UtcNow.AddSeconds(30);
        while ((store.Pages.Current.Sequence <= backups[^1].Result.CheckpointSequence
                || store.Journal.FirstSequence <= backups[0].Result.CheckpointSequence + 1)
            && DateTime.UtcNow < until)
        {
            await Task.Delay(10);
        }

        stop.Cancel();
        await Task.WhenAll(writers);
        Assert.True(store.Pages.Current.Sequence > backups[^1].Result.CheckpointSequence, "checkpoints ran meanwhile");
        Assert.True(store.Journal.FirstSequence > backups[0].Result.CheckpointSequence + 1, "the journal was purged");
        await AssertRestoreTheirSequencesAsync(dir.Path, backups.Select(b => (b.Bytes, b.Result)), options, model);
    }

    [Fact]
    public async Task A_backup_of_the_files_of_a_journal_of_large_documents_takes_every_entry_a_few_at_a_time()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        options.MaxDocumentSize = 200_000;
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 1L << 40;
        string source = Path.Combine(dir.Path, "source");
        string backupFile = Path.Combine(dir.Path, "large.folio");
        var model = new Dictionary<string, byte[]>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(source, options))
        {
            // 12 MB of journal after the checkpoint: three of the follower's reads of 4 MiB at least.
            for (int i = 0; i < 120; i++)
            {
                string pad = new((char)('a' + (i % 26)), 100_000);
                byte[] json = Encoding.UTF8.GetBytes($"{{\"i\":{i},\"pad\":\"{pad}\"}}");
                await store.PutAsync("docs", $"d{i:D3}", json);
                model[$"d{i:D3}"] = json;
            }

            BackupResult backup = await DocumentStore.BackupFilesAsync(source, backupFile); // the store is held open
            Assert.Equal(0, backup.CheckpointSequence);
            Assert.Equal(120, backup.Entries);
            Assert.Equal(store.LastCommittedSequence, backup.Sequence);
        }

        string restored = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync([backupFile], restored);
        await using DocumentStore copy = DocumentStore.Open(restored, options);
        Assert.Equal(model.Keys.Order(StringComparer.Ordinal), copy.Scan("docs").Select(d => d.Id));
        foreach ((string id, byte[] json) in model)
        {
            Assert.Equal(json, copy.Get("docs", id)!.Value.Json.ToArray());
        }
    }

    [Fact]
    public async Task A_backup_of_the_files_of_a_store_held_open_and_its_increment_restore_every_document()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        string source = Path.Combine(dir.Path, "source");
        string full = Path.Combine(dir.Path, "full.folio");
        string increment = Path.Combine(dir.Path, "increment.folio");
        await using (DocumentStore store = DocumentStore.Open(source, options))
        {
            await WriteHistoryAsync(store, model, 0, 600, seed: 51);
            await store.CheckpointAsync();
            await WriteHistoryAsync(store, model, 600, 300, seed: 52); // after the checkpoint: journal entries

            var reported = new List<long>();
            BackupResult backup = await DocumentStore.BackupFilesAsync(source, full, // the store is held open
                new SynchronousProgress<long>(reported.Add));
            Assert.Equal(backup.Bytes, reported[^1]);
            Assert.Equal(reported.Order(), reported); // bytes written so far, never less than before
            Assert.Equal(["full.folio", "source"], Directory.GetFileSystemEntries(dir.Path).Select(Path.GetFileName)
                .Order(StringComparer.Ordinal)); // no partial file left
            await Assert.ThrowsAsync<IOException>(() => DocumentStore.BackupFilesAsync(source, full).AsTask());

            Assert.Equal(store.LastCommittedSequence, backup.Sequence);
            Assert.Equal(store.Pages.Current.Sequence, backup.CheckpointSequence);
            Assert.True(backup.Chunks >= 1);
            Assert.Equal(backup.Sequence - backup.CheckpointSequence, backup.Entries);
            Assert.Equal(new FileInfo(full).Length, backup.Bytes);
            Assert.Empty(Directory.GetFiles(Path.Combine(source, "readers"))); // the pin went with the backup

            await WriteHistoryAsync(store, model, 900, 100, seed: 53);
            BackupResult next = await DocumentStore.BackupFilesAsync(source, increment, backup.Sequence + 1);
            Assert.Equal(backup.Sequence, next.CheckpointSequence);
            Assert.Equal(0, next.Chunks);
            Assert.Equal(store.LastCommittedSequence, next.Sequence);
            Assert.Equal(100, next.Entries);
            Assert.Equal(new FileInfo(increment).Length, next.Bytes);

            // From the commit after the last: an empty increment; from further on: refused, as the store's own.
            Assert.Equal(0, (await DocumentStore.BackupFilesAsync(source, new MemoryStream(),
                store.LastCommittedSequence + 1)).Entries);
            await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => DocumentStore.BackupFilesAsync(source,
                new MemoryStream(), store.LastCommittedSequence + 2).AsTask());

            string target = Path.Combine(dir.Path, "restored");
            RestoreResult restored = await DocumentStore.RestoreAsync(full, target);
            Assert.Equal(backup.Sequence, restored.Sequence);
            await using (DocumentStore copy = DocumentStore.Open(target, options))
            {
                AssertMatchesModel(copy, model.At(backup.Sequence));
            }

            string chain = Path.Combine(dir.Path, "chain");
            await DocumentStore.RestoreAsync([full, increment], chain);
            await using DocumentStore all = DocumentStore.Open(chain, options);
            AssertSameDocuments(store, all); // versions and commit times too
        }
    }

    [Fact]
    public async Task A_backup_of_the_files_taken_during_writes_and_checkpoints_restores_exactly_its_sequence()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        options.CacheSize = 4 << 20;
        var model = new History();
        string source = Path.Combine(dir.Path, "source");
        await using DocumentStore store = DocumentStore.Open(source, options);
        await WriteHistoryAsync(store, model, 0, 500, seed: 54);

        using var stop = new CancellationTokenSource();
        Task[] writers = StartWritersAndCheckpoints(store, model, seed: 200, checkpointEvery: 5, stop.Token);

        // Three backups at least, and more (up to ten) until one saw three checkpoints run while it copied: on a busy
        // machine the checkpoints slow down as much as the destination does.
        var backups = new List<(MemoryStream Bytes, BackupResult Result, long Generation)>();
        for (int i = 0; i < 10 && (i < 3 || backups.Max(b => b.Generation) < 3); i++)
        {
            await Task.Delay(100);
            // A destination slower than the checkpoints: several of them run while the chunks are copied.
            var bytes = new MemoryStream();
            long before = store.Pages.Current.Generation;
            BackupResult result = await DocumentStore.BackupFilesAsync(source, SlowStream(bytes));
            backups.Add((bytes, result, store.Pages.Current.Generation - before));
        }

        stop.Cancel();
        await Task.WhenAll(writers);
        Assert.True(backups.Max(b => b.Generation) >= 3, "checkpoints ran during the backups: "
            + string.Join(", ", backups.Select(b => b.Generation)));
        await AssertRestoreTheirSequencesAsync(dir.Path, backups.Select(b => (b.Bytes, b.Result)), options, model);
    }

    [Fact]
    public async Task A_backup_cut_short_anywhere_is_refused_and_leaves_nothing()
    {
        using var dir = new TempDirectory();
        byte[] backup = await SmallBackupAsync(dir.Path);
        var random = new Random(7);
        var cuts = new SortedSet<int> { 0, 1, 31, 32, 33, 44, backup.Length - 1, backup.Length - 4 };
        while (cuts.Count < 60)
        {
            cuts.Add(random.Next(backup.Length));
        }

        foreach (int cut in cuts)
        {
            string target = Path.Combine(dir.Path, $"cut{cut}");
            await Assert.ThrowsAsync<BackupCorruptedException>(
                () => DocumentStore.RestoreAsync(new MemoryStream(backup, 0, cut), target).AsTask());
            Assert.False(Directory.Exists(target), $"cut at {cut} left the target");
            Assert.True(StagingFolders(target).Length == 0, $"cut at {cut} left the staging folder");
        }
    }

    [Fact]
    public async Task A_backup_with_a_flipped_bit_anywhere_is_refused()
    {
        using var dir = new TempDirectory();
        byte[] backup = await SmallBackupAsync(dir.Path);
        var random = new Random(8);
        for (int i = 0; i < 60; i++)
        {
            byte[] damaged = (byte[])backup.Clone();
            int at = i < 40 ? random.Next(damaged.Length) : random.Next(Math.Min(200, damaged.Length));
            damaged[at] ^= (byte)(1 << random.Next(8));
            string target = Path.Combine(dir.Path, $"flip{i}");
            await Assert.ThrowsAsync<BackupCorruptedException>(
                () => DocumentStore.RestoreAsync(new MemoryStream(damaged), target).AsTask());
            Assert.False(Directory.Exists(target), $"a flip at {at} left the target");
        }
    }

    [Fact]
    public async Task A_backup_of_a_store_whose_page_is_damaged_fails_at_once_and_leaves_no_file()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        await using (DocumentStore writer = DocumentStore.Open(store, options))
        {
            for (int i = 0; i < 500; i++)
            {
                await writer.PutAsync("items", $"item-{i:D4}", Encoding.UTF8.GetBytes($"{{\"n\":{i}}}"));
            }

            await writer.CheckpointAsync();
        }

        // A byte inside the first page of the first chunk (chunks start after the two 4 KiB header slots, pages after
        // the chunk's 64-byte header): the chunk's metadata stays whole, only that page fails its checksum.
        FileDamage.FlipByte(Path.Combine(store, "data.folio"), 8192 + 64 + 40, 0x01);

        // Copied as it is, the damage would surface only at the restore, when the backup is needed.
        string fromFiles = Path.Combine(dir.Path, "files.backup");
        var error = await Assert.ThrowsAsync<StoreCorruptedException>(
            () => DocumentStore.BackupFilesAsync(store, fromFiles).AsTask());
        Assert.Contains("data.folio", error.Message, StringComparison.Ordinal);
        Assert.False(File.Exists(fromFiles));

        await using DocumentStore opened = DocumentStore.Open(store, options);
        string online = Path.Combine(dir.Path, "online.backup");
        await Assert.ThrowsAsync<StoreCorruptedException>(() => opened.BackupAsync(online).AsTask());
        Assert.False(File.Exists(online));
        Assert.Empty(Directory.GetFiles(dir.Path, "*.backup*"));
    }

    [Fact]
    public async Task Bytes_after_the_end_and_a_repeated_frame_are_refused()
    {
        using var dir = new TempDirectory();
        byte[] backup = await SmallBackupAsync(dir.Path);
        byte[] longer = [.. backup, .. backup.AsSpan(32, 40)];
        await Assert.ThrowsAsync<BackupCorruptedException>(
            () => DocumentStore.RestoreAsync(new MemoryStream(longer), Path.Combine(dir.Path, "a")).AsTask());
        byte[] twice = [.. backup, .. backup];
        await Assert.ThrowsAsync<BackupCorruptedException>(
            () => DocumentStore.RestoreAsync(new MemoryStream(twice), Path.Combine(dir.Path, "b")).AsTask());
        await Assert.ThrowsAsync<BackupCorruptedException>(
            () => DocumentStore.RestoreAsync(new MemoryStream(Encoding.UTF8.GetBytes("not a backup at all, "
                + "just some text that is long enough")), Path.Combine(dir.Path, "c")).AsTask());
    }

    [Fact]
    public async Task Point_in_time_restores_to_every_tenth_sequence_match_the_model()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        byte[] backup;
        long checkpoint;
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, model, 0, 200, seed: 4);
            checkpoint = await store.CheckpointAsync();
            await WriteHistoryAsync(store, model, 200, 250, seed: 5);
            var bytes = new MemoryStream();
            await store.BackupAsync(bytes);
            backup = bytes.ToArray();
        }

        for (long sequence = checkpoint; sequence <= model.LastSequence; sequence += 10)
        {
            string target = Path.Combine(dir.Path, $"at{sequence}");
            RestoreResult restored = await DocumentStore.RestoreAsync(new MemoryStream(backup), target,
                new RestoreOptions { ToSequence = sequence });
            Assert.Equal(sequence, restored.Sequence);
            await using DocumentStore copy = DocumentStore.Open(target, options);
            Assert.Equal(sequence, copy.LastCommittedSequence);
            AssertMatchesModel(copy, model.At(sequence));
            Directory.Delete(target, recursive: true);
        }

        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => DocumentStore.RestoreAsync(
            new MemoryStream(backup), Path.Combine(dir.Path, "before"),
            new RestoreOptions { ToSequence = checkpoint - 1 }).AsTask());
        Assert.False(Directory.Exists(Path.Combine(dir.Path, "before")));
    }

    [Fact]
    public async Task A_point_in_time_restore_by_timestamp_keeps_the_commits_stamped_up_to_it()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        byte[] backup;
        DateTimeOffset middle;
        long lastBefore;
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, model, 0, 100, seed: 6);
            await Task.Delay(30);
            lastBefore = store.LastCommittedSequence;
            middle = await TimestampOfAsync(store, lastBefore);
            await Task.Delay(30);
            await WriteHistoryAsync(store, model, 100, 100, seed: 7);
            var bytes = new MemoryStream();
            await store.BackupAsync(bytes);
            backup = bytes.ToArray();
        }

        string target = Path.Combine(dir.Path, "at-time");
        RestoreResult restored = await DocumentStore.RestoreAsync(new MemoryStream(backup), target,
            new RestoreOptions { ToTimestamp = middle });
        Assert.Equal(lastBefore, restored.Sequence);
        await using DocumentStore copy = DocumentStore.Open(target, options);
        AssertMatchesModel(copy, model.At(lastBefore));
    }

    [Fact]
    public async Task The_restored_journal_keeps_the_original_commit_times_and_the_store_takes_new_writes()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        await WriteHistoryAsync(store, model, 0, 50, seed: 8);
        await store.CheckpointAsync();
        await WriteHistoryAsync(store, model, 50, 50, seed: 9);
        var bytes = new MemoryStream();
        BackupResult backup = await store.BackupAsync(bytes);
        bytes.Position = 0;
        string target = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync(bytes, target);

        // The restore's verification open checkpointed at its close; the documents keep their times.
        await using DocumentStore copy = DocumentStore.Open(target, options);
        foreach ((DocumentKey key, string _) in model.At(backup.Sequence))
        {
            StoredDocument original = store.Get(key.Collection, key.Id)!.Value;
            StoredDocument restored = copy.Get(key.Collection, key.Id)!.Value;
            Assert.Equal(original.LastModified, restored.LastModified);
            Assert.Equal(original.Version, restored.Version);
        }

        long next = await copy.PutAsync("people", "new", "{\"n\":1}"u8.ToArray());
        Assert.Equal(backup.Sequence + 1, next);
    }

    [Fact]
    public async Task A_store_without_a_checkpoint_and_an_empty_store_back_up_and_restore()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore empty = DocumentStore.Open(Path.Combine(dir.Path, "empty"), options);
        var bytes = new MemoryStream();
        BackupResult none = await empty.BackupAsync(bytes);
        Assert.Equal(0, none.Sequence);
        bytes.Position = 0;
        RestoreResult restoredEmpty = await DocumentStore.RestoreAsync(bytes, Path.Combine(dir.Path, "empty2"));
        Assert.Equal(0, restoredEmpty.Documents);

        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "journal-only"), options);
        var model = new History();
        await WriteHistoryAsync(store, model, 0, 80, seed: 10);
        bytes = new MemoryStream();
        BackupResult backup = await store.BackupAsync(bytes);
        Assert.Equal(0, backup.CheckpointSequence);
        Assert.Equal(0, backup.Chunks);
        bytes.Position = 0;
        string target = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync(bytes, target);
        await using DocumentStore copy = DocumentStore.Open(target, options);
        AssertMatchesModel(copy, model.At(backup.Sequence));
    }

    [Fact]
    public async Task Documents_larger_than_a_frame_travel_in_parts()
    {
        using var dir = new TempDirectory();
        var options = new DocumentStoreOptions { SegmentSize = 4 << 20, MaxDocumentSize = 1 << 20 };
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        string big = "{\"text\":\"" + new string('x', 700_000) + "\"}";
        string medium = "{\"text\":\"" + new string('y', 70_000) + "\"}";
        await store.PutAsync("docs", "big1", Encoding.UTF8.GetBytes(big));
        await store.CheckpointAsync();
        var batch = new CommitBatch().Put("docs", "big2", Encoding.UTF8.GetBytes(big))
            .Put("docs", "small", "{}"u8.ToArray()).Put("docs", "medium", Encoding.UTF8.GetBytes(medium));
        await store.WriteAsync(batch);
        await store.PutAsync("docs", "after", "{\"a\":1}"u8.ToArray());
        var bytes = new MemoryStream();
        await store.BackupAsync(bytes);
        bytes.Position = 0;
        string target = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync(bytes, target);
        await using DocumentStore copy = DocumentStore.Open(target, options);
        AssertSameDocuments(store, copy);
    }

    [Fact]
    public async Task A_slow_destination_holds_the_backup_at_the_pipes_threshold()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        await WriteHistoryAsync(store, new History(), 0, 3000, seed: 11);
        await store.CheckpointAsync();

        const int Threshold = 64 * 1024;
        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: Threshold, resumeWriterThreshold: Threshold / 2,
            useSynchronizationContext: false));
        long largestBuffered = 0;
        long total = 0;
        Task reader = Task.Run(async () =>
        {
            while (true)
            {
                ReadResult result = await pipe.Reader.ReadAsync();
                largestBuffered = Math.Max(largestBuffered, result.Buffer.Length);
                long take = Math.Min(result.Buffer.Length, 8 * 1024);
                total += take;
                pipe.Reader.AdvanceTo(result.Buffer.GetPosition(take), result.Buffer.End);
                if (result.IsCompleted && take == result.Buffer.Length)
                {
                    break;
                }

                await Task.Delay(1);
            }
        });
        BackupResult backup = await store.BackupAsync(pipe.Writer);
        await pipe.Writer.CompleteAsync();
        await reader;
        Assert.Equal(backup.Bytes, total);
        Assert.True(backup.Bytes > 4 * Threshold, $"the backup is {backup.Bytes} bytes");
        // Backpressure: the writer never ran ahead of the reader by more than the threshold plus one frame.
        Assert.True(largestBuffered <= Threshold + (300 * 1024), $"{largestBuffered} bytes were buffered");
    }

    [Fact]
    public async Task Closing_the_store_cancels_a_backup_in_flight_and_waits_for_it()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        await WriteHistoryAsync(store, new History(), 0, 2000, seed: 12);
        await store.CheckpointAsync();
        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: 1024, resumeWriterThreshold: 512));
        ValueTask<BackupResult> backup = store.BackupAsync(pipe.Writer); // nobody reads: it waits on the pipe
        await Task.Delay(50);
        Assert.False(backup.IsCompleted);
        await store.DisposeAsync();
        await Assert.ThrowsAsync<ObjectDisposedException>(() => backup.AsTask());
        await Assert.ThrowsAsync<ObjectDisposedException>(() => store.BackupAsync(new MemoryStream()).AsTask());
        await using DocumentStore reopened = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        Assert.True(reopened.LastCommittedSequence >= 2000);
    }

    [Fact]
    public async Task A_restore_refuses_a_folder_that_is_not_empty_and_leaves_it_alone()
    {
        using var dir = new TempDirectory();
        byte[] backup = await SmallBackupAsync(dir.Path);
        string target = Path.Combine(dir.Path, "occupied");
        Directory.CreateDirectory(target);
        File.WriteAllText(Path.Combine(target, "keep.txt"), "mine");
        await Assert.ThrowsAsync<IOException>(
            () => DocumentStore.RestoreAsync(new MemoryStream(backup), target).AsTask());
        Assert.Equal("mine", File.ReadAllText(Path.Combine(target, "keep.txt")));
        Assert.Single(Directory.GetFileSystemEntries(target));

        string file = Path.Combine(dir.Path, "exists.folio");
        File.WriteAllText(file, "x");
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "other"), SmallOptions());
        await Assert.ThrowsAsync<IOException>(() => store.BackupAsync(file).AsTask());
        Assert.Equal("x", File.ReadAllText(file));
    }

    [Fact]
    public async Task A_full_backup_and_its_increments_restore_to_every_tenth_sequence_of_the_chain()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        var files = new List<string>();
        long checkpoint;
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, model, 0, 150, seed: 20);
            checkpoint = await store.CheckpointAsync();
            await WriteHistoryAsync(store, model, 150, 40, seed: 21);
            files.Add(Path.Combine(dir.Path, "full.folio"));
            BackupResult previous = await store.BackupAsync(files[^1]);
            for (int i = 0; i < 3; i++)
            {
                await WriteHistoryAsync(store, model, 190 + (i * 60), 60, seed: 22 + i);
                if (i == 1)
                {
                    await store.CheckpointAsync(); // purges only what the journal's retention allows
                }

                files.Add(Path.Combine(dir.Path, $"increment{i}.folio"));
                BackupResult increment = await store.BackupAsync(files[^1], previous.Sequence + 1);
                Assert.Equal(previous.Sequence, increment.CheckpointSequence);
                Assert.Equal(0, increment.Chunks);
                Assert.Equal(increment.Sequence - previous.Sequence, increment.Entries);
                previous = increment;
            }

            // An empty increment follows on as well.
            files.Add(Path.Combine(dir.Path, "empty.folio"));
            Assert.Equal(0, (await store.BackupAsync(files[^1], previous.Sequence + 1)).Entries);
        }

        RestoreResult all = await DocumentStore.RestoreAsync(files, Path.Combine(dir.Path, "all"));
        Assert.Equal(model.LastSequence, all.Sequence);
        await using (DocumentStore copy = DocumentStore.Open(Path.Combine(dir.Path, "all"), options))
        {
            AssertMatchesModel(copy, model.At(model.LastSequence));
        }

        for (long sequence = checkpoint; sequence <= model.LastSequence; sequence += 10)
        {
            string target = Path.Combine(dir.Path, $"at{sequence}");
            RestoreResult restored = await DocumentStore.RestoreAsync(files, target,
                new RestoreOptions { ToSequence = sequence });
            Assert.Equal(sequence, restored.Sequence);
            await using (DocumentStore copy = DocumentStore.Open(target, options))
            {
                AssertMatchesModel(copy, model.At(sequence));
            }

            Directory.Delete(target, recursive: true);
        }
    }

    [Fact]
    public async Task Increments_out_of_order_or_missing_one_are_refused_and_leave_nothing()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        var model = new History();
        string full = Path.Combine(dir.Path, "full.folio");
        string first = Path.Combine(dir.Path, "first.folio");
        string second = Path.Combine(dir.Path, "second.folio");
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, model, 0, 50, seed: 30);
            BackupResult backup = await store.BackupAsync(full);
            await WriteHistoryAsync(store, model, 50, 20, seed: 31);
            BackupResult increment = await store.BackupAsync(first, backup.Sequence + 1);
            await WriteHistoryAsync(store, model, 70, 20, seed: 32);
            await store.BackupAsync(second, increment.Sequence + 1);
            await Assert.ThrowsAsync<ArgumentOutOfRangeException>(
                () => store.BackupAsync(Path.Combine(dir.Path, "future.folio"), store.LastCommittedSequence + 2)
                    .AsTask());
        }

        string target = Path.Combine(dir.Path, "restored");
        await Assert.ThrowsAsync<ArgumentException>(
            () => DocumentStore.RestoreAsync([full, second], target).AsTask());
        Assert.False(Directory.Exists(target));
        await Assert.ThrowsAsync<ArgumentException>(
            () => DocumentStore.RestoreAsync([full, second, first], target).AsTask());
        Assert.False(Directory.Exists(target));
        await Assert.ThrowsAsync<ArgumentException>(
            () => DocumentStore.RestoreAsync([first, second], target).AsTask()); // no full backup first
        Assert.False(Directory.Exists(target));
        await Assert.ThrowsAsync<ArgumentException>(
            () => DocumentStore.RestoreAsync([full, full], target).AsTask()); // two full backups
        Assert.False(Directory.Exists(target));
        byte[] damaged = await File.ReadAllBytesAsync(second);
        damaged[damaged.Length / 2] ^= 0x20;
        string damagedFile = Path.Combine(dir.Path, "damaged.folio");
        await File.WriteAllBytesAsync(damagedFile, damaged);
        await Assert.ThrowsAsync<BackupCorruptedException>(
            () => DocumentStore.RestoreAsync([full, first, damagedFile], target).AsTask());
        Assert.False(Directory.Exists(target));
        await DocumentStore.RestoreAsync([full, first, second], target);
        await using DocumentStore copy = DocumentStore.Open(target, options);
        AssertMatchesModel(copy, model.At(model.LastSequence));
    }

    [Fact]
    public async Task An_increment_of_another_store_or_of_a_copy_that_diverged_is_refused_though_its_sequences_fit()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = SmallOptions();
        string Backup(string name) => Path.Combine(dir.Path, name + ".folio");
        string a = Path.Combine(dir.Path, "a");
        string copy = Path.Combine(dir.Path, "copy");
        var modelA = new History();
        History modelCopy;
        BackupResult fullA;
        BackupResult incrementA;
        await using (DocumentStore storeA = DocumentStore.Open(a, options))
        await using (DocumentStore storeB = DocumentStore.Open(Path.Combine(dir.Path, "b"), options))
        {
            await WriteHistoryAsync(storeA, modelA, 0, 40, seed: 50);
            await WriteHistoryAsync(storeB, new History(), 0, 40, seed: 51);
            fullA = await storeA.BackupAsync(Backup("fullA"));
            Assert.Equal(storeA.LastCommittedSequence, storeB.LastCommittedSequence);
            await WriteHistoryAsync(storeA, modelA, 40, 10, seed: 52);
            await WriteHistoryAsync(storeB, new History(), 40, 10, seed: 53);
            incrementA = await storeA.BackupAsync(Backup("incA"), fullA.Sequence + 1);
            BackupResult incrementB = await storeB.BackupAsync(Backup("incB"), fullA.Sequence + 1);
            Assert.Equal(incrementA.Sequence, incrementB.Sequence);
        }

        // A copy of the closed store: the same history up to here, then each goes its own way.
        modelCopy = modelA.Clone();
        foreach (string file in Directory.GetFiles(a, "*", SearchOption.AllDirectories))
        {
            string to = Path.Combine(copy, Path.GetRelativePath(a, file));
            Directory.CreateDirectory(Path.GetDirectoryName(to)!);
            File.Copy(file, to);
        }

        await using (DocumentStore storeA = DocumentStore.Open(a, options))
        await using (DocumentStore storeCopy = DocumentStore.Open(copy, options))
        {
            await WriteHistoryAsync(storeA, modelA, 50, 10, seed: 54);
            await WriteHistoryAsync(storeCopy, modelCopy, 50, 10, seed: 55);
            await storeA.BackupAsync(Backup("incA2"), incrementA.Sequence + 1);
            BackupResult incrementCopy = await storeCopy.BackupAsync(Backup("incCopy"), incrementA.Sequence + 1);
            await WriteHistoryAsync(storeCopy, modelCopy, 60, 10, seed: 56);
            await storeCopy.BackupAsync(Backup("incCopy2"), incrementCopy.Sequence + 1);
        }

        string target = Path.Combine(dir.Path, "restored");
        ArgumentException other = await Assert.ThrowsAsync<ArgumentException>(
            () => DocumentStore.RestoreAsync([Backup("fullA"), Backup("incB")], target).AsTask());
        Assert.Contains("does not continue the backups before it", other.Message);
        Assert.False(Directory.Exists(target));
        await Assert.ThrowsAsync<ArgumentException>(() => DocumentStore.RestoreAsync(
            [Backup("fullA"), Backup("incA"), Backup("incA2"), Backup("incCopy2")], target).AsTask());
        Assert.False(Directory.Exists(target));

        // The copy's own increments continue the backups taken before it diverged, and the original's do too.
        await DocumentStore.RestoreAsync(
            [Backup("fullA"), Backup("incA"), Backup("incCopy"), Backup("incCopy2")], target);
        await using (DocumentStore restored = DocumentStore.Open(target, options))
        {
            AssertMatchesModel(restored, modelCopy.At(modelCopy.LastSequence));
        }

        string original = Path.Combine(dir.Path, "restored-original");
        await DocumentStore.RestoreAsync([Backup("fullA"), Backup("incA"), Backup("incA2")], original);
        await using DocumentStore restoredOriginal = DocumentStore.Open(original, options);
        AssertMatchesModel(restoredOriginal, modelA.At(modelA.LastSequence));
    }

    [Fact]
    public async Task The_increments_of_a_restored_store_continue_the_backups_it_was_restored_from()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        string Backup(string name) => Path.Combine(dir.Path, name + ".folio");
        BackupResult increment;
        await using (DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options))
        {
            await WriteHistoryAsync(store, new History(), 0, 300, seed: 60);
            await store.CheckpointAsync(); // the full backup's checkpoint: its last entry's segment is purged
            BackupResult full = await store.BackupAsync(Backup("full"));
            Assert.Equal(full.CheckpointSequence, full.Sequence);
            await WriteHistoryAsync(store, new History(), 300, 30, seed: 61);
            increment = await store.BackupAsync(Backup("inc"), full.Sequence + 1);
        }

        string restoredFolder = Path.Combine(dir.Path, "restored");
        await DocumentStore.RestoreAsync([Backup("full"), Backup("inc")], restoredFolder);
        await using (DocumentStore restored = DocumentStore.Open(restoredFolder, options))
        {
            await WriteHistoryAsync(restored, new History(), 330, 200, seed: 62);
            await restored.CheckpointAsync(); // purges the restored journal's first segments
            BackupResult next = await restored.BackupAsync(Backup("next"), increment.Sequence + 1);
            Assert.Equal(restored.LastCommittedSequence, next.Sequence);
        }

        await using (var files = File.Create(Backup("files")))
        {
            // The same increment taken from the closed store's files.
            await DocumentStore.BackupFilesAsync(restoredFolder, files, increment.Sequence + 1);
        }

        foreach (string last in new[] { "next", "files" })
        {
            string target = Path.Combine(dir.Path, "again-" + last);
            await DocumentStore.RestoreAsync([Backup("full"), Backup("inc"), Backup(last)], target);
            await using DocumentStore expected = DocumentStore.Open(restoredFolder, options);
            await using DocumentStore actual = DocumentStore.Open(target, options);
            AssertSameDocuments(expected, actual);
        }
    }

    [Fact]
    public async Task A_backup_of_format_version_1_still_restores()
    {
        using var dir = new TempDirectory();
        byte[] backup = await SmallBackupAsync(dir.Path);

        // Version 1 is version 2 without the time of entry C at the end of the Begin frame.
        const int header = Folio.Backups.BackupFormat.StreamHeaderSize;
        const int frameHeader = Folio.Backups.BackupFormat.FrameHeaderSize;
        const int legacyBegin = Folio.Backups.BackupFormat.LegacyBeginSize;
        int beginLength = BitConverter.ToInt32(backup, header + 8);
        Assert.Equal(Folio.Backups.BackupFormat.BeginSize, beginLength);
        var legacy = new MemoryStream();
        byte[] streamHeader = backup[..header];
        BitConverter.TryWriteBytes(streamHeader.AsSpan(8), 1);
        BitConverter.TryWriteBytes(streamHeader.AsSpan(28), Folio.Storage.Crc32C.Compute(streamHeader.AsSpan(0, 28)));
        legacy.Write(streamHeader);
        byte[] begin = backup[header..(header + frameHeader + legacyBegin + 4)];
        BitConverter.TryWriteBytes(begin.AsSpan(8), legacyBegin);
        BitConverter.TryWriteBytes(begin.AsSpan(frameHeader + legacyBegin),
            Folio.Storage.Crc32C.Compute(begin.AsSpan(0, frameHeader + legacyBegin)));
        legacy.Write(begin);
        legacy.Write(backup.AsSpan(header + frameHeader + beginLength + 4));

        string target = Path.Combine(dir.Path, "restored");
        legacy.Position = 0;
        RestoreResult result = await DocumentStore.RestoreAsync(legacy, target);
        await using DocumentStore restored = DocumentStore.Open(target, SmallOptions());
        Assert.Equal(result.Sequence, restored.LastCommittedSequence);
        await using DocumentStore source = DocumentStore.Open(Path.Combine(dir.Path, "small-source"), SmallOptions());
        AssertSameDocuments(source, restored);
    }

    [Fact]
    public async Task A_backup_keeps_to_its_pace_and_one_without_a_limit_does_not_wait()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "source");
        DocumentStoreOptions Options(long bytesPerSecond)
        {
            DocumentStoreOptions options = SmallOptions();
            options.BackupBytesPerSecond = bytesPerSecond;
            return options;
        }

        await using (DocumentStore store = DocumentStore.Open(folder, Options(0)))
        {
            byte[] json = Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('p', 3000)}\"}}");
            for (int i = 0; i < 1000; i++)
            {
                await store.PutAsync("docs", $"d{i:D4}", json);
            }

            await store.CheckpointAsync();
        }

        const long Pace = 4L << 20;
        foreach (long bytesPerSecond in new[] { Pace, 0 })
        {
            await using DocumentStore store = DocumentStore.Open(folder, Options(bytesPerSecond));
            var watch = System.Diagnostics.Stopwatch.StartNew();
            BackupResult backup = await store.BackupAsync(Stream.Null);
            double seconds = watch.Elapsed.TotalSeconds;
            double atPace = (double)backup.Bytes / Pace;
            Assert.True(atPace > 0.2, $"{backup.Bytes} bytes: too few to tell a pace");
            if (bytesPerSecond > 0)
            {
                // No earlier than its bytes allow, less the last frame's worth.
                Assert.True(seconds >= atPace - 0.15, $"{backup.Bytes} bytes in {seconds:F3} s at {Pace} bytes/s");
            }
            else
            {
                Assert.True(seconds < atPace / 2, $"{backup.Bytes} bytes in {seconds:F3} s without a limit");
            }
        }

        Assert.Throws<ArgumentOutOfRangeException>(() => Options(512 * 1024).Validate());
        Assert.Throws<ArgumentOutOfRangeException>(() => Options(-1).Validate());

        // From the files, at the pace of its options.
        foreach (long bytesPerSecond in new[] { Pace, 0 })
        {
            var watch = System.Diagnostics.Stopwatch.StartNew();
            BackupResult backup = await DocumentStore.BackupFilesAsync(folder, Stream.Null,
                new BackupFilesOptions { BytesPerSecond = bytesPerSecond });
            double seconds = watch.Elapsed.TotalSeconds;
            double atPace = (double)backup.Bytes / Pace;
            Assert.True(bytesPerSecond > 0 ? seconds >= atPace - 0.15 : seconds < atPace / 2,
                $"{backup.Bytes} bytes from the files in {seconds:F3} s at {bytesPerSecond} bytes/s");
        }

        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => DocumentStore.BackupFilesAsync(folder,
            Stream.Null, new BackupFilesOptions { BytesPerSecond = 1000 }).AsTask());
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => DocumentStore.BackupFilesAsync(folder,
            Path.Combine(dir.Path, "never.folio"), new BackupFilesOptions { FromSequence = 0 }).AsTask());
        Assert.False(File.Exists(Path.Combine(dir.Path, "never.folio")));
    }

    [Fact]
    public async Task An_increment_from_a_purged_position_asks_for_a_full_backup()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.TinySegments();
        var model = new History();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "source"), options);
        await WriteHistoryAsync(store, model, 0, 800, seed: 40); // many 64 KiB segments
        await store.CheckpointAsync(); // purges the segments it covers
        Assert.True(store.Journal.FirstSequence > 1);
        await Assert.ThrowsAsync<global::Folio.JournalPositionPurgedException>(
            () => store.BackupAsync(new Pipe().Writer, 1).AsTask());
    }

    /// <summary>Four writers overwriting their own 400 ids each, and checkpoints every
    /// <paramref name="checkpointEvery"/> ms (each frees chunks and purges the journal it covers), until
    /// <paramref name="stop"/>.</summary>
    private static Task[] StartWritersAndCheckpoints(DocumentStore store, History model, int seed, int checkpointEvery,
        CancellationToken stop) =>
        Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
        {
            var random = new Random(seed + w);
            int n = 0;
            while (!stop.IsCancellationRequested)
            {
                await model.WriteAsync(store, random, $"w{w}-{n++ % 400:D4}");
            }
        }, CancellationToken.None)).Append(Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                await store.CheckpointAsync();
                await Task.Delay(checkpointEvery, CancellationToken.None);
            }
        }, CancellationToken.None)).ToArray();

    /// <summary>Restores each backup into a folder of its own and checks it against the model at its
    /// sequence.</summary>
    private static async Task AssertRestoreTheirSequencesAsync(string root,
        IEnumerable<(MemoryStream Bytes, BackupResult Result)> backups, DocumentStoreOptions options, History model)
    {
        int i = 0;
        foreach ((MemoryStream bytes, BackupResult result) in backups)
        {
            string target = Path.Combine(root, $"restored{i++}");
            bytes.Position = 0;
            RestoreResult restored = await DocumentStore.RestoreAsync(bytes, target);
            Assert.Equal(result.Sequence, restored.Sequence);
            await using DocumentStore copy = DocumentStore.Open(target, options);
            AssertMatchesModel(copy, model.At(restored.Sequence));
        }
    }

    private static string[] StagingFolders(string target) =>
        Directory.GetDirectories(Path.GetDirectoryName(target)!, Path.GetFileName(target) + ".restoring-*");

    private static DocumentStoreOptions SmallOptions()
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CacheSize = 4 << 20;
        return options;
    }

    private static async Task<byte[]> SmallBackupAsync(string root)
    {
        await using DocumentStore store = DocumentStore.Open(Path.Combine(root, "small-source"), SmallOptions());
        var model = new History();
        await WriteHistoryAsync(store, model, 0, 120, seed: 13);
        await store.CheckpointAsync();
        await WriteHistoryAsync(store, model, 120, 60, seed: 14);
        var bytes = new MemoryStream();
        await store.BackupAsync(bytes);
        return bytes.ToArray();
    }

    private static async Task WriteHistoryAsync(DocumentStore store, History model, int start, int count, int seed)
    {
        var random = new Random(seed);
        for (int i = start; i < start + count; i++)
        {
            await model.WriteAsync(store, random, $"d{random.Next(Math.Max(10, start + count) / 2):D4}");
        }
    }

    private static async Task DrainSlowlyAsync(PipeReader reader, Stream into, int delayEvery)
    {
        long sinceDelay = 0;
        while (true)
        {
            ReadResult result = await reader.ReadAsync();
            foreach (ReadOnlyMemory<byte> segment in result.Buffer)
            {
                into.Write(segment.Span);
                sinceDelay += segment.Length;
            }

            reader.AdvanceTo(result.Buffer.End);
            if (result.IsCompleted)
            {
                await reader.CompleteAsync();
                return;
            }

            if (sinceDelay >= delayEvery)
            {
                sinceDelay = 0;
                await Task.Delay(2);
            }
        }
    }

    private static async Task<DateTimeOffset> TimestampOfAsync(DocumentStore store, long sequence)
    {
        await foreach (DocumentChange change in store.Changes.ReadAsync(sequence))
        {
            return change.Timestamp;
        }

        throw new InvalidOperationException($"no change at {sequence}");
    }

    /// <summary>Every live document of the test's collections at the store's last commit (a quiet store).</summary>
    private static IEnumerable<StoredDocument> AllDocuments(DocumentStore store)
    {
        long at = store.LastCommittedSequence;
        foreach (string collection in new[] { "docs", "orders", "people" })
        {
            foreach ((string id, Folio.Documents.DocumentVersion version) in
                store.Index.Range(collection, null, null, descending: false, at))
            {
                yield return new StoredDocument(collection, id, version.Json, version.Sequence,
                    new DateTimeOffset(version.TimestampTicks, TimeSpan.Zero));
            }
        }
    }

    private static void AssertSameDocuments(DocumentStore expected, DocumentStore actual)
    {
        List<StoredDocument> left = AllDocuments(expected).ToList();
        List<StoredDocument> right = AllDocuments(actual).ToList();
        Assert.Equal(left.Count, right.Count);
        for (int i = 0; i < left.Count; i++)
        {
            Assert.Equal(left[i].Collection, right[i].Collection);
            Assert.Equal(left[i].Id, right[i].Id);
            Assert.Equal(left[i].Version, right[i].Version);
            Assert.Equal(left[i].LastModified, right[i].LastModified);
            Assert.True(left[i].Json.Span.SequenceEqual(right[i].Json.Span), $"{left[i].Id} differs");
        }
    }

    private static void AssertMatchesModel(DocumentStore store, SortedDictionary<DocumentKey, string> expected)
    {
        var actual = new SortedDictionary<DocumentKey, string>(History.KeyOrder);
        foreach (StoredDocument document in AllDocuments(store))
        {
            actual[new DocumentKey(document.Collection, document.Id)] = Encoding.UTF8.GetString(document.Json.Span);
        }

        Assert.Equal(expected.Count, actual.Count);
        foreach ((DocumentKey key, string json) in expected)
        {
            Assert.True(actual.TryGetValue(key, out string? found), $"{key} is missing");
            Assert.Equal(json, found);
        }
    }

    /// <summary>A destination that pauses for a millisecond after every 8 KiB written (a slow disk or
    /// network).</summary>
    private static AfterWriteStream SlowStream(Stream inner)
    {
        long sincePause = 0;
        return new AfterWriteStream(inner, async (written, cancellationToken) =>
        {
            sincePause += written;
            if (sincePause >= 8 * 1024)
            {
                sincePause = 0;
                await Task.Delay(1, cancellationToken);
            }
        });
    }

    /// <summary>Every acknowledged commit by sequence; the state at a sequence is the commits up to it.</summary>
    private sealed class History
    {
        public static readonly Comparer<DocumentKey> KeyOrder = Comparer<DocumentKey>.Create((a, b) =>
        {
            int c = string.CompareOrdinal(a.Collection, b.Collection);
            return c != 0 ? c : string.CompareOrdinal(a.Id, b.Id);
        });

        private readonly ConcurrentDictionary<long, (DocumentKey Key, string? Json)> _commits = new();

        public long LastSequence => _commits.IsEmpty ? 0 : _commits.Keys.Max();

        /// <summary>A history that goes on from this one's commits so far (a copy of the store).</summary>
        public History Clone()
        {
            var clone = new History();
            foreach (KeyValuePair<long, (DocumentKey, string?)> commit in _commits)
            {
                clone._commits[commit.Key] = commit.Value;
            }

            return clone;
        }

        public async Task WriteAsync(DocumentStore store, Random random, string id)
        {
            string collection = random.Next(3) == 0 ? "orders" : "people";
            if (random.Next(6) == 0)
            {
                long deleted = await store.DeleteAsync(collection, id);
                _commits[deleted] = (new DocumentKey(collection, id), null);
                return;
            }

            string json = $"{{\"id\":\"{id}\",\"n\":{random.Next()},\"pad\":\"{new string('p', random.Next(200))}\"}}";
            long sequence = await store.PutAsync(collection, id, Encoding.UTF8.GetBytes(json));
            _commits[sequence] = (new DocumentKey(collection, id), json);
        }

        public SortedDictionary<DocumentKey, string> At(long sequence)
        {
            var state = new SortedDictionary<DocumentKey, string>(KeyOrder);
            foreach ((long at, (DocumentKey key, string? json)) in _commits.OrderBy(pair => pair.Key))
            {
                if (at > sequence)
                {
                    break;
                }

                if (json is null)
                {
                    state.Remove(key);
                }
                else
                {
                    state[key] = json;
                }
            }

            return state;
        }
    }

    [Fact]
    public async Task A_restore_that_fills_the_disk_fails_with_an_IOException_and_leaves_nothing()
    {
        using var dir = new TempDirectory();
        string source = Path.Combine(dir.Path, "source");
        string backup = Path.Combine(dir.Path, "store.backup");
        DocumentStoreOptions sourceOptions = TestStoreOptions.TinySegments();
        sourceOptions.CheckpointThreshold = long.MaxValue; // the backup is all journal: the restore appends it
        sourceOptions.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using (var store = DocumentStore.Open(source, sourceOptions))
        {
            byte[] json = Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('x', 2000)}\"}}");
            for (int i = 0; i < 400; i += 4)
            {
                var batch = new CommitBatch();
                for (int k = i; k < i + 4; k++)
                {
                    batch.Put("Doc", $"d{k}", json);
                }

                await store.WriteAsync(batch);
            }

            await store.BackupAsync(backup);
        }

        // A disk with room for the restored journal's first segments only.
        string disk = Path.Combine(dir.Path, "disk");
        Directory.CreateDirectory(disk);
        var files = new Folio.Storage.CapacityLimitedFileSystem(disk, 512 * 1024);
        DocumentStoreOptions storeOptions = TestStoreOptions.TinySegments();
        storeOptions.FileSystem = files;
        string target = Path.Combine(disk, "restored");
        var error = await Assert.ThrowsAsync<IOException>(async () =>
        {
            await using FileStream stream = File.OpenRead(backup);
            await Folio.Backups.StoreRestorer.RestoreAsync([PipeReader.Create(stream)], target, new RestoreOptions(),
                storeOptions, CancellationToken.None);
        });
        Assert.Contains("disk is full", error.Message, StringComparison.Ordinal);
        Assert.True(files.Refused > 0);
        Assert.Empty(Directory.GetFileSystemEntries(disk));

        RestoreResult restored = await DocumentStore.RestoreAsync(backup, target);
        Assert.Equal(400, restored.Documents);
    }

    [Fact]
    public async Task A_restore_sends_the_chunks_to_the_disk_as_it_writes_them_and_fails_when_that_fails()
    {
        using var dir = new TempDirectory();
        string source = Path.Combine(dir.Path, "source");
        string backup = Path.Combine(dir.Path, "store.backup");
        await using (var store = DocumentStore.Open(source, TestStoreOptions.ManualCheckpoints()))
        {
            // About 12 MB of pages: chunk bytes for several write-back pieces of 4 MiB.
            byte[] json = Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('x', 1000)}\"}}");
            for (int i = 0; i < 10_000; i += 500)
            {
                var batch = new CommitBatch();
                for (int k = i; k < i + 500; k++)
                {
                    batch.Put("Doc", $"d{k:D5}", json);
                }

                await store.WriteAsync(batch);
            }

            await store.CheckpointAsync();
            await store.BackupAsync(backup);
        }

        var files = new FaultInjectingFileSystem
        {
            Matches = static path => Path.GetFileName(path) == DocumentStore.DataFileName,
        };
        DocumentStoreOptions storeOptions = TestStoreOptions.ManualCheckpoints();
        storeOptions.FileSystem = files;
        string target = Path.Combine(dir.Path, "restored");
        async Task<RestoreResult> RestoreAsync()
        {
            await using FileStream stream = File.OpenRead(backup);
            return await Folio.Backups.StoreRestorer.RestoreAsync([PipeReader.Create(stream)], target,
                new RestoreOptions(), storeOptions, CancellationToken.None);
        }

        // A write-back that fails fails the restore, which leaves nothing.
        files.Arm(FileFault.WriteBackFails, 1);
        await Assert.ThrowsAnyAsync<IOException>(RestoreAsync);
        Assert.Equal(FileFault.None, files.Armed);
        Assert.Equal(["source", "store.backup"],
            Directory.GetFileSystemEntries(dir.Path).Select(Path.GetFileName).Order(StringComparer.Ordinal));

        files.WriteBacks.Clear();
        RestoreResult restored = await RestoreAsync();
        Assert.Equal(10_000, restored.Documents);

        // Pieces of at most 4 MiB (and a frame), started in file order within the chunks, never overlapping, the
        // oldest waited for first and at most 32 MiB on their way; together they cover the chunks' bytes.
        const long Piece = 4L * 1024 * 1024;
        var onItsWay = new Queue<(long Offset, long Length)>();
        long inFlight = 0;
        long started = 0;
        var ranges = new List<(long Offset, long Length)>();
        foreach ((string _, long offset, long length, bool wait) in files.WriteBacks)
        {
            if (wait)
            {
                Assert.Equal(onItsWay.Dequeue(), (offset, length));
                inFlight -= length;
                continue;
            }

            Assert.True(length is > 0 and < Piece + (1024 * 1024), $"a piece of {length} bytes");
            Assert.True(inFlight + length <= 8 * Piece || inFlight == 0, $"{inFlight} + {length} bytes on their way");
            Assert.All(ranges, earlier => Assert.True(
                offset >= earlier.Offset + earlier.Length || offset + length <= earlier.Offset, "pieces overlap"));
            ranges.Add((offset, length));
            onItsWay.Enqueue((offset, length));
            inFlight += length;
            started += length;
        }

        long dataFile = new FileInfo(Path.Combine(target, DocumentStore.DataFileName)).Length;
        Assert.True(ranges.Count >= 3, $"{ranges.Count} pieces");
        Assert.True(ranges.All(range => range.Offset >= 8192 && range.Offset + range.Length <= dataFile));
        Assert.True(started > dataFile * 9 / 10, $"{started} of {dataFile} bytes sent");
    }

    [Fact]
    public async Task A_restore_removes_what_killed_restores_into_its_folder_left_and_keeps_running_ones()
    {
        using var dir = new TempDirectory();
        string backup = Path.Combine(dir.Path, "store.backup");
        await using (var store = DocumentStore.Open(Path.Combine(dir.Path, "source"), TestStoreOptions.SmallSegments()))
        {
            for (int i = 0; i < 10; i++)
            {
                await store.PutAsync("Doc", $"d{i}", "{}"u8.ToArray());
            }

            await store.BackupAsync(backup);
        }

        // What a restore killed midway leaves: its staging folder, half written, and its lock file, which no one holds.
        string target = Path.Combine(dir.Path, "restored");
        string abandoned = target + ".restoring-deadbeef";
        Directory.CreateDirectory(Path.Combine(abandoned, "journal"));
        File.WriteAllBytes(Path.Combine(abandoned, DocumentStore.DataFileName), new byte[4096]);
        File.WriteAllBytes(abandoned + ".lock", []);
        string older = target + ".restoring-0ld0ld00"; // one without a lock file
        Directory.CreateDirectory(older);
        File.WriteAllBytes(target + ".restoring-0ddba11.lock", []); // a lock file whose restore moved its folder

        // A restore into the same folder still running (in this process or another) holds its lock.
        string running = target + ".restoring-0badcafe";
        Directory.CreateDirectory(running);
        using (Folio.Storage.PhysicalFileSystem.Instance.AcquireExclusiveLock(running + ".lock"))
        {
            RestoreResult restored = await DocumentStore.RestoreAsync(backup, target);
            Assert.Equal(10, restored.Documents);
        }

        Assert.Equal(
            ["restored", "restored.restoring-0badcafe", "restored.restoring-0badcafe.lock", "source", "store.backup"],
            Directory.GetFileSystemEntries(dir.Path).Select(Path.GetFileName).Order(StringComparer.Ordinal));

        // Into a folder whose parents do not exist yet.
        string nested = Path.Combine(dir.Path, "new", "parents", "restored");
        Assert.Equal(10, (await DocumentStore.RestoreAsync(backup, nested)).Documents);
        Assert.Equal(["restored"], Directory.GetFileSystemEntries(Path.GetDirectoryName(nested)!)
            .Select(Path.GetFileName));
    }

    [Fact]
    public async Task A_backup_into_a_file_leaves_that_file_alone_when_it_succeeds_and_nothing_when_it_fails()
    {
        // A backup is written under a partial name and renamed once whole and fsynced (a killed backup leaves only
        // the partial file): a success leaves the backup file alone, a failure deletes its partial file.
        using var dir = new TempDirectory();
        string backups = Path.Combine(dir.Path, "backups");
        Directory.CreateDirectory(backups);
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"), SmallOptions());
        for (int i = 0; i < 50; i++)
        {
            await store.PutAsync("Doc", $"d{i}", "{}"u8.ToArray());
        }

        BackupResult backup = await store.BackupAsync(Path.Combine(backups, "app.folio"));
        Assert.Equal(["app.folio"], Directory.GetFileSystemEntries(backups).Select(Path.GetFileName));
        Assert.Equal(backup.Bytes, new FileInfo(Path.Combine(backups, "app.folio")).Length);

        using var cancelled = new CancellationTokenSource();
        await cancelled.CancelAsync();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(
            () => store.BackupAsync(Path.Combine(backups, "cancelled.folio"), cancelled.Token).AsTask());
        Assert.Equal(["app.folio"], Directory.GetFileSystemEntries(backups).Select(Path.GetFileName));
    }

    [Fact]
    public async Task A_backup_into_a_file_deletes_what_killed_backups_into_it_left_and_keeps_running_ones()
    {
        using var dir = new TempDirectory();
        string backups = Path.Combine(dir.Path, "backups");
        Directory.CreateDirectory(backups);
        string target = Path.Combine(backups, "nightly.folio");
        string abandoned = target + ".partial-0badf00d"; // a killed backup's: nothing holds it
        string running = target + ".partial-00c0ffee"; // held open as a running backup holds its own
        string other = Path.Combine(backups, "weekly.folio.partial-0badf00d"); // another target's
        foreach (string file in new[] { abandoned, running, other })
        {
            await File.WriteAllBytesAsync(file, new byte[4096]);
        }

        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"), SmallOptions());
        await store.PutAsync("Doc", "d", "{}"u8.ToArray());
        using (new FileStream(running, FileMode.Open, FileAccess.Write, FileShare.None))
        {
            await store.BackupAsync(target);
        }

        Assert.Equal(["nightly.folio", "nightly.folio.partial-00c0ffee", "weekly.folio.partial-0badf00d"],
            Directory.GetFileSystemEntries(backups).Select(Path.GetFileName).Order(StringComparer.Ordinal));
        // A backup into a folder that does not exist yet makes it.
        string deeper = Path.Combine(backups, "2026", "11", "29.folio");
        await store.BackupAsync(deeper);
        Assert.True(File.Exists(deeper));

        // Once its backup is gone, the next backup into that name (here from the files) deletes it too.
        File.Delete(target);
        await DocumentStore.BackupFilesAsync(Path.Combine(dir.Path, "store"), target);
        Assert.False(File.Exists(running));
        Assert.True(File.Exists(target));
    }
}
