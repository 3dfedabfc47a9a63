using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The two races between an old snapshot's reads and a checkpoint, replayed deterministically: the read is stopped at
/// the exact point between its two reads (through the index's test hooks), a write and a checkpoint covering it run
/// there, and the read must still answer as of its snapshot. The stress tests found both by chance (a session load
/// above its snapshot; a range query at one snapshot that changed).
/// </summary>
public sealed class SnapshotRaceTests
{
    [Fact]
    public async Task A_point_read_missing_the_heads_before_an_overwrite_and_checkpoint_returns_its_snapshots_version()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, Options());
        await store.PutAsync("Item", "k", Json(1));
        await store.CheckpointAsync();
        Assert.Equal(0, store.Index.HeadCount); // the next read of k goes to the tree

        await using DocumentSession session = store.OpenSession();
        await session.LoadAsync<Item>("other"); // takes the session's snapshot: k at version 1
        // Between the miss and the tree read: an overwrite, then a checkpoint whose layer holds it.
        var race = new Race("k", async () =>
        {
            await store.PutAsync("Item", "k", Json(2));
            await store.CheckpointAsync();
        });
        store.Index.AfterHeadsMiss = race.At;

        Item? item = await session.LoadAsync<Item>("k");
        store.Index.AfterHeadsMiss = null;

        Assert.True(race.Ran);
        Assert.Equal(1, item?.Version);
        Assert.Equal(2, JsonVersion(store.Get("Item", "k")));
    }

    [Fact]
    public async Task A_point_read_that_misses_the_heads_before_a_delete_and_checkpoint_still_finds_the_document()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, Options());
        await store.PutAsync("Item", "k", Json(1));
        await store.CheckpointAsync();

        await using DocumentSession session = store.OpenSession();
        await session.LoadAsync<Item>("other");
        var race = new Race("k", async () =>
        {
            await store.DeleteAsync("Item", "k");
            await store.CheckpointAsync();
        });
        store.Index.AfterHeadsMiss = race.At;

        Item? item = await session.LoadAsync<Item>("k");
        store.Index.AfterHeadsMiss = null;

        Assert.True(race.Ran);
        Assert.Equal(1, item?.Version);
        Assert.Null(store.Get("Item", "k"));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_range_read_that_took_the_added_ids_before_a_delete_and_checkpoint_still_returns_the_document(
        bool descending)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.AddedIdsTrimMinimum = 1;
        await using var store = DocumentStore.Open(dir.Path, options);
        for (int i = 0; i < 20; i++)
        {
            await store.PutAsync("Item", $"k{i:D2}", Json(i));
        }

        await store.CheckpointAsync();
        Assert.Equal(0, store.Index.HeadCount);
        await store.PutAsync("Other", "x", Json(0)); // the committer rebuilds the list from the (empty) heads
        Assert.Equal(0, store.Index.AddedIdCount("Item")); // so only the tree has k07 when the read starts

        await using DocumentSession session = store.OpenSession();
        await session.LoadAsync<Item>("other"); // the snapshot: all 20 alive
        // Between taking the list and pinning the layer: a delete (appended to the list taken) and a checkpoint whose
        // layer no longer has the id.
        var race = new Race("Item", async () =>
        {
            await store.DeleteAsync("Item", "k07");
            await store.CheckpointAsync();
        });
        store.Index.AfterAddedIdsTaken = race.At;

        var ids = new List<string>();
        await foreach (Item item in session.QueryByRangeAsync<Item>("k00", "k99", descending))
        {
            ids.Add(item.Id);
        }

        store.Index.AfterAddedIdsTaken = null;

        Assert.True(race.Ran);
        IEnumerable<string> all = Enumerable.Range(0, 20).Select(i => $"k{i:D2}");
        Assert.Equal(descending ? all.Reverse() : all, ids);

        // A count takes the list and the layer the same way: the same race on another id still counts all 20.
        var countRace = new Race("Item", async () =>
        {
            await store.DeleteAsync("Item", "k08");
            await store.CheckpointAsync();
        });
        store.Index.AfterAddedIdsTaken = countRace.At;
        int counted = await session.CountAsync<Item>();
        store.Index.AfterAddedIdsTaken = null;
        Assert.True(countRace.Ran);
        Assert.Equal(20, counted);
        await using DocumentSession later = store.OpenSession();
        Assert.Null(await later.LoadAsync<Item>("k07"));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_checkpoint_between_the_first_write_of_a_replayed_document_and_its_logging_keeps_it_in_the_tree(
        bool delete)
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = Options();
        options.CheckpointOnClose = false; // the next open replays every write below
        await using (DocumentStore first = DocumentStore.Open(dir.Path, options))
        {
            for (int i = 0; i < 10; i++)
            {
                await first.PutAsync("Item", $"k{i}", Json(1));
            }
        }

        await using var store = DocumentStore.Open(dir.Path, options);
        // The race below holds the index's lock while it waits for a checkpoint, so the checkpoint thread must be past
        // its start (where it builds the id filters under that lock) first: a request it runs says so. It evicts
        // nothing, since no checkpoint holds the replayed documents.
        Assert.Equal(0, await store.EvictCheckpointedAsync());
        await using DocumentSession before = store.OpenSession();
        Assert.Equal(10, await before.CountAsync<Item>()); // a snapshot from before the overwrite
        // The first write of replayed k3 is in the heads (its replayed slot shadowed) but not yet logged for the next
        // checkpoint when a checkpoint covering the replayed documents runs: that checkpoint must still hold k3.
        var race = new Race("k3", async () => await store.CheckpointAsync());
        store.Index.AfterWriteApplied = race.At;
        await (delete ? store.DeleteAsync("Item", "k3") : store.PutAsync("Item", "k3", Json(2)));
        store.Index.AfterWriteApplied = null;
        Assert.True(race.Ran);

        await using DocumentSession after = store.OpenSession();
        foreach ((DocumentSession session, bool hasK3) in new[] { (before, true), (after, !delete) })
        {
            var ids = new List<string>();
            await foreach (Item item in session.QueryAsync<Item>())
            {
                ids.Add(item.Id);
            }

            Assert.Equal(Enumerable.Range(0, 10).Where(i => hasK3 || i != 3).Select(i => $"k{i}"), ids);
            Assert.Equal(hasK3 ? 10 : 9, await session.CountAsync<Item>());
        }

        Assert.Equal(1, (await before.LoadAsync<Item>("k3"))?.Version);
        Assert.Equal(delete ? null : 2, (await after.LoadAsync<Item>("k3"))?.Version);

        // The next checkpoint takes the write itself.
        await store.CheckpointAsync();
        await using DocumentSession latest = store.OpenSession();
        Assert.Equal(delete ? 9 : 10, await latest.CountAsync<Item>());
    }

    [Fact]
    public async Task A_write_whose_old_version_came_from_a_replaced_tree_keeps_the_newer_trees_version_for_snapshots()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, Options());
        await store.PutAsync("Item", "k", Json(1));
        await store.CheckpointAsync();
        Assert.Equal(0, store.Index.HeadCount); // the next write of k reads its old version from the tree
        store.Index.NoteDamage(); // as after a damaged page: writers read the versions they replace themselves

        // Between the writer's read of version 1 from the tree and its commit: an overwrite, a checkpoint whose new
        // tree holds version 2 (and evicts k from the heads), then a snapshot that sees version 2.
        DocumentSession? snapshot = null;
        var race = new Race("k", async () =>
        {
            await store.PutAsync("Item", "k", Json(2));
            await store.CheckpointAsync();
            Assert.Equal(0, store.Index.HeadCount);
            snapshot = store.OpenSession();
            await snapshot.LoadAsync<Item>("other"); // takes the session's snapshot: k at version 2
        });
        store.Index.AfterWrittenOverRead = race.At;
        await store.PutAsync("Item", "k", Json(3));
        store.Index.AfterWrittenOverRead = null;

        Assert.True(race.Ran);
        await using (snapshot)
        {
            // The chain starts at what the current tree holds (version 2), not at what the replaced one held.
            Assert.Equal(2, (await snapshot!.LoadAsync<Item>("k"))?.Version);
        }

        Assert.Equal(3, JsonVersion(store.Get("Item", "k")));
    }

    /// <summary>A write and a checkpoint run once, on another thread while the hooked read waits, the first time the
    /// index's hook is called with <paramref name="name"/> (an id or a collection).</summary>
    private sealed class Race(string name, Func<Task> interleaved)
    {
        public bool Ran { get; private set; }

        public void At(string reached)
        {
            if (reached != name || Ran)
            {
                return;
            }

            Ran = true;
            Task.Run(interleaved).GetAwaiter().GetResult();
        }
    }

    private static DocumentStoreOptions Options()
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        return options;
    }

    private static byte[] Json(int version) => Encoding.UTF8.GetBytes($$"""{"Version":{{version}}}""");

    private static int? JsonVersion(StoredDocument? document) => document is { } found
        ? System.Text.Json.JsonDocument.Parse(found.Json).RootElement.GetProperty("Version").GetInt32()
        : null;

    private sealed class Item
    {
        public string Id { get; set; } = "";

        public int Version { get; set; }
    }
}
