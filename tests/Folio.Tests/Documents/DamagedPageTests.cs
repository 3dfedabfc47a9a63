using System.Text;
using Folio.Pages;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// A store whose data file has a page that fails its checksum (a byte flipped on disk, as bit rot leaves it): the
/// documents in that page read with <see cref="StoreCorruptedException"/> (read through the page cache or around it); a
/// write over one in a damaged leaf fails alone with it, before the journal holds the write; a write over a large
/// document whose own value pages are damaged replaces it (snapshots older than the write still get the failure); every
/// other document stays readable and writable, across reopens. None of it faults the store.
/// </summary>
public sealed class DamagedPageTests
{
    [Theory]
    [InlineData(DataFileReadMode.Buffered)]
    [InlineData(DataFileReadMode.Direct)] // the damaged leaf read around the page cache
    public async Task A_write_over_a_document_in_a_damaged_leaf_fails_alone_and_the_store_stays_usable(
        DataFileReadMode reads)
    {
        using var dir = new TempDirectory();
        const int count = 3000;
        await FillAndDamageAsync(dir.Path, count, large: false);

        List<string> bad;
        List<string> good;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options(reads)))
        {
            (bad, good) = Classify(store, count);
            Assert.NotEmpty(bad);
            Assert.True(good.Count > count / 2, $"{bad.Count} of {count} documents unreadable");

            // Each write over a damaged document fails on its own, with the page named; none faults the store.
            var damage = await Assert.ThrowsAsync<StoreCorruptedException>(
                async () => await store.PutAsync("Item", bad[0], Json(-1, "")));
            Assert.Contains("data.folio", damage.Message, StringComparison.Ordinal);
            await Assert.ThrowsAsync<StoreCorruptedException>(async () => await store.DeleteAsync("Item", bad[0]));

            // A batch with one damaged document commits none of its commands.
            var batch = new CommitBatch().Put("Item", good[0], Json(-2, "")).Put("Item", bad[0], Json(-2, ""));
            await Assert.ThrowsAsync<StoreCorruptedException>(async () => await store.WriteAsync(batch));
            Assert.Equal(Value(good[0]), JsonValue(store.Get("Item", good[0])));

            await using (DocumentSession session = store.OpenSession())
            {
                session.Store(new Item { Value = -3 }, bad[0]);
                await Assert.ThrowsAsync<StoreCorruptedException>(async () => await session.SaveChangesAsync());
            }

            // The rest of the store takes writes and checkpoints as before.
            await store.PutAsync("Item", good[1], Json(-4, ""));
            await store.PutAsync("Item", "new", Json(-5, ""));
            await using (DocumentSession session = store.OpenSession())
            {
                session.Store(new Item { Value = -6 }, good[2]);
                await session.SaveChangesAsync();
            }

            await store.CheckpointAsync();
            Assert.Equal(-4, JsonValue(store.Get("Item", good[1])));
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options(reads)))
        {
            Assert.Equal(-4, JsonValue(store.Get("Item", good[1])));
            Assert.Equal(-5, JsonValue(store.Get("Item", "new")));
            Assert.Equal(-6, JsonValue(store.Get("Item", good[2])));
            Assert.Equal(Value(good[0]), JsonValue(store.Get("Item", good[0])));
            foreach (string id in good.Skip(3))
            {
                Assert.Equal(Value(id), JsonValue(store.Get("Item", id)));
            }

            foreach (string id in bad)
            {
                Assert.Throws<StoreCorruptedException>(() => store.Get("Item", id));
            }

            await Assert.ThrowsAsync<StoreCorruptedException>(
                async () => await store.PutAsync("Item", bad[^1], Json(-7, "")));
            await store.PutAsync("Item", good[3], Json(-8, ""));
            Assert.Equal(-8, JsonValue(store.Get("Item", good[3])));
        }
    }

    [Theory]
    [InlineData(false)] // the open builds the id filter, which reads every leaf
    [InlineData(true)] // a data file too large for its cache to build filters from: only the write reads the leaf
    public async Task A_write_over_a_damaged_leaf_right_after_the_open_fails_alone_before_anything_read_the_leaf(
        bool tooLargeForFilters)
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        const int count = 3000;
        await FillAndDamageAsync(folder, count, large: false);

        // Which documents the damage took, found on a copy so that nothing in the store under test reads them first.
        string copy = Path.Combine(dir.Path, "copy");
        StoreCheckpointTests.CopyFolder(folder, copy);
        List<string> bad;
        List<string> good;
        await using (DocumentStore store = DocumentStore.Open(copy, Options()))
        {
            (bad, good) = Classify(store, count);
        }

        Assert.NotEmpty(bad);
        Assert.True(good.Count > count / 2, $"{bad.Count} of {count} documents unreadable");
        DocumentStoreOptions options = Options();
        if (tooLargeForFilters)
        {
            options.TestCacheBytes = 64 * 1024; // filters are built for data files up to twice the cache
        }

        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            // The first operation of the open: the write reads the leaf itself, while the filter is built, after its
            // build met the damage, or with no filter to build (then nothing read the leaf before).
            Assert.True(!tooLargeForFilters || !store.Index.DamageSeen);
            await Assert.ThrowsAsync<StoreCorruptedException>(
                async () => await store.PutAsync("Item", bad[0], Json(-1, "")));
            await store.PutAsync("Item", good[0], Json(-2, ""));
            await store.CheckpointAsync();
            Assert.Equal(-2, JsonValue(store.Get("Item", good[0])));
            Assert.Throws<StoreCorruptedException>(() => store.Get("Item", bad[0]));
        }
    }

    [Theory]
    [InlineData(false)] // the write is the open's first operation: the committer meets the damage as it applies
    [InlineData(true)] // every document was read first, so the store has seen the damage: the writer meets it
    public async Task A_write_over_a_large_document_with_damaged_value_pages_replaces_it_and_old_snapshots_still_fail(
        bool readFirst)
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "store");
        const int count = 40;
        await FillAndDamageAsync(folder, count, large: true);
        string copy = Path.Combine(dir.Path, "copy");
        StoreCheckpointTests.CopyFolder(folder, copy);
        List<string> bad;
        await using (DocumentStore store = DocumentStore.Open(copy, Options()))
        {
            (bad, _) = Classify(store, count);
        }

        Assert.Single(bad); // one value's overflow page
        await using (DocumentStore store = DocumentStore.Open(folder, Options()))
        {
            if (readFirst)
            {
                Assert.Equal(bad, Classify(store, count).Bad);
                Assert.True(store.Index.DamageSeen);
            }

            await using DocumentSession before = store.OpenSession();
            await before.LoadAsync<Item>(Id(0)); // a snapshot from before the write
            await store.PutAsync("Item", bad[0], Json(-1, ""));
            Assert.Equal(-1, JsonValue(store.Get("Item", bad[0])));
            var damage = await Assert.ThrowsAsync<StoreCorruptedException>(
                async () => await before.LoadAsync<Item>(bad[0]));
            Assert.EndsWith("data.folio", damage.FilePath, StringComparison.Ordinal);
            Assert.True(damage.Offset > 0);
            Assert.Contains("fails its checksum", damage.Message, StringComparison.Ordinal);

            await store.CheckpointAsync(); // the leaf now points at the new value; the damaged page is garbage
            await store.PutAsync("Item", Id(0), Json(-2, ""));
        }

        await using (DocumentStore store = DocumentStore.Open(folder, Options()))
        {
            for (int i = 1; i < count; i++)
            {
                Assert.Equal(Id(i) == bad[0] ? -1 : i, JsonValue(store.Get("Item", Id(i))));
            }

            Assert.Equal(-2, JsonValue(store.Get("Item", Id(0))));
        }
    }

    [Fact]
    public async Task A_new_id_in_the_range_of_a_leaf_damaged_while_the_store_runs_fails_alone_and_checkpoints_go_on()
    {
        using var dir = new TempDirectory();
        const int count = 3000;
        await FillAsync(dir.Path, count, _ => new string('q', 100));

        // A cache smaller than the data file, yet large enough for the open to build the id filter (it reads every
        // leaf for that), so the leaf damaged after the build is read again from disk once evicted.
        string dataFile = Path.Combine(dir.Path, "data.folio");
        DocumentStoreOptions options = Options();
        options.TestCacheBytes = new FileInfo(dataFile).Length * 2 / 3;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            var deadline = DateTime.UtcNow.AddSeconds(30);
            while (store.Index.IdFilterOf("Item") is not { IsComplete: true })
            {
                Assert.True(DateTime.UtcNow < deadline, "the id filter was not built");
                await Task.Delay(10);
            }

            Assert.False(store.Index.DamageSeen);
            FileDamage.FlipByte(dataFile, new FileInfo(dataFile).Length / 2, 0x10);
            List<string> bad = [];
            for (int pass = 0; pass < 5 && bad.Count == 0; pass++)
            {
                bad = Classify(store, count).Bad; // reads evict the leaf and read it again
            }

            Assert.NotEmpty(bad);
            Assert.True(store.Index.DamageSeen);

            // A new id between two of the leaf's ids: the filter rightly says no tree holds it, but the checkpoint
            // that adds it would have to rewrite the damaged leaf, so the write reads the leaf and fails alone.
            string newId = bad[bad.Count / 2] + "a";
            await Assert.ThrowsAsync<StoreCorruptedException>(
                async () => await store.PutAsync("Item", newId, Json(-1, "")));
            await store.PutAsync("Item", "zzz-new", Json(-2, ""));
            await store.CheckpointAsync();
            Assert.Null(store.Get("Item", newId));
            Assert.Equal(-2, JsonValue(store.Get("Item", "zzz-new")));
        }
    }

    [Fact]
    public async Task Random_bit_flips_in_the_data_file_never_fault_the_store_nor_lose_an_acknowledged_write()
    {
        using var dir = new TempDirectory();
        string pristine = Path.Combine(dir.Path, "pristine");
        const int count = 300;
        static string Pad(int i) => new('p', i % 10 == 0 ? 20_000 : 60); // every tenth value in overflow pages
        await FillAsync(pristine, count, Pad);

        var random = new Random(20261130);
        long length = new FileInfo(Path.Combine(pristine, "data.folio")).Length;
        for (int round = 0; round < 24; round++)
        {
            string folder = Path.Combine(dir.Path, $"round{round}");
            StoreCheckpointTests.CopyFolder(pristine, folder);
            long offset = random.NextInt64(length);
            FileDamage.FlipByte(Path.Combine(folder, "data.folio"), offset, (byte)(1 << random.Next(8)));
            bool readFirst = random.Next(2) == 0;
            var acknowledged = new Dictionary<string, int>();
            DocumentStore store;
            try
            {
                store = DocumentStore.Open(folder, Options());
            }
            catch (StoreCorruptedException)
            {
                continue; // the header or a chunk's table: refused at the open, as it must be
            }

            await using (store)
            {
                if (readFirst)
                {
                    Classify(store, count);
                }

                for (int j = 0; j < count; j += 3)
                {
                    try
                    {
                        await store.PutAsync("Item", Id(j), Json(-j, Pad(j)));
                        acknowledged[Id(j)] = -j;
                    }
                    catch (StoreCorruptedException)
                    {
                        // a write over a damaged leaf fails alone
                    }
                }

                for (int j = 0; j < 10; j++)
                {
                    string id = Id(random.Next(count)) + "n";
                    try
                    {
                        await store.PutAsync("Item", id, Json(j, ""));
                        acknowledged[id] = j;
                    }
                    catch (StoreCorruptedException)
                    {
                        // a new id in a damaged leaf's range, once the damage was seen
                    }
                }

                await store.CheckpointAsync();
            }

            await using (DocumentStore reopened = DocumentStore.Open(folder, Options()))
            {
                foreach ((string id, int value) in acknowledged)
                {
                    Assert.True(value == JsonValue(reopened.Get("Item", id)),
                        $"round {round}, bit flipped at {offset}, read first: {readFirst}: {id} lost its write");
                }
            }
        }
    }

    [Fact]
    public async Task A_write_over_a_cached_document_whose_leaf_was_damaged_since_fails_alone_once_damage_is_seen()
    {
        using var dir = new TempDirectory();
        const int count = 3000;
        (string dataFile, long offset, List<string> bad) = await FillAndFindDamageAsync(dir.Path, count);
        Assert.NotEmpty(bad);
        // A page cache of eight pages, which the damaged leaf soon leaves; a document cache for every document.
        DocumentStoreOptions options = Options();
        options.TestCacheBytes = 128 << 10;
        options.DocumentCacheSize = 8L << 20;
        await using DocumentStore store = DocumentStore.Open(dir.Path, options);
        Assert.Empty(Classify(store, count).Bad); // read, so cached
        FileDamage.FlipByte(dataFile, offset, 0x10);

        // A document of the damaged leaf that the cache still answers (a few may share their cache bucket with two
        // others, and so were read from the leaf, which is not in the page cache any more).
        List<string> stillBad = Classify(store, count).Bad;
        string cached = bad.First(id => !stillBad.Contains(id));
        Assert.Equal(Value(cached), JsonValue(store.Get("Item", cached)));

        // A scrub finds the damage; from then on writes read the versions they replace from the tree, not the cache,
        // so a write over a document of the damaged leaf fails alone instead of leaving the checkpoint a leaf it
        // cannot rewrite.
        Assert.False((await store.VerifyAsync()).IsHealthy);
        Assert.True(store.Index.DamageSeen);
        await Assert.ThrowsAsync<StoreCorruptedException>(
            async () => await store.PutAsync("Item", cached, Json(-1, "")));
        await store.PutAsync("Item", "zzz-new", Json(-2, ""));
        await store.CheckpointAsync();
        Assert.False(store.GetDiagnostics().IsFaulted);
        Assert.Equal(-2, JsonValue(store.Get("Item", "zzz-new")));

        // The checkpoint's new tree shares the damaged leaf, and did not change the document: the cache still answers
        // it (the version it holds is the new tree's), while a write over it still fails alone.
        Assert.Equal(Value(cached), JsonValue(store.Get("Item", cached)));
        await Assert.ThrowsAsync<StoreCorruptedException>(
            async () => await store.PutAsync("Item", cached, Json(-1, "")));
    }

    [Fact]
    public async Task An_overwrite_in_a_leaf_damaged_while_the_store_runs_does_not_fault_the_store_nor_lose_a_write()
    {
        using var dir = new TempDirectory();
        const int count = 3000;
        (string dataFile, long offset, List<string> bad) = await FillAndFindDamageAsync(dir.Path, count);
        Assert.True(bad.Count >= 2);
        string first = bad[bad.Count / 2];
        string second = bad[0];

        // A page cache smaller than the data file, yet large enough for the open to build the id filter (which reads
        // every leaf); no document cache, so every read goes to the tree.
        DocumentStoreOptions options = Options();
        options.TestCacheBytes = new FileInfo(dataFile).Length * 2 / 3;
        options.DocumentCacheSize = 0;
        options.CheckpointThreshold = 64 << 10;
        options.CheckpointBackpressureThreshold = 256 << 10;
        using var log = new CapturingLoggerFactory();
        options.LoggerFactory = log;
        int CheckpointFailures() => log.Lines.Count(line => line.Id.Id == 3003);
        var acknowledged = new Dictionary<string, int>();
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            var deadline = DateTime.UtcNow.AddSeconds(30);
            while (store.Index.IdFilterOf("Item") is not { IsComplete: true })
            {
                Assert.True(DateTime.UtcNow < deadline, "the id filter was not built");
                await Task.Delay(10);
            }

            FileDamage.FlipByte(dataFile, offset, 0x10);

            // Reads of the other documents only, so the damaged leaf leaves the page cache and nothing sees the damage:
            // the write is not read before the journal holds it, and its apply is the first to meet the damage.
            for (int pass = 0; pass < 3; pass++)
            {
                foreach (string id in Ids(count).Except(bad))
                {
                    Assert.Equal(Value(id), JsonValue(store.Get("Item", id)));
                }
            }

            Assert.False(store.Index.DamageSeen);
            long before = store.LastCommittedSequence;
            using (DocumentSession older = store.OpenSession())
            {
                Assert.NotNull(await older.LoadAsync<Item>(Ids(count).Except(bad).First())); // its snapshot, taken now
                await store.PutAsync("Item", first, Json(-1, ""));

                // Not faulted: the write is there, an older snapshot still gets the damage, and the store takes
                // writes; a later write into the damaged leaf is read first now, and fails alone.
                Assert.False(store.GetDiagnostics().IsFaulted);
                Assert.True(store.Index.DamageSeen);
                Assert.Equal(-1, JsonValue(store.Get("Item", first)));
                await Assert.ThrowsAsync<StoreCorruptedException>(async () => await older.LoadAsync<Item>(first));
                await Assert.ThrowsAsync<StoreCorruptedException>(
                    async () => await store.PutAsync("Item", second, Json(-2, "")));
                await store.PutAsync("Item", "zzz-new", Json(-3, ""));
            }

            // The checkpoint cannot merge the write into a leaf it cannot read: it fails, and the store goes on.
            var failure = await Assert.ThrowsAsync<StoreCorruptedException>(async () => await store.CheckpointAsync());
            Assert.Contains("data.folio", failure.Message, StringComparison.Ordinal);
            Assert.NotNull(store.CheckpointsBlockedBy);
            Assert.False(store.GetDiagnostics().IsFaulted);
            Assert.Null(store.GetDiagnostics().WritesRefused); // not yet: the journal is below the threshold
            await store.PutAsync("Item", "zzz-after", Json(-4, ""));
            Assert.True(store.LastCommittedSequence > before);

            // Writes go on, without waiting for checkpoints that cannot succeed, until the journal since the last
            // checkpoint reaches the backpressure threshold; then they fail with the damage, and reads go on.
            StoreCorruptedException? refused = null;
            for (int i = 0; i < 10_000 && refused is null; i++)
            {
                string id = $"more{i:D5}";
                try
                {
                    await store.PutAsync("Item", id, Json(i, new string('m', 200)));
                    acknowledged[id] = i;
                }
                catch (StoreCorruptedException e)
                {
                    refused = e;
                }
            }

            Assert.NotNull(refused);
            Assert.Contains("refuses writes", refused.Message, StringComparison.Ordinal);
            Assert.Equal(failure.Offset, store.GetDiagnostics().WritesRefused?.Offset);
            var health = Folio.Extensions.Hosting.FolioHealthCheck.Evaluate(store.GetDiagnostics(),
                Microsoft.Extensions.Diagnostics.HealthChecks.HealthStatus.Unhealthy, TimeSpan.FromSeconds(10));
            Assert.Equal(Microsoft.Extensions.Diagnostics.HealthChecks.HealthStatus.Unhealthy, health.Status);
            Assert.StartsWith("Checkpoints fail on damage in the data file; commits fail", health.Description,
                StringComparison.Ordinal);

            // The checkpoints due meanwhile (the journal is past the threshold) are tried again after a wait that
            // doubles from a second, not at every tick of the loop: at most two attempts in the next 1.5 s.
            int failures = CheckpointFailures();
            await Task.Delay(1500);
            Assert.InRange(CheckpointFailures() - failures, 0, 2);
            Assert.True(acknowledged.Count > 100);
            Assert.False(store.GetDiagnostics().IsFaulted);
            Assert.Equal(-4, JsonValue(store.Get("Item", "zzz-after")));
        }

        // Nothing acknowledged is lost: the journal the failed checkpoints kept replays it.
        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options()))
        {
            Assert.Equal(-1, JsonValue(store.Get("Item", first)));
            Assert.Equal(-3, JsonValue(store.Get("Item", "zzz-new")));
            Assert.Equal(-4, JsonValue(store.Get("Item", "zzz-after")));
            Assert.Throws<StoreCorruptedException>(() => store.Get("Item", second));
            foreach ((string id, int value) in acknowledged)
            {
                Assert.Equal(value, JsonValue(store.Get("Item", id)));
            }

            foreach (string id in Ids(count).Except(bad))
            {
                Assert.Equal(Value(id), JsonValue(store.Get("Item", id)));
            }
        }
    }

    private static IEnumerable<string> Ids(int count) => Enumerable.Range(0, count).Select(Id);


    [Fact]
    public async Task Compacting_a_chunk_that_holds_a_damaged_live_page_fails_alone_and_loses_nothing()
    {
        using var dir = new TempDirectory();
        const int count = 3000;
        await FillAndDamageAsync(dir.Path, count, large: false);

        List<string> bad;
        var written = new Dictionary<string, int>();

        // Background checkpoints every few commits, and background compaction (on by default) joining them: one that
        // compacts meets the damaged page, which must not block the checkpoints of the commits, nor refuse writes.
        DocumentStoreOptions options = Options();
        options.CheckpointThreshold = 4096;
        options.CheckpointBackpressureThreshold = 64 << 10;
        await using (DocumentStore store = DocumentStore.Open(dir.Path, options))
        {
            (bad, _) = Classify(store, count);
            Assert.NotEmpty(bad);

            // Two of every three readable documents written over, twice, with checkpoints: the damaged leaf's chunk
            // goes sparse, so compaction wants its live pages, the damaged one among them.
            for (int round = 0; round < 2; round++)
            {
                for (int i = 0; i < count; i += 20)
                {
                    var batch = new CommitBatch();
                    for (int j = i; j < i + 20; j++)
                    {
                        if (j % 3 != 0 && !bad.Contains(Id(j)))
                        {
                            batch.Put("Item", Id(j), Json(-j - round, ""));
                            written[Id(j)] = -j - round;
                        }
                    }

                    if (batch.Count > 0)
                    {
                        await store.WriteAsync(batch);
                    }
                }

                await store.CheckpointAsync();
            }

            var damage = await Assert.ThrowsAsync<StoreCorruptedException>(async () => await store.CompactAsync());
            Assert.Contains("data.folio", damage.Message, StringComparison.Ordinal);
            Assert.False(store.GetDiagnostics().IsFaulted);
            var until = DateTime.UtcNow.AddSeconds(2.5);
            for (int i = 0; DateTime.UtcNow < until; i++)
            {
                string id = $"later{i:D6}";
                await store.PutAsync("Item", id, Json(i, new string('l', 200)));
                written[id] = i;
            }

            Assert.Null(store.CheckpointsBlockedBy);

            // The background loop's checkpoint that also compacts (here every chunk below the default fill rate)
            // meets the damaged page: it fails, but does not block the checkpoints of commits, which go on.
            await store.PutAsync("Item", "before-compaction", Json(-5, ""));
            await Assert.ThrowsAsync<StoreCorruptedException>(async () => await store.CheckpointAndCompactAsync(
                new CompactionRequest(DocumentStoreOptions.DefaultCompactionFillRate, long.MaxValue)));
            Assert.Null(store.CheckpointsBlockedBy);
            await store.CheckpointAsync();
            Assert.Equal(-5, JsonValue(store.Get("Item", "before-compaction")));

            await store.PutAsync("Item", "after", Json(-1, ""));
            await store.CheckpointAsync();
            AssertContents(store);
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options()))
        {
            AssertContents(store);
        }

        void AssertContents(DocumentStore store)
        {
            Assert.Equal(-1, JsonValue(store.Get("Item", "after")));
            foreach ((string id, int value) in written)
            {
                if (id.StartsWith("later", StringComparison.Ordinal))
                {
                    Assert.Equal(value, JsonValue(store.Get("Item", id)));
                }
            }

            for (int i = 0; i < count; i++)
            {
                if (bad.Contains(Id(i)))
                {
                    Assert.Throws<StoreCorruptedException>(() => store.Get("Item", Id(i)));
                }
                else
                {
                    Assert.Equal(written.GetValueOrDefault(Id(i), i), JsonValue(store.Get("Item", Id(i))));
                }
            }
        }
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_salvage_streams_every_readable_document_and_names_the_ranges_the_damage_took(bool large)
    {
        using var dir = new TempDirectory();
        const int count = 600;
        await FillAndDamageAsync(dir.Path, count, large);

        // The store stays open: the salvage reads its files as another process would, the two writes from the journal.
        await using DocumentStore store = DocumentStore.Open(dir.Path, Options());
        (List<string> bad, List<string> good) = Classify(store, count);
        await store.PutAsync("Item", good[0], Json(-7, ""));
        await store.PutAsync("Item", "zzz-journal", Json(-8, ""));
        Assert.True(large || bad.Count > 1, "a damaged leaf");
        await Assert.ThrowsAsync<StoreCorruptedException>(async () =>
        {
            await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(dir.Path))
            {
            }
        });

        var ranges = new List<DamagedRange>();
        var salvaged = new Dictionary<string, int>();
        await foreach (StoredDocument document in DocumentStore.SalvageFilesAsync(dir.Path, ranges.Add))
        {
            Assert.Equal("Item", document.Collection);
            salvaged.Add(document.Id, JsonValue(document)!.Value);
        }

        Assert.NotEmpty(ranges);
        Assert.All(ranges, range => Assert.Contains("data.folio", range.Error.Message, StringComparison.Ordinal));
        foreach (string id in bad)
        {
            Assert.False(salvaged.ContainsKey(id), id);
            Assert.Contains(ranges, range => (range.FromId is null || string.CompareOrdinal(id, range.FromId) >= 0)
                && (range.ToId is null || string.CompareOrdinal(id, range.ToId) < 0));
        }

        foreach (string id in good)
        {
            Assert.Equal(id == good[0] ? -7 : Value(id), salvaged[id]);
        }

        Assert.Equal(-8, salvaged["zzz-journal"]);
        Assert.Equal(good.Count + 1, salvaged.Count);
        if (large)
        {
            // A damaged value takes its document alone.
            Assert.All(ranges, range => Assert.Equal(range.FromId + "\0", range.ToId));
        }
    }

    /// <summary>Writes <paramref name="count"/> documents (of about 30 KB each when <paramref name="large"/>, so
    /// their values lie in overflow pages), closes the store (its checkpoint holds them all) and flips a bit in the
    /// middle of the data file.</summary>
    private static async Task FillAndDamageAsync(string folder, int count, bool large)
    {
        await FillAsync(folder, count, _ => new string('q', large ? 30_000 : 100));
        string dataFile = Path.Combine(folder, "data.folio");
        FileDamage.FlipByte(dataFile, new FileInfo(dataFile).Length / 2, 0x10);
    }

    /// <summary>Writes <paramref name="count"/> documents of about 120 bytes (<see cref="FillAsync"/>) and finds which
    /// of them a byte flipped in the middle of the data file damages, on a copy, leaving the store itself whole: the
    /// data file, the offset to flip, and the damaged ids.</summary>
    private static async Task<(string DataFile, long Offset, List<string> Bad)> FillAndFindDamageAsync(
        string folder, int count)
    {
        using var copy = new TempDirectory();
        await FillAsync(folder, count, _ => new string('q', 100));
        string dataFile = Path.Combine(folder, "data.folio");
        long offset = new FileInfo(dataFile).Length / 2;
        StoreCheckpointTests.CopyFolder(folder, copy.Path);
        FileDamage.FlipByte(Path.Combine(copy.Path, "data.folio"), offset, 0x10);
        await using DocumentStore damaged = DocumentStore.Open(copy.Path, Options());
        return (dataFile, offset, Classify(damaged, count).Bad);
    }

    /// <summary>Writes documents 0 to <paramref name="count"/> - 1 (value i, padded with
    /// <paramref name="pad"/>(i)), 20 a commit, and closes the store: its checkpoint holds them all.</summary>
    private static async Task FillAsync(string folder, int count, Func<int, string> pad)
    {
        await using DocumentStore store = DocumentStore.Open(folder, Options());
        for (int i = 0; i < count; i += 20)
        {
            var batch = new CommitBatch();
            for (int j = i; j < Math.Min(count, i + 20); j++)
            {
                batch.Put("Item", Id(j), Json(j, pad(j)));
            }

            await store.WriteAsync(batch);
        }
    }

    private static (List<string> Bad, List<string> Good) Classify(DocumentStore store, int count)
    {
        var bad = new List<string>();
        var good = new List<string>();
        for (int i = 0; i < count; i++)
        {
            try
            {
                Assert.Equal(i, JsonValue(store.Get("Item", Id(i))));
                good.Add(Id(i));
            }
            catch (StoreCorruptedException)
            {
                bad.Add(Id(i));
            }
        }

        return (bad, good);
    }

    private static DocumentStoreOptions Options(DataFileReadMode reads = DataFileReadMode.Automatic)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.DataFileReads = reads;
        return options;
    }

    private static string Id(int i) => $"doc{i:D5}";

    private static int Value(string id) => int.Parse(id.AsSpan(3), System.Globalization.CultureInfo.InvariantCulture);

    private static byte[] Json(int value, string pad) =>
        Encoding.UTF8.GetBytes($$"""{"Value":{{value}},"Pad":"{{pad}}"}""");

    /// <summary>The document's <c>Value</c> property, or null when there is no document.</summary>
    internal static int? JsonValue(StoredDocument? document) => document is { } found
        ? System.Text.Json.JsonDocument.Parse(found.Json).RootElement.GetProperty("Value").GetInt32()
        : null;

    private sealed class Item
    {
        public string Id { get; set; } = "";

        public int Value { get; set; }

        public string Pad { get; set; } = "";
    }
}
