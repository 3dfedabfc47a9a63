using System.Text;
using Folio.Documents;
using Folio.Pages;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Checkpoints written in slices by id range (<see cref="CheckpointSlicer"/>, <see cref="CheckpointPass"/>): a large
/// checkpoint becomes several durable checkpoints, every document and count stays right, and a checkpoint left ahead
/// of its sequence for some ids (a failure between slices) reads, counts, reopens, backs up and restores as the model
/// says, until the next checkpoint settles it.
/// </summary>
public sealed class CheckpointSliceTests
{
    private const string Collection = "docs";

    [Fact]
    public async Task A_checkpoint_larger_than_a_slice_is_written_in_slices_and_keeps_every_document_and_count()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            await StoreCompactionTests.PutAsync(store, model, Enumerable.Range(0, 3000), round: 0, pad: 250);
            await store.CheckpointAsync();
            long before = store.Pages.Current.Generation;
            await ChangeAsync(store, model, round: 1);
            await store.CheckpointAsync();
            long slices = store.Pages.Current.Generation - before;
            Assert.True(slices >= 3, $"{slices} checkpoints written for one");
            Assert.False(store.Pages.Current.IsPartial);
            AssertAgrees(store, model);
        }

        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, options))
        {
            Assert.False(reopened.Pages.Current.IsPartial);
            AssertAgrees(reopened, model);
            Assert.True((await reopened.VerifyAsync()).IsHealthy);
        }
    }

    /// <summary>
    /// A pass over a large collection, cut into slices, and small collections changed since the last checkpoint, which
    /// share a slice whole: every small collection's changes land in that slice's trees (the checkpointer lets go of
    /// the changes it collected once they are in slices, and a slice must hold its own), so reads after the heads
    /// leave memory, and after a reopen, see them.
    /// </summary>
    [Fact]
    public async Task Small_collections_changed_beside_a_sliced_one_keep_their_changes_in_the_slice_they_share()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        var small = new SortedDictionary<string, string>(StringComparer.Ordinal); // "collection/id" to its JSON
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            await StoreCompactionTests.PutAsync(store, model, Enumerable.Range(0, 3000), round: 0, pad: 250);
            await PutSmallAsync(store, small, round: 0);
            await store.CheckpointAsync();
            long generation = store.Pages.Current.Generation;
            await ChangeAsync(store, model, round: 1);
            await PutSmallAsync(store, small, round: 1);
            await store.CheckpointAsync();
            Assert.True(store.Pages.Current.Generation - generation >= 3, "the pass went in slices");
            await store.EvictCheckpointedAsync(); // reads come from the trees now
            AssertAgrees(store, model);
            AssertSmall(store, small);
        }

        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, options))
        {
            AssertAgrees(reopened, model);
            AssertSmall(reopened, small);
            Assert.True((await reopened.VerifyAsync()).IsHealthy);
        }

        static async Task PutSmallAsync(DocumentStore store, SortedDictionary<string, string> small, int round)
        {
            foreach (string collection in new[] { "a-small", "z-small" }) // before and after the sliced one
            {
                var batch = new CommitBatch();
                for (int i = 0; i < 20; i++)
                {
                    string json = $"{{\"round\":{round},\"i\":{i}}}";
                    batch.Put(collection, $"s{i:D2}", Encoding.UTF8.GetBytes(json));
                    small[$"{collection}/s{i:D2}"] = json;
                }

                await store.WriteAsync(batch);
            }
        }

        static void AssertSmall(DocumentStore store, SortedDictionary<string, string> small)
        {
            foreach ((string key, string json) in small)
            {
                string[] parts = key.Split('/');
                Assert.Equal(json, store.Get(parts[0], parts[1]) is { } found
                    ? Encoding.UTF8.GetString(found.Json.Span)
                    : null);
            }
        }
    }

    [Fact]
    public async Task A_failure_between_slices_leaves_a_checkpoint_ahead_for_some_ids_that_reads_reopens_and_restores()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        DocumentStoreOptions options = Options();
        int failAt = 2;
        options.TestBeforeSlice = (slice, _) =>
        {
            if (slice == Volatile.Read(ref failAt))
            {
                throw new IOException("injected: the disk failed between slices");
            }
        };
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        long aheadTo;
        long settledBefore;
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            await StoreCompactionTests.PutAsync(store, model, Enumerable.Range(0, 3000), round: 0, pad: 250);
            await store.CheckpointAsync();
            settledBefore = store.Pages.Current.Sequence;
            await ChangeAsync(store, model, round: 1);
            aheadTo = store.LastCommittedSequence;
            await Assert.ThrowsAnyAsync<IOException>(async () => await store.CheckpointAsync());

            PageCheckpoint partial = store.Pages.Current;
            Assert.True(partial.IsPartial);
            Assert.Equal(settledBefore, partial.Sequence);
            CollectionTree tree = partial.Collections[Collection];
            Assert.Equal(aheadTo, tree.AheadSequence);
            Assert.NotNull(tree.AheadBefore); // cut inside the collection: some ids ahead, the others not
            Assert.Equal(aheadTo, partial.SequenceOf(Collection, StoreCompactionTests.Id(0)));
            Assert.Equal(settledBefore, partial.SequenceOf(Collection, StoreCompactionTests.Id(2999)));
            AssertAgrees(store, model);

            // Writes over the partial trees, on both sides of the cut, then read and counted again.
            await ChangeAsync(store, model, round: 2);
            AssertAgrees(store, model);
            Volatile.Write(ref failAt, -1);
        }

        // Closed without a checkpoint: the open mounts the partial checkpoint and replays the journal after it.
        string backup = Path.Combine(dir.Path, "partial.backup");
        long partialGeneration;
        await using (DocumentStore reopened = DocumentStore.Open(folder, options))
        {
            Assert.True(reopened.Pages.Current.IsPartial);
            partialGeneration = reopened.Pages.Current.Generation;
            AssertAgrees(reopened, model);
            BackupResult taken = await reopened.BackupAsync(backup);
            Assert.Equal(aheadTo, taken.CheckpointSequence); // the first point it restores to: the pass's sequence
        }

        await using (DocumentStore restored = await RestoreAsync(backup, Path.Combine(dir.Path, "restored"), null))
        {
            AssertAgrees(restored, model);
        }

        // The closed store's files described and scanned as `folio info` and `folio export` read them, then backed up
        // from them, as `folio backup` takes it.
        StoreInfo info = await DocumentStore.ReadInfoAsync(folder);
        Assert.Equal(model.Count, Assert.Single(info.Collections, c => c.Name == Collection).Documents);
        var scanned = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(folder))
        {
            Assert.Equal(Collection, document.Collection);
            scanned.Add(document.Id, Encoding.UTF8.GetString(document.Json.Span));
        }

        Assert.Equal(model, scanned);
        string filesBackup = Path.Combine(dir.Path, "files.backup");
        Assert.Equal(aheadTo, (await DocumentStore.BackupFilesAsync(folder, filesBackup)).CheckpointSequence);
        await using (DocumentStore restored = await RestoreAsync(filesBackup, Path.Combine(dir.Path, "from-files"),
            null))
        {
            AssertAgrees(restored, model);
        }

        // A point in time before the sequence the checkpoint holds some ids at cannot come from this backup; that
        // sequence itself can.
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(async () => await DocumentStore.RestoreAsync(backup,
            Path.Combine(dir.Path, "too-early"), new RestoreOptions { ToSequence = aheadTo - 1 }));
        Assert.False(Directory.Exists(Path.Combine(dir.Path, "too-early")));
        await DocumentStore.RestoreAsync(backup, Path.Combine(dir.Path, "earliest"),
            new RestoreOptions { ToSequence = aheadTo });

        // An open whose checkpoints may hold little writes the journal after the partial checkpoint in pieces, each
        // a checkpoint over trees ahead for some ids (those below the pass's sequence keep the marks).
        DocumentStoreOptions small = Options();
        small.TestCheckpointMemory = 1 << 20;
        await using (DocumentStore pieces = DocumentStore.Open(folder, small))
        {
            long written = pieces.Pages.Current.Generation - partialGeneration;
            Assert.True(written >= 2, $"{written} pieces written at the open");
            Assert.False(pieces.Pages.Current.IsPartial); // the last piece passed the pass's sequence
            AssertAgrees(pieces, model);
        }

        await using (DocumentStore reopened = DocumentStore.Open(folder, options))
        {
            AssertAgrees(reopened, model);
            await ChangeAsync(reopened, model, round: 3);
            await reopened.CheckpointAsync();
            Assert.False(reopened.Pages.Current.IsPartial);
            AssertAgrees(reopened, model);
        }

        await using (DocumentStore settled = DocumentStore.Open(folder, options))
        {
            Assert.False(settled.Pages.Current.IsPartial);
            AssertAgrees(settled, model);
            Assert.True((await settled.VerifyAsync()).IsHealthy);
        }
    }

    /// <summary>
    /// A data file that fails inside a slice (its chunk's write, a short write, a full disk, its fsync, or the header
    /// slot's write or fsync after it): the checkpoint fails, the slices before it stay current (a checkpoint ahead for
    /// the ids they covered) or, for the first, the checkpoint before, the store keeps serving and committing, and the
    /// next checkpoint, with the disk well again, settles every change; a reopen finds the model.
    /// </summary>
    [Theory]
    [InlineData(FileFault.WriteFails, 0, 1)]
    [InlineData(FileFault.ShortWrite, 0, 1)]
    [InlineData(FileFault.DiskFull, 0, 2)]
    [InlineData(FileFault.SyncFails, 0, 1)]
    [InlineData(FileFault.WriteFails, 1, 2)]
    [InlineData(FileFault.SyncFails, 1, 1)]
    [InlineData(FileFault.WriteBackFails, 0, 1)]
    [InlineData(FileFault.WriteFails, 0, 0)]
    [InlineData(FileFault.SyncFails, 1, -1)] // -1: the pass's last slice
    public async Task A_data_file_that_fails_inside_a_slice_leaves_the_slices_before_it_and_the_next_checkpoint_settles(
        FileFault fault, int skip, int slice)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = static path => path.EndsWith(DocumentStore.DataFileName, StringComparison.Ordinal),
        };
        DocumentStoreOptions options = Options();
        options.FileSystem = files;
        int slices = 0;
        int failing = int.MaxValue; // the slice whose data file fails (-1: the pass's last); none yet
        options.TestBeforeSlice = (index, count) =>
        {
            slices = count;
            if (index == Volatile.Read(ref failing) || (failing == -1 && index == count - 1))
            {
                files.Arm(fault, skip);
            }
        };
        var model = new SortedDictionary<string, string>(StringComparer.Ordinal);
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            await StoreCompactionTests.PutAsync(store, model, Enumerable.Range(0, 3000), round: 0, pad: 250);
            await store.CheckpointAsync();

            // A pass without faults first: a change this large goes in slices.
            await ChangeAsync(store, model, round: 1);
            await store.CheckpointAsync();
            Assert.True(slices >= 3, $"{slices} slices");
            Volatile.Write(ref failing, slice);
            await ChangeAsync(store, model, round: 2);
            long settled = store.Pages.Current.Sequence;
            long generation = store.Pages.Current.Generation;
            if (failing == 0)
            {
                files.Arm(fault, skip); // the first slice has no hook before it
            }

            slices = 0;
            await Assert.ThrowsAnyAsync<IOException>(async () => await store.CheckpointAsync());
            Assert.Equal(FileFault.None, files.Armed);
            Assert.True(slices >= 2 || failing == 0, $"{slices} slices");
            int failed = failing < 0 ? slices - 1 : failing;
            Assert.False(store.IsFaulted);
            Assert.Equal(settled, store.Pages.Current.Sequence);
            Assert.Equal(failed > 0, store.Pages.Current.IsPartial);
            Assert.Equal(generation + failed, store.Pages.Current.Generation); // the slices before the failed one
            AssertAgrees(store, model);

            await ChangeAsync(store, model, round: 3);
            AssertAgrees(store, model);
            Volatile.Write(ref failing, int.MaxValue);
            await store.CheckpointAsync();
            Assert.False(store.Pages.Current.IsPartial);
            Assert.Equal(store.LastCommittedSequence, store.Pages.Current.Sequence);
            AssertAgrees(store, model);
        }

        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, Options()))
        {
            Assert.False(reopened.Pages.Current.IsPartial);
            AssertAgrees(reopened, model);
            Assert.True((await reopened.VerifyAsync()).IsHealthy);
        }
    }

    [Fact]
    public void Slices_keep_their_changes_when_the_caller_lets_go_of_the_collected_ones()
    {
        // The checkpointer releases the changes it collected once they are cut (CollectionChanges.Applied): a
        // collection a slice takes whole must not be the caller's object, or the slice would be written empty.
        var big = new CollectionChanges("big",
            [.. Enumerable.Range(0, 1000).Select(i => TreeChange.Delete($"b{i:D4}"))], releaseWhenApplied: true);
        var little = new CollectionChanges("little", [TreeChange.Delete("x"), TreeChange.Delete("y")],
            releaseWhenApplied: true);
        List<CheckpointSlicer.Slice> slices = CheckpointSlicer.Cut([big, little],
            collection => collection.Changes.Count * 1000L, sliceBytes: 250_000)!;
        Assert.NotNull(slices);
        big.Applied();
        little.Applied();
        var covered = new Dictionary<string, int>(StringComparer.Ordinal);
        foreach (CheckpointSlicer.Slice slice in slices)
        {
            foreach (CollectionChanges collection in slice.Changes)
            {
                covered[collection.Name] = covered.GetValueOrDefault(collection.Name) + collection.Changes.Count;
            }
        }

        Assert.Equal(1000, covered["big"]);
        Assert.Equal(2, covered["little"]);
    }

    [Fact]
    public void Slices_cover_every_change_once_in_id_order_and_mark_what_each_has_covered()
    {
        var random = new Random(7);
        var changes = new List<CollectionChanges>();
        var expected = new Dictionary<string, HashSet<string>>(StringComparer.Ordinal);
        foreach ((string name, int count) in new[] { ("b", 5000), ("a", 20), ("c", 30), ("d", 9000) })
        {
            var list = new List<TreeChange>();
            var hashes = new List<int>();
            var ids = new HashSet<string>(StringComparer.Ordinal);
            for (int i = 0; i < count; i++)
            {
                string id = $"{name}/{random.Next(1_000_000):D7}";
                if (ids.Add(id))
                {
                    list.Add(i % 5 == 0 ? TreeChange.Delete(id) : TreeChange.Put(id, default));
                    hashes.Add(id.GetHashCode(StringComparison.Ordinal));
                }
            }

            changes.Add(new CollectionChanges(name, list, hashes));
            expected[name] = ids;
        }

        static long Superseded(CollectionChanges collection) => collection.Changes.Count * 4096L;
        List<CheckpointSlicer.Slice>? slices = CheckpointSlicer.Cut(changes, Superseded, sliceBytes: 10L << 20);
        Assert.NotNull(slices);
        Assert.True(slices.Count >= 4, $"{slices.Count} slices");
        var seen = new Dictionary<string, List<string>>(StringComparer.Ordinal);
        string? lastCollection = null;
        foreach (CheckpointSlicer.Slice slice in slices)
        {
            foreach (CollectionChanges part in slice.Changes)
            {
                Assert.True(lastCollection is null || string.CompareOrdinal(lastCollection, part.Name) <= 0);
                lastCollection = part.Name;
                Assert.Equal(part.Changes.Count, part.Hashes!.Count);
                List<string> ids = seen.TryGetValue(part.Name, out List<string>? list) ? list : seen[part.Name] = [];
                foreach (TreeChange change in part.Changes)
                {
                    ids.Add(change.Id);
                    // Every id this slice or an earlier one wrote is ahead by the slice's marks.
                    Assert.True(slice.Ahead.TryGetValue(part.Name, out string? before));
                    Assert.True(before is null || string.CompareOrdinal(change.Id, before) < 0,
                        $"{change.Id} written by a slice whose mark stops at {before}");
                }
            }

            // No id a later slice writes is ahead by this slice's marks.
            foreach (CheckpointSlicer.Slice later in slices.SkipWhile(s => s != slice).Skip(1))
            {
                foreach (CollectionChanges part in later.Changes)
                {
                    if (slice.Ahead.TryGetValue(part.Name, out string? before))
                    {
                        Assert.NotNull(before);
                        Assert.All(part.Changes, c => Assert.True(c.CompareTo(before) >= 0));
                    }
                }
            }
        }

        foreach ((string name, HashSet<string> ids) in expected)
        {
            Assert.Equal(ids.Count, seen[name].Count);
            Assert.True(ids.SetEquals(seen[name]));
        }

        Assert.Null(CheckpointSlicer.Cut(changes, Superseded, sliceBytes: 200L << 20));
    }

    private static DocumentStoreOptions Options()
    {
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.CheckpointOnClose = false;
        options.CacheSize = 2 << 20;
        options.CompactionFillRate = 0;
        options.MinCheckpointSliceBytes = 64 * 1024;
        options.CheckpointSlices = 4;
        return options;
    }

    /// <summary>Overwrites every other id, deletes every seventh (putting back those deleted before) and adds 200 new
    /// ones, recording each in <paramref name="model"/>.</summary>
    private static async Task ChangeAsync(DocumentStore store, SortedDictionary<string, string> model, int round)
    {
        await StoreCompactionTests.PutAsync(store, model,
            Enumerable.Range(0, 3000).Where(i => i % 2 == round % 2 || !model.ContainsKey(StoreCompactionTests.Id(i))),
            round, pad: 250);
        foreach (int i in Enumerable.Range(0, 3000).Where(i => (i + round) % 7 == 0))
        {
            await store.DeleteAsync(Collection, StoreCompactionTests.Id(i));
            model.Remove(StoreCompactionTests.Id(i));
        }

        await StoreCompactionTests.PutAsync(store, model, Enumerable.Range(3000 + (round * 200), 200), round, pad: 250);
    }

    /// <summary>Scans, point reads and counts of the store agree with <paramref name="model"/>.</summary>
    private static void AssertAgrees(DocumentStore store, SortedDictionary<string, string> model)
    {
        StoreCompactionTests.AssertHolds(store, model);
        for (int i = 0; i < 4000; i++)
        {
            string id = StoreCompactionTests.Id(i);
            StoredDocument? document = store.Get(Collection, id);
            Assert.Equal(model.GetValueOrDefault(id),
                document is { } found ? Encoding.UTF8.GetString(found.Json.Span) : null);
        }

        long sequence = store.LastCommittedSequence;
        Assert.Equal(model.Count, store.Index.Count(Collection, sequence));
        Assert.Equal(model.Count, store.Index.CountByWalking(Collection, sequence));
    }

    private static async Task<DocumentStore> RestoreAsync(string backup, string folder, RestoreOptions? options)
    {
        await DocumentStore.RestoreAsync(backup, folder, options);
        return DocumentStore.Open(folder, TestStoreOptions.ManualCheckpoints());
    }
}
