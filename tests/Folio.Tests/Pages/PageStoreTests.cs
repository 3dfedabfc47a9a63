using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

public sealed class PageStoreTests
{
    [Fact]
    public void Eight_collections_checkpointed_in_parallel_write_the_same_file_as_a_sequential_checkpoint()
    {
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        using var parallel = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "parallel.folio"));
        using var sequential = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "sequential.folio"));
        for (int round = 0; round < 3; round++)
        {
            Fill(model, collections: 8, documents: 3_000, round);
            List<CollectionChanges> changes = model.Changes();
            parallel.Checkpoint(model.Sequence, changes, parallel: true);
            sequential.Checkpoint(model.Sequence, changes, parallel: false);
            model.Checkpointed();
            PageStoreModel.AssertHolds(model.Durable, parallel.Current, parallel.Reader);
            PageStoreModel.AssertHolds(model.Durable, sequential.Current, sequential.Reader);
        }

        Assert.Equal(File.ReadAllBytes(sequential.Path), File.ReadAllBytes(parallel.Path));
    }

    [Fact]
    public void A_page_dropped_from_memory_after_a_parallel_checkpoint_reads_back_from_its_final_position()
    {
        // Seed 004's pitfall: serialized in per-tree buffers and then placed, every in-memory reference must carry
        // the page's final position, or a dropped page is re-read from the wrong place. Positions are checked by
        // each page's checksum, so a wrong one fails loudly.
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        for (int round = 0; round < 3; round++)
        {
            Fill(model, collections: 8, documents: 4_000, round);
            store.Checkpoint(model.Sequence, model.Changes(), parallel: true);
            model.Checkpointed();
            // The checkpoint itself leaves every saved leaf to the buffer pool, so each read below comes from a page's
            // final position; the resident branches are dropped here too.
            Assert.Equal(0, PageStoreModel.CachedBelowResidentLevels(store.Current));
            PageStoreModel.DropCachedPages(store.Current);
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
            Assert.True(store.Cache.Pool.Misses > 8 * 20, "multi-level trees were read back from the data file");
        }
    }

    [Fact]
    public void Pages_of_ids_and_values_of_every_size_split_to_fit_a_buffer_pool_frame()
    {
        // Entries from 30 bytes to 6 KiB (ids up to 2,048 UTF-16 code units, values up to the inline limit): a split
        // by count could leave a half past the target when the large entries gather in it; the split by bytes keeps
        // every page within a frame, so no read bypasses the pool.
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        var random = new Random(17);
        for (int round = 0; round < 4; round++)
        {
            for (int i = 0; i < 1_500; i++)
            {
                bool large = random.Next(4) == 0;
                string id = $"{random.Next(3_000):D5}" + new string('x', large ? random.Next(2_043) : random.Next(8));
                int length = large ? random.Next(PageFormat.OverflowThreshold + 1) : random.Next(40);
                model.Put("mixed", id, PageStoreModel.Value(random.Next(), length));
            }

            store.Checkpoint(model.Sequence, model.Changes(), parallel: false);
            model.Checkpointed();
            PageStoreModel.DropCachedPages(store.Current);
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
        }

        Assert.True(store.Cache.Pool.Misses > 100, "the pages were read through the pool");
        Assert.Equal(0, store.Cache.OversizedReads);
    }

    [Fact]
    public void Trees_many_times_larger_than_the_cache_read_back_whole_while_pages_are_evicted()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        const long Cache = 16 * PageCache.FrameSize;
        using (var store = PageStore.Open(PhysicalFileSystem.Instance, path, cacheBytes: Cache))
        {
            for (int round = 0; round < 3; round++)
            {
                Fill(model, collections: 4, documents: 3_000, round);
                store.Checkpoint(model.Sequence, model.Changes());
                model.Checkpointed();
                PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
            }

            Assert.True(store.UsedBytes > 20 * Cache, $"the data file ({store.UsedBytes} bytes) outgrew the cache");
            Assert.True(store.Cache.Pool.Evictions > 100, "pages were evicted and read again");
            Assert.Equal(0, store.Cache.Pool.PinnedFrames);
        }

        using var reopened = PageStore.Open(PhysicalFileSystem.Instance, path, cacheBytes: Cache);
        PageStoreModel.AssertHolds(model.Durable, reopened.Current, reopened.Reader);
        Assert.Equal(0, reopened.Cache.Pool.PinnedFrames);
    }

    [Fact]
    public void A_pinned_checkpoint_reads_its_state_across_later_checkpoints_and_its_chunks_are_reused_after()
    {
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        Fill(model, collections: 2, documents: 2_000, round: 0);
        store.Checkpoint(model.Sequence, model.Changes());
        model.Checkpointed();
        var pinnedState = model.CopyDurable();
        PageCheckpoint pinned = store.Pin();
        PageStoreModel.DropCachedPages(pinned);
        long firstChunks = store.ChunkCount;

        for (int round = 1; round <= 5; round++)
        {
            Fill(model, collections: 2, documents: 2_000, round);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
        }

        // Every page of the first chunk was superseded, yet the pinned checkpoint still reads it from disk.
        Assert.True(store.ChunkCount > firstChunks);
        PageStoreModel.AssertHolds(pinnedState, pinned, store.Reader);
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);

        PageStore.Unpin(pinned);
        for (int round = 6; round <= 12; round++)
        {
            Fill(model, collections: 2, documents: 2_000, round);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
        }

        // Unpinned, dead chunks are freed by the next checkpoint: only what the last one superseded still waits.
        Assert.InRange(store.WaitingChunks, 0, 1);
        PageStoreModel.DropCachedPages(store.Current);
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
    }

    [Fact]
    public void Checkpoints_that_change_no_page_do_not_leak_their_chunks()
    {
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        Fill(model, collections: 1, documents: 500, round: 0);
        store.Checkpoint(model.Sequence, model.Changes());
        model.Checkpointed();
        long used = store.UsedBytes;
        for (int i = 0; i < 50; i++)
        {
            // A delete of an id that is not there: the checkpoint writes a chunk holding no page.
            model.Delete("c0", $"absent/{i}");
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            Assert.Equal(0, store.LastCheckpoint.Pages);
        }

        Assert.InRange(store.ChunkCount, 1, 3);
        Assert.InRange(store.UsedBytes, used, used + (2 * ChunkFormat.Alignment));
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
    }

    [Fact]
    public void Overwriting_the_same_documents_keeps_the_file_bounded()
    {
        using var dir = new TempDirectory();
        var model = new PageStoreModel();
        string path = Path.Combine(dir.Path, "data.folio");
        var store = PageStore.Open(PhysicalFileSystem.Instance, path);
        long afterFirst = 0;
        long largestFirstHalf = 0;
        long largestSecondHalf = 0;
        for (int round = 0; round < 60; round++)
        {
            Fill(model, collections: 1, documents: 1_000, round);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            long length = new FileInfo(path).Length;
            afterFirst = round == 0 ? length : afterFirst;
            if (round < 30)
            {
                largestFirstHalf = Math.Max(largestFirstHalf, length);
            }
            else
            {
                largestSecondHalf = Math.Max(largestSecondHalf, length);
            }

            if (round % 20 == 19)
            {
                store.Dispose();
                store = PageStore.Open(PhysicalFileSystem.Instance, path);
            }
        }

        // A steady state a few chunks wide (the live one, those the previous checkpoint still reaches, free holes
        // between them; a free tail is given back) that stops growing: the second 30 rounds never reach further than
        // the first 30 did.
        Assert.True(largestSecondHalf <= 4 * afterFirst + (64 * 1024),
            $"file grew to {largestSecondHalf} bytes from {afterFirst}");
        Assert.True(largestSecondHalf <= largestFirstHalf + (64 * 1024),
            $"file grew to {largestSecondHalf} bytes, {largestFirstHalf} at most in the first half");
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
        store.Dispose();
    }

    [Fact]
    public void A_torn_newest_header_falls_back_to_the_previous_checkpoint()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        Dictionary<string, SortedDictionary<string, (long, byte[])>> first;
        using (var store = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            Fill(model, collections: 3, documents: 500, round: 0);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            first = model.CopyDurable();
            Fill(model, collections: 3, documents: 500, round: 1);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            Assert.Equal(2, store.Current.Generation);
        }

        // Generation 2 lives in slot 0: tear it.
        FileDamage.FlipByte(path, 20, 0x5A);
        using (var reopened = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            Assert.Equal(1, reopened.Current.Generation);
            PageStoreModel.AssertHolds(first, reopened.Current, reopened.Reader);
        }
    }

    [Fact]
    public void A_flipped_bit_in_a_page_is_corruption_naming_the_file_and_offset()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        using (var store = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            Fill(model, collections: 1, documents: 2_000, round: 0);
            store.Checkpoint(model.Sequence, model.Changes());
        }

        // A byte inside the pages of the only chunk (which starts right after the two header slots).
        FileDamage.FlipByte(path, DataFileHeader.DataStart + 5_000, 0x5A);
        using var reopened = PageStore.Open(PhysicalFileSystem.Instance, path);
        var error = Assert.Throws<StoreCorruptedException>(() =>
            BTree.Range(reopened.Current.Collections["c0"].Root, null, null, false, reopened.Reader).ToList());
        Assert.Equal(path, error.FilePath);
        Assert.InRange(error.Offset, DataFileHeader.DataStart, DataFileHeader.DataStart + 5_000);
        Assert.Contains("checksum", error.Message, StringComparison.Ordinal);
        Assert.Equal(0, reopened.Cache.Pool.PinnedFrames); // the failed load gave its frame back
    }

    [Fact]
    public void A_header_pointing_past_the_end_of_the_file_is_corruption()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        using (var store = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            Fill(model, collections: 1, documents: 1_000, round: 0);
            store.Checkpoint(model.Sequence, model.Changes());
        }

        using (var stream = new FileStream(path, FileMode.Open))
        {
            stream.SetLength(stream.Length - 4096);
        }

        var error = Assert.Throws<StoreCorruptedException>(() => PageStore.Open(PhysicalFileSystem.Instance, path));
        Assert.Equal(path, error.FilePath);
        Assert.Contains("past the end of the file", error.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_damaged_chunk_table_is_corruption_not_a_smaller_store()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        using (var store = PageStore.Open(PhysicalFileSystem.Instance, path))
        {
            Fill(model, collections: 1, documents: 300, round: 0);
            store.Checkpoint(model.Sequence, model.Changes());
        }

        long length = new FileInfo(path).Length;
        FileDamage.FlipByte(path, length - 10, 0x5A);
        var error = Assert.Throws<StoreCorruptedException>(() => PageStore.Open(PhysicalFileSystem.Instance, path));
        Assert.Contains("metadata checksum", error.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(FileFault.WriteFails, 0)]
    [InlineData(FileFault.WriteFails, 1)]
    [InlineData(FileFault.ShortWrite, 0)]
    [InlineData(FileFault.ShortWrite, 1)]
    [InlineData(FileFault.DiskFull, 0)]
    [InlineData(FileFault.DiskFull, 1)]
    [InlineData(FileFault.SyncFails, 0)]
    [InlineData(FileFault.SyncFails, 1)]
    [InlineData(FileFault.WriteBackFails, 0)]
    public void A_failed_write_or_fsync_of_a_checkpoint_leaves_the_previous_checkpoint_current(FileFault fault,
        int skip)
    {
        // A checkpoint writes its chunk, starts its write-back, fsyncs, writes its header slot, fsyncs: skip 0 hits
        // the chunk, 1 the header.
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var fileSystem = new FaultInjectingFileSystem
        {
            Matches = static p => p.EndsWith(".folio", StringComparison.Ordinal),
        };
        var model = new PageStoreModel();
        using (var store = PageStore.Open(fileSystem, path))
        {
            for (int round = 0; round < 4; round++)
            {
                Fill(model, collections: 3, documents: 800, round);
                List<CollectionChanges> changes = model.Changes();
                if (round is 1 or 2)
                {
                    PageCheckpoint before = store.Current;
                    fileSystem.Arm(fault, skip);
                    Assert.ThrowsAny<IOException>(() => store.Checkpoint(model.Sequence, changes));
                    Assert.Equal(FileFault.None, fileSystem.Armed);
                    Assert.Same(before, store.Current);
                    PageStoreModel.AssertHolds(model.CopyDurableOf(before), store.Current, store.Reader);
                }

                // The same changes (and any since) go into the next checkpoint, which succeeds.
                store.Checkpoint(model.Sequence, changes);
                model.Checkpointed();
                PageStoreModel.DropCachedPages(store.Current);
                PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
            }
        }

        using var reopened = PageStore.Open(PhysicalFileSystem.Instance, path);
        Assert.Equal(4, reopened.Current.Generation);
        PageStoreModel.AssertHolds(model.Durable, reopened.Current, reopened.Reader);
    }

    [Fact]
    public void A_checkpoint_starts_each_chunks_write_back_once_written_and_keeps_at_most_one_window_on_its_way()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var fileSystem = new FaultInjectingFileSystem
        {
            Matches = static p => p.EndsWith(".folio", StringComparison.Ordinal),
        };
        var model = new PageStoreModel();
        using var store = PageStore.Open(fileSystem, path);
        Fill(model, collections: 3, documents: 8_000, round: 0); // about 13 MB of pages: several chunks
        store.Checkpoint(model.Sequence, model.Changes());
        model.Checkpointed();

        const long Window = 4L * 1024 * 1024;
        var started = new List<(long Offset, long Length)>();
        var onItsWay = new Queue<(long Offset, long Length)>();
        long inFlight = 0;
        foreach ((string _, long offset, long length, bool wait) in fileSystem.WriteBacks)
        {
            if (wait)
            {
                // The oldest chunk still on its way, and only to make room for the next.
                Assert.Equal(onItsWay.Dequeue(), (offset, length));
                inFlight -= length;
                continue;
            }

            Assert.True(inFlight == 0 || inFlight + length <= Window, $"{inFlight} + {length} bytes on their way");
            Assert.True(length is > 0 and <= Window + (64 * 1024), $"a chunk of {length} bytes");
            Assert.All(started, earlier => Assert.True(
                offset >= earlier.Offset + earlier.Length || offset + length <= earlier.Offset, "chunks overlap"));
            started.Add((offset, length));
            onItsWay.Enqueue((offset, length));
            inFlight += length;
        }

        Assert.True(started.Count >= 3, $"{started.Count} chunks");
        Assert.True(started.Sum(chunk => chunk.Length) <= new FileInfo(path).Length);
        PageStoreModel.DropCachedPages(store.Current);
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
    }

    [Fact]
    public void A_checkpoint_that_fails_for_want_of_space_gives_back_what_its_chunks_took()
    {
        // On a full disk the journal can only rotate into space a failed checkpoint did not keep.
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var fileSystem = new FaultInjectingFileSystem
        {
            Matches = static p => p.EndsWith(".folio", StringComparison.Ordinal),
        };
        var model = new PageStoreModel();
        using (var store = PageStore.Open(fileSystem, path))
        {
            store.PagesPerChunk = 4;
            Fill(model, collections: 2, documents: 500, round: 0);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            long before = new FileInfo(path).Length;

            Fill(model, collections: 2, documents: 500, round: 1);
            List<CollectionChanges> changes = model.Changes();
            int writes = fileSystem.Writes;
            fileSystem.Arm(FileFault.DiskFull, skip: 3); // three chunks land, the fourth finds the disk full
            Assert.ThrowsAny<IOException>(() => store.Checkpoint(model.Sequence, changes));
            Assert.Equal(writes + 4, fileSystem.Writes);
            Assert.InRange(new FileInfo(path).Length, before, before + 4095); // the last chunk's extent is aligned

            store.Checkpoint(model.Sequence, changes);
            model.Checkpointed();
            PageStoreModel.DropCachedPages(store.Current);
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
        }

        using var reopened = PageStore.Open(PhysicalFileSystem.Instance, path);
        Assert.Equal(2, reopened.Current.Generation);
        PageStoreModel.AssertHolds(model.Durable, reopened.Current, reopened.Reader);
    }

    [Fact]
    public void A_checkpoint_reports_its_pages_bytes_fill_rate_and_freed_chunks_and_logs_them()
    {
        using var dir = new TempDirectory();
        using var logs = new CapturingLoggerFactory();
        var fileSystem = new FaultInjectingFileSystem
        {
            Matches = static p => p.EndsWith(".folio", StringComparison.Ordinal),
        };
        var model = new PageStoreModel();
        string path = Path.Combine(dir.Path, "data.folio");
        using var store = PageStore.Open(fileSystem, path, logs.CreateLogger("pages"));
        int freed = 0;
        for (int round = 0; round < 6; round++)
        {
            Fill(model, collections: 2, documents: 1_000, round);
            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            CheckpointStatistics statistics = store.LastCheckpoint;
            Assert.Equal(round + 1, statistics.Generation);
            Assert.Equal(model.Sequence, statistics.Sequence);
            Assert.True(statistics.Pages > 2 * 8, $"{statistics.Pages} pages");
            Assert.InRange(statistics.Bytes, 100_000, new FileInfo(path).Length);
            Assert.InRange(statistics.FillRate, 0.01, 1);
            Assert.Equal(round > 0, statistics.SupersededPages > 0);
            CheckpointPhases phases = statistics.Phases;
            Assert.True(phases.Apply > TimeSpan.Zero && phases.Serialize > TimeSpan.Zero && phases.Write > TimeSpan.Zero
                && phases.Publish >= TimeSpan.Zero, $"{phases}");
            TimeSpan phasesTotal = phases.Apply + phases.Serialize + phases.Write + phases.Publish;
            Assert.True((statistics.Elapsed - phasesTotal).Duration() < TimeSpan.FromMilliseconds(1),
                $"{statistics.Elapsed} in all, {phases}");
            freed += statistics.FreedChunks;
        }

        Assert.True(freed > 0, "overwritten chunks were freed");
        Assert.Contains(logs.Lines, line => line.Id.Id == 5002 && line.Message.Contains("Checkpoint 6 (sequence",
            StringComparison.Ordinal) && line.Message.Contains(" ms (apply ", StringComparison.Ordinal));

        fileSystem.Arm(FileFault.SyncFails);
        Fill(model, collections: 2, documents: 100, round: 7);
        Assert.ThrowsAny<IOException>(() => store.Checkpoint(model.Sequence, model.Changes()));
        Assert.Contains(logs.Lines, line => line.Level == Microsoft.Extensions.Logging.LogLevel.Warning
            && line.Id.Id == 5003 && line.Message.Contains("checkpoint 6 stays current", StringComparison.Ordinal));
    }

    [Fact]
    public void Ids_added_in_ascending_order_leave_full_leaves_behind()
    {
        using var dir = new TempDirectory();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        var model = new PageStoreModel();
        for (int round = 0; round < 4; round++)
        {
            for (int i = 0; i < 5_000; i++)
            {
                model.Put("c", $"orders/{(round * 5_000) + i:D8}", PageStoreModel.Value(i, 40));
            }

            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
        }

        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
        TreeNode root = store.Current.Collections["c"].Root.GetNode(store.Reader);
        (int leaves, int entries) = CountLeaves(root, store.Reader);
        Assert.Equal(20_000, entries);
        Assert.True(entries / (double)leaves > 0.9 * PageFormat.MaxLeafEntries,
            $"{leaves} leaves for {entries} entries");

        static (int Leaves, int Entries) CountLeaves(TreeNode node, IPageReader reader)
        {
            if (node.IsLeaf)
            {
                return (1, node.Count);
            }

            (int leaves, int entries) = (0, 0);
            foreach (PageReference child in node.Children)
            {
                (int l, int e) = CountLeaves(child.GetNode(reader), reader);
                leaves += l;
                entries += e;
            }

            return (leaves, entries);
        }
    }

    internal static void Fill(PageStoreModel model, int collections, int documents, int round)
    {
        var random = new Random((round * 31) + documents);
        for (int c = 0; c < collections; c++)
        {
            string collection = $"c{c}";
            for (int i = 0; i < documents; i++)
            {
                int roll = random.Next(100);
                string id = $"doc/{random.Next(documents * 2):D6}";
                if (roll < 10 && round > 0)
                {
                    model.Delete(collection, id);
                }
                else
                {
                    int length = roll < 3 ? 3_000 + random.Next(20_000) : 30 + random.Next(300);
                    model.Put(collection, id, PageStoreModel.Value(random.Next(), length));
                }
            }
        }
    }
}
