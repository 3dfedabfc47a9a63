using System.Text;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

public sealed class IdFilterTests
{
    [Property(MaxTest = 50)]
    public void Every_id_added_is_found_whatever_the_segments_it_grew(NonEmptyString[] ids, PositiveInt start)
    {
        var filter = IdFilter.Create(start.Get % 5000, 1L << 20, complete: true)!;
        foreach (NonEmptyString id in ids)
        {
            Assert.True(filter.Add(IdBytes.HashOf(id.Get)));
        }

        foreach (NonEmptyString id in ids)
        {
            Assert.True(filter.MightContain(IdBytes.HashOf(id.Get)));
        }
    }

    [Property(MaxTest = 200)]
    public void An_ids_hash_from_its_characters_is_its_strings(string id) =>
        Assert.Equal(IdBytes.HashOf(id ?? ""), IdBytes.HashOf((id ?? "").AsSpan()));

    [Fact]
    public void A_filter_grown_to_a_million_ids_finds_them_all_and_answers_maybe_for_few_others()
    {
        var filter = IdFilter.Create(0, 64L << 20, complete: true)!;
        for (int i = 0; i < 1_000_000; i++)
        {
            Assert.True(filter.Add(IdBytes.HashOf($"users/{i}")));
        }

        for (int i = 0; i < 1_000_000; i++)
        {
            Assert.True(filter.MightContain(IdBytes.HashOf($"users/{i}")), $"users/{i}");
        }

        int maybe = 0;
        for (int i = 0; i < 100_000; i++)
        {
            maybe += filter.MightContain(IdBytes.HashOf($"others/{i}")) ? 1 : 0;
        }

        Assert.InRange(maybe, 0, 4_000); // about 1% a segment, and the small ones are the full ones
        Assert.InRange(filter.Bytes, 1 << 20, 8 << 20);
    }

    [Fact]
    public void The_default_limit_holds_more_than_eight_million_ids_added_one_by_one()
    {
        var filter = IdFilter.Create(0, VersionedIndex.DefaultIdFilterBytes, complete: true)!;
        int added = 0;
        while (filter.Add(IdBytes.HashOf($"i{added}")))
        {
            added++;
        }

        Assert.InRange(added, 8_500_000, 9_500_000);
        Assert.True(filter.Bytes <= VersionedIndex.DefaultIdFilterBytes);
    }

    [Fact]
    public void Add_refuses_an_id_past_the_limit_and_keeps_every_id_it_took()
    {
        // Segments of 256 bytes, 1, 4 and 16 KiB, then 32 KiB (not 64: the most that fits), 34,080 ids; then none.
        var filter = IdFilter.Create(0, 64 * 1024, complete: true)!;
        var taken = new List<string>();
        for (int i = 0; ; i++)
        {
            string id = $"k{i}";
            if (!filter.Add(IdBytes.HashOf(id)))
            {
                break;
            }

            taken.Add(id);
            Assert.True(i < 10_000_000, "the filter never refused");
        }

        Assert.InRange(taken.Count, 34_080, 35_500); // ids whose bits were all set already take no room
        Assert.True(filter.Bytes <= 64 * 1024);
        Assert.All(taken, id => Assert.True(filter.MightContain(IdBytes.HashOf(id))));
    }

    [Fact]
    public void Filters_share_one_budget_and_a_dropped_one_gives_its_memory_back()
    {
        var budget = new IdFilterBudget(64 * 1024);
        IdFilter first = IdFilter.Create(0, 1L << 20, complete: true, budget)!;
        int added = 0;
        while (first.Add(IdBytes.HashOf($"a{added}")))
        {
            added++;
        }

        Assert.True(first.Bytes <= 64 * 1024, $"{first.Bytes}");
        Assert.Equal(64 * 1024 - first.Bytes, budget.Remaining);
        Assert.True(added > 20_000, $"{added}"); // the budget, not the filter's own limit, stopped it
        IdFilter? second = IdFilter.Create(0, 1L << 20, complete: true, budget);
        Assert.True(second is null || budget.Remaining >= 0);
        second?.Release();

        first.Release();
        first.Release(); // once
        Assert.Equal(64 * 1024, budget.Remaining);
        Assert.Null(IdFilter.Create(10_000_000, 1L << 20, complete: false, budget)); // more ids than it may hold
        Assert.NotNull(IdFilter.Create(1000, 1L << 20, complete: false, budget));
    }

    [Fact]
    public void Readers_find_every_id_whose_add_returned_while_two_writers_grow_the_filter()
    {
        var filter = IdFilter.Create(0, 64L << 20, complete: true)!;
        const int PerWriter = 300_000;
        var published = new int[2];
        var failures = new List<string>();
        var writers = Enumerable.Range(0, 2).Select(w => new Thread(() =>
        {
            for (int i = 0; i < PerWriter; i++)
            {
                if (!filter.Add(IdBytes.HashOf($"w{w}/{i}")))
                {
                    lock (failures)
                    {
                        failures.Add($"w{w}/{i} refused");
                    }
                }

                Volatile.Write(ref published[w], i + 1);
            }
        })).ToList();
        var stop = new CancellationTokenSource();
        long checks = 0;
        var reader = new Thread(() =>
        {
            var random = new Random(7);
            while (!stop.IsCancellationRequested)
            {
                int w = random.Next(2);
                int upTo = Volatile.Read(ref published[w]);
                if (upTo == 0)
                {
                    continue;
                }

                int i = random.Next(upTo);
                checks++;
                if (!filter.MightContain(IdBytes.HashOf($"w{w}/{i}")))
                {
                    lock (failures)
                    {
                        failures.Add($"w{w}/{i} missed");
                    }
                }
            }
        });
        reader.Start();
        writers.ForEach(t => t.Start());
        writers.ForEach(t => t.Join());
        stop.Cancel();
        reader.Join();

        Assert.Empty(failures);
        Assert.True(checks > 1000, $"{checks} checks");
        for (int w = 0; w < 2; w++)
        {
            for (int i = 0; i < PerWriter; i++)
            {
                Assert.True(filter.MightContain(IdBytes.HashOf($"w{w}/{i}")));
            }
        }
    }

    [Fact]
    public void A_filter_built_after_an_open_holds_the_replayed_ids_and_those_written_before_it()
    {
        // The replayed documents and the ids written after the open but before the build: a filter built from the
        // trees alone would lack them, and a checkpoint would then put them where reads trust it not to look.
        using var dir = new TempDirectory();
        var index = new VersionedIndex();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20)))
        {
            for (int i = 0; i < 300; i++)
            {
                journal.AppendBatch(new CommitBatch().Put("c", $"replayed/{i}", Json(i)));
            }

            journal.Sync();
            JournalReplay.Run(journal, index);
        }

        Assert.Null(index.IdFilterOf("c")); // the open's collections wait for the checkpoint's thread
        long sequence = index.VisibleSequence;
        for (int i = 0; i < 200; i++)
        {
            index.Apply(new CommitBatch().Put("c", $"written/{i}", Json(i)), ++sequence, 0);
            index.Publish(sequence);
        }

        Assert.Equal(1, index.BuildIdFilters(dataFileBytes: 0));
        IdFilter filter = index.IdFilterOf("c")!;
        Assert.True(filter.IsComplete);
        for (int i = 0; i < 300; i++)
        {
            Assert.True(filter.MightContain(IdBytes.HashOf($"replayed/{i}")), $"replayed/{i}");
        }

        for (int i = 0; i < 200; i++)
        {
            Assert.True(filter.MightContain(IdBytes.HashOf($"written/{i}")), $"written/{i}");
        }

        // Ids the committer writes from now on are its own to add; a new collection's filter is complete at once.
        index.Apply(new CommitBatch().Put("c", "later", Json(0)).Put("d", "first", Json(0)), ++sequence, 0);
        Assert.True(filter.MightContain(IdBytes.HashOf("later")));
        Assert.True(index.IdFilterOf("d") is { IsComplete: true } d && d.MightContain(IdBytes.HashOf("first")));
        Assert.Equal(0, index.BuildIdFilters(dataFileBytes: 0)); // nothing left to build
    }

    [Fact]
    public void No_filter_is_built_for_a_data_file_larger_than_the_limit()
    {
        using var dir = new TempDirectory();
        var index = new VersionedIndex(Timeout.InfiniteTimeSpan, idFilterBuildBytes: 1000);
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(1 << 20)))
        {
            journal.AppendBatch(new CommitBatch().Put("c", "a", Json(0)));
            journal.Sync();
            JournalReplay.Run(journal, index);
        }

        Assert.Equal(0, index.BuildIdFilters(dataFileBytes: 1001));
        Assert.Null(index.IdFilterOf("c"));
        Assert.NotNull(index.Get(new DocumentKey("c", "a"), index.VisibleSequence));
    }

    [Fact]
    public async Task A_store_reopened_over_a_tree_and_a_journal_reads_and_writes_every_id_as_a_model_does()
    {
        // Two reopens without a closing checkpoint: each open finds a tree and replayed documents, builds the
        // filters, and then takes new ids, overwrites, deletes and ids deleted and written again, with checkpoints
        // between; every read of present and missing ids matches the model, before and after each reopen.
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.CheckpointOnClose = false;
        var model = new Dictionary<string, string>(StringComparer.Ordinal);
        var random = new Random(11);
        for (int round = 0; round < 3; round++)
        {
            await using var store = DocumentStore.Open(dir.Path, options);
            if (round > 0)
            {
                await WaitForFilterAsync(store, "c");
            }

            for (int step = 0; step < 1500; step++)
            {
                string id = $"d/{random.Next(3000)}";
                if (random.Next(4) == 0)
                {
                    await store.DeleteAsync("c", id);
                    model.Remove(id);
                }
                else
                {
                    string json = $"{{\"r\":{round},\"s\":{step}}}";
                    await store.PutAsync("c", id, Encoding.UTF8.GetBytes(json));
                    model[id] = json;
                }

                if (step % 500 == 499)
                {
                    await store.CheckpointAsync();
                }
            }

            AssertMatches(store, model);
            await store.CheckpointAsync();
            AssertMatches(store, model);
            for (int i = 0; i < 200; i++)
            {
                string id = $"d/{3000 + (round * 200) + i}"; // new after the last checkpoint: left to the journal
                await store.PutAsync("c", id, Json(i));
                model[id] = Encoding.UTF8.GetString(Json(i));
            }
        }

        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            await WaitForFilterAsync(store, "c");
            await store.CheckpointAsync(); // the replayed documents move into the tree
            AssertMatches(store, model);
        }
    }

    [Fact]
    public async Task A_collection_that_outgrows_its_filter_drops_it_and_still_finds_every_id()
    {
        // A store's filters take at most a sixteenth of the cache each (here 256 KiB): some 136,000 ids.
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        options.CacheSize = 2L << 20;
        await using var store = DocumentStore.Open(dir.Path, options);
        await PutInBatchesAsync(store, 0, 61_000, i => $"d/{i}");
        await store.CheckpointAsync(); // ids in the tree while the filter still holds them all
        Assert.True(store.Index.IdFilterOf("c") is { IsComplete: true });
        await PutInBatchesAsync(store, 61_000, 150_000, i => $"d/{i}");

        Assert.Null(store.Index.IdFilterOf("c"));
        await store.CheckpointAsync();
        for (int i = 0; i < 150_000; i += 7)
        {
            Assert.True(store.Get("c", $"d/{i}") is { } found && found.Json.Span.SequenceEqual(Json(i)), $"d/{i}");
            Assert.Null(store.Get("c", $"e/{i}"));
        }

        await store.PutAsync("c", "d/150000", Json(150_000));
        Assert.NotNull(store.Get("c", "d/150000"));
    }

    [Fact]
    public async Task Writers_that_race_the_filter_built_at_an_open_lose_no_id()
    {
        // Writers start as the open returns, while the checkpoint's thread reads the tree into the filter: new ids
        // written before the filter is published are in the heads it reads after, those written later are the
        // committer's to add; a checkpoint then moves them all into the tree, where reads must still find them.
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.ManualCheckpoints();
        await using (var store = DocumentStore.Open(dir.Path, options))
        {
            await PutInBatchesAsync(store, 0, 50_000, i => $"t/{i:D6}");
        }

        var deleted = new HashSet<int>();
        for (int round = 0; round < 3; round++)
        {
            await using var store = DocumentStore.Open(dir.Path, options);
            int r = round;
            await Task.WhenAll(Enumerable.Range(0, 4).Select(w => Task.Run(async () =>
            {
                for (int i = 0; i < 1500; i++)
                {
                    await store.PutAsync("c", $"n/{r}/{w}/{i}", Json(i));
                    if (i % 50 == 0)
                    {
                        await store.DeleteAsync("c", $"t/{(r * 10_000) + (w * 1000) + i:D6}");
                    }
                }
            })));
            for (int w = 0; w < 4; w++)
            {
                for (int i = 0; i < 1500; i += 50)
                {
                    deleted.Add((r * 10_000) + (w * 1000) + i);
                }
            }

            await WaitForFilterAsync(store, "c");
            await store.CheckpointAsync();
            for (int done = 0; done <= round; done++)
            {
                for (int w = 0; w < 4; w++)
                {
                    for (int i = 0; i < 1500; i++)
                    {
                        Assert.True(store.Get("c", $"n/{done}/{w}/{i}") is not null, $"n/{done}/{w}/{i}");
                    }
                }
            }

            for (int i = 0; i < 50_000; i += 3)
            {
                Assert.Equal(!deleted.Contains(i), store.Get("c", $"t/{i:D6}") is not null);
            }
        }
    }

    /// <summary>Puts documents <paramref name="from"/> to <paramref name="to"/> (excluded) of collection "c", named
    /// by <paramref name="id"/>, in commits of 1,000.</summary>
    private static async Task PutInBatchesAsync(DocumentStore store, int from, int to, Func<int, string> id)
    {
        for (int start = from; start < to; start += 1000)
        {
            var batch = new CommitBatch();
            for (int i = start; i < Math.Min(to, start + 1000); i++)
            {
                batch.Put("c", id(i), Json(i));
            }

            await store.WriteAsync(batch);
        }
    }

    private static async Task WaitForFilterAsync(DocumentStore store, string collection)
    {
        for (int i = 0; i < 500 && store.Index.IdFilterOf(collection) is not { IsComplete: true }; i++)
        {
            await Task.Delay(10);
        }

        Assert.True(store.Index.IdFilterOf(collection) is { IsComplete: true }, "no filter built");
    }

    private static void AssertMatches(DocumentStore store, Dictionary<string, string> model)
    {
        for (int i = 0; i < 4000; i++)
        {
            string id = $"d/{i}";
            StoredDocument? document = store.Get("c", id);
            if (model.TryGetValue(id, out string? json))
            {
                Assert.True(document is not null, id);
                Assert.Equal(json, Encoding.UTF8.GetString(document.Value.Json.Span));
            }
            else
            {
                Assert.True(document is null, id);
            }
        }

        Assert.Equal(model.Count, store.Scan("c").Count());
    }

    private static byte[] Json(int n) => Encoding.UTF8.GetBytes($"{{\"n\":{n}}}");
}
