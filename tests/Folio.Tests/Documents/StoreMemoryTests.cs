using System.Globalization;
using Folio.CrashHost;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Resident memory against <see cref="DocumentStoreOptions.CacheSize"/>, measured in a process of its own
/// (<see cref="MemoryWorkload"/>, so other tests' allocations do not blur it), while a store is written and read far
/// past its cache: reading it grows the resident set by at most the cache and a fixed allowance for the readers' own
/// copies; and writing it does not grow the live managed heap with the data written (after the writes it is no larger
/// than halfway through, give or take a fixed allowance; both measured right after a checkpoint of everything written
/// so far, since the versions kept between checkpoints vary with how far behind the background checkpoints run on a
/// busy machine). FOLIO_MEMORY_MB sets how much is written (default 192 MB; 1024 for the 1 GB).
/// </summary>
public sealed class StoreMemoryTests
{
    private const int CacheMiB = 32;
    private const long Allowance = 64L << 20;

    [Fact]
    public async Task Resident_memory_stays_within_the_cache_and_a_fixed_allowance_while_the_store_outgrows_it()
    {
        int megabytes = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_MEMORY_MB"), out int mb) ? mb : 192;
        using var dir = new TempDirectory();
        using var child = CrashHostProcess.Start("memory", dir.Path, megabytes.ToString(CultureInfo.InvariantCulture),
            CacheMiB.ToString(CultureInfo.InvariantCulture));
        Task<string> errors = child.StandardError.ReadToEndAsync();
        string output = await child.StandardOutput.ReadToEndAsync().WaitAsync(TimeSpan.FromMinutes(10));
        await child.WaitForExitAsync();
        Assert.True(child.ExitCode == 0, $"the workload failed: {output} {await errors}");
        long[] rss = output.Trim().Split(' ')[1..].Select(f => long.Parse(f, CultureInfo.InvariantCulture)).ToArray();
        (long writing, long liveHalfway, long liveAfterWrites, long beforeReads, long reading, long read) =
            (rss[1], rss[2], rss[3], rss[4], rss[5], rss[6]);
        Assert.Equal(2L * megabytes * 1024, read);
        string figures = $"MiB: resident after open {rss[0] >> 20}, writing {writing >> 20}, live heap halfway " +
            $"{liveHalfway >> 20} and after the writes {liveAfterWrites >> 20}, resident before reads " +
            $"{beforeReads >> 20}, reading {reading >> 20}";
        Assert.True(reading - beforeReads <= ((long)CacheMiB << 20) + Allowance,
            $"reading {megabytes} MB grew the resident set past the {CacheMiB} MiB cache: {figures}");
        Assert.True(liveAfterWrites <= liveHalfway + Allowance, $"the heap grew with the data written: {figures}");
    }

    /// <summary>
    /// A store of many small collections (a collection per tenant) holds memory in proportion to its documents, not a
    /// fixed block per collection: 4,000 collections of three documents, checkpointed, written again and reopened, in
    /// a process of its own (<see cref="CollectionsWorkload"/>). Each collection's head table and added-id list once
    /// began with a whole block (360 KiB and 20 KiB): 1.4 GB of live heap for 12,000 documents of 20 bytes.
    /// </summary>
    [Fact]
    public async Task Thousands_of_small_collections_hold_memory_in_proportion_to_their_documents()
    {
        const int Collections = 4_000;
        const long PerCollection = 8 * 1024;
        using var dir = new TempDirectory();
        using var child = CrashHostProcess.Start("collections", dir.Path,
            Collections.ToString(CultureInfo.InvariantCulture), "3");
        Task<string> errors = child.StandardError.ReadToEndAsync();
        string output = await child.StandardOutput.ReadToEndAsync().WaitAsync(TimeSpan.FromMinutes(5));
        await child.WaitForExitAsync();
        Assert.True(child.ExitCode == 0, $"the workload failed: {output} {await errors}");
        long[] live = output.Trim().Split(' ')[1..].Select(f => long.Parse(f, CultureInfo.InvariantCulture)).ToArray();
        Assert.Equal((3L * Collections) + (Collections / 10), live[4]);
        string figures = $"KiB of live heap: after open {live[0] >> 10}, after the writes {live[1] >> 10}, after the " +
            $"checkpoint and more writes {live[2] >> 10}, after the reopen and reads {live[3] >> 10}";
        for (int i = 1; i <= 3; i++)
        {
            Assert.True(live[i] - live[0] <= Collections * PerCollection,
                $"more than {PerCollection >> 10} KiB a collection: {figures}");
        }
    }

    /// <summary>
    /// A bulk load of new ids with checkpoints off leaves nothing to rebuild: every record is its id's head, so a
    /// rebuild would copy the whole table and drop nothing. The heads were rebuilt each time their records doubled.
    /// </summary>
    [Fact]
    public async Task New_ids_written_with_checkpoints_off_never_make_the_heads_rebuild()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, CheckpointsOff());
        for (int round = 0; round < 1_500; round++)
        {
            await store.WriteAsync(Batch(100, i => $"k{round}-{i}", "{}"));
            Assert.False(store.Index.HasHeadsMaintenance, $"a rebuild is due after {(round + 1) * 100} new ids");
        }

        Assert.Equal(150_000, store.Index.HeadRecords);
        Assert.Equal(150_000, store.Index.HeadCount);
    }

    /// <summary>
    /// With checkpoints off, overwriting the same few ids keeps no more versions than readers need: each overwrite
    /// appends a record to the heads and cuts the chain behind it, and the checkpoint's thread rebuilds a table whose
    /// records outgrew the ones it was built with, leaving the unreachable ones behind. Before, pruned versions stayed
    /// in the table until a checkpoint's eviction, which never comes here.
    /// </summary>
    [Fact]
    public async Task Overwrites_with_checkpoints_off_keep_the_heads_records_bounded()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, CheckpointsOff());
        for (int round = 0; round < 3_000; round++)
        {
            await store.WriteAsync(Batch(100, i => $"k{i % 4}", $$"""{"n":{{round}}}"""));
        }

        // 300,000 versions of 4 ids; the checkpoint's thread looks every 100 ms and rebuilds once the records
        // appended since the last rebuild pass the minimum.
        using var deadline = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        while (store.Index.HasHeadsMaintenance)
        {
            await Task.Delay(20, deadline.Token);
        }

        // A rebuild that ran while the writer went on starts its table with the records it replayed (100 a commit
        // written meanwhile, a few commits at most), and the table rebuilds again only once it appended more than the
        // minimum since: so about the minimum plus a few hundred, bounded here by twice the minimum, where keeping
        // every version would be 300,000.
        Assert.True(store.Index.HeadRecords <= (2 * VersionedIndex.HeadsRebuildMinimum) + 16,
            $"{store.Index.HeadRecords} records in the heads for 4 ids");
        Assert.Equal(4, store.Index.HeadCount);
        for (int i = 0; i < 4; i++)
        {
            Assert.Equal("""{"n":2999}""",
                System.Text.Encoding.UTF8.GetString(store.Get("Item", $"k{i}")!.Value.Json.Span));
        }
    }

    /// <summary>Options with checkpoints off (no threshold, no interval) and buffered commits.</summary>
    private static DocumentStoreOptions CheckpointsOff() => new()
    {
        Durability = DurabilityMode.Buffered,
        CheckpointThreshold = 1L << 50,
        CheckpointInterval = Timeout.InfiniteTimeSpan,
    };

    /// <summary>A batch of <paramref name="count"/> puts into "Item" of <paramref name="json"/>, under the ids
    /// <paramref name="id"/> gives.</summary>
    private static CommitBatch Batch(int count, Func<int, string> id, string json)
    {
        var batch = new CommitBatch();
        byte[] bytes = System.Text.Encoding.UTF8.GetBytes(json);
        for (int i = 0; i < count; i++)
        {
            batch.Put("Item", id(i), bytes);
        }

        return batch;
    }
}
