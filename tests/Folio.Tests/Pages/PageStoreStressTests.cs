using System.Buffers.Binary;
using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// The page store's lock-free read path under load: a writer checkpoints round after round (every id put or deleted
/// each round, so every page and chunk is superseded and dead chunks are reused), readers pin the current checkpoint
/// and check every value they read against the state its round must hold, and a dropper throws pinned checkpoints'
/// pages out of memory so reads race the lazy loads, the chunk map's replacement and the reuse of freed extents.
/// <c>FOLIO_STRESS_SECONDS</c> lengthens the run (default 2 s).
/// </summary>
public sealed class PageStoreStressTests
{
    private const int Ids = 1_500;

    [Fact]
    public void Readers_of_pinned_checkpoints_see_exactly_their_round_while_checkpoints_and_evictions_run()
    {
        double seconds = StressDuration.Seconds(2);
        using var dir = new TempDirectory();
        using var store = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(dir.Path, "data.folio"));
        store.Checkpoint(1, [Round(1)]);
        long reads = 0;
        long rounds = 1;
        long drops = 0;

        // Run for the set time, and on a starved machine a while longer until the counts asserted below are reached.
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Volatile.Read(ref rounds) <= 10 || Interlocked.Read(ref reads) <= 1_000
                || Interlocked.Read(ref drops) <= 100,
            TimeSpan.FromSeconds(60));

        var writer = new Thread(() =>
        {
            for (int round = 2; !stop.IsCancellationRequested; round++)
            {
                store.Checkpoint(round, [Round(round)]);
                Volatile.Write(ref rounds, round);
            }
        });
        var dropper = new Thread(() =>
        {
            while (!stop.IsCancellationRequested)
            {
                PageCheckpoint pinned = store.Pin();
                try
                {
                    Interlocked.Add(ref drops, PageStoreModel.DropCachedPages(pinned));
                }
                finally
                {
                    PageStore.Unpin(pinned);
                }
            }
        });
        var readers = new Thread[3];
        var failures = new List<Exception>();
        for (int r = 0; r < readers.Length; r++)
        {
            int seed = r;
            readers[r] = new Thread(() =>
            {
                var random = new Random(seed);
                try
                {
                    while (!stop.IsCancellationRequested)
                    {
                        PageCheckpoint pinned = store.Pin();
                        try
                        {
                            Interlocked.Add(ref reads, ReadAndCheck(pinned, store.Reader, random));
                        }
                        finally
                        {
                            PageStore.Unpin(pinned);
                        }
                    }
                }
                catch (Exception error)
                {
                    lock (failures)
                    {
                        failures.Add(error);
                    }

                    stop.Cancel();
                }
            });
        }

        writer.Start();
        dropper.Start();
        foreach (Thread reader in readers)
        {
            reader.Start();
        }

        writer.Join();
        dropper.Join();
        foreach (Thread reader in readers)
        {
            reader.Join();
        }

        Assert.Empty(failures);
        Assert.True(Volatile.Read(ref rounds) > 10, $"{rounds} rounds");
        Assert.True(reads > 1_000 && drops > 100, $"{reads} reads, {drops} pages dropped");
        Assert.True(store.ChunkCount < 20, $"dead chunks are reused ({store.ChunkCount} chunks)");
    }

    /// <summary>Round r puts every id, except a tenth chosen by (id, r), which it deletes; a put's value names the id
    /// and the round.</summary>
    private static CollectionChanges Round(int round)
    {
        var changes = new CollectionChanges("c");
        for (int id = 0; id < Ids; id++)
        {
            changes.Changes.Add(IsDeleted(id, round)
                ? TreeChange.Delete(Id(id))
                : TreeChange.Put(Id(id), new StoredValue(round, round, Value(id, round))));
        }

        return changes;
    }

    private static long ReadAndCheck(PageCheckpoint pinned, IPageReader reader, Random random)
    {
        int round = (int)pinned.Sequence;
        PageReference root = pinned.Collections["c"].Root;
        long reads = 0;
        for (int i = 0; i < 50; i++)
        {
            int id = random.Next(Ids);
            bool found = BTree.TryGet(root, Id(id), reader, out StoredValue value);
            Assert.Equal(!IsDeleted(id, round), found);
            if (found)
            {
                Check(id, round, value, reader);
            }

            reads++;
        }

        int from = random.Next(Ids);
        int expected = from;
        foreach (KeyValuePair<string, StoredValue> entry in BTree.Range(root, Id(from), Id(from + 100), false, reader))
        {
            while (IsDeleted(expected, round))
            {
                expected++;
            }

            Assert.Equal(Id(expected), entry.Key);
            Check(expected, round, entry.Value, reader);
            expected++;
            reads++;
        }

        return reads;
    }

    private static void Check(int id, int round, StoredValue value, IPageReader reader)
    {
        Assert.Equal(round, value.Sequence);
        ReadOnlySpan<byte> bytes = value.Read(reader).Span;
        Assert.Equal(Value(id, round).Length, bytes.Length);
        Assert.Equal(id, BinaryPrimitives.ReadInt32LittleEndian(bytes));
        Assert.Equal(round, BinaryPrimitives.ReadInt32LittleEndian(bytes[4..]));
    }

    private static bool IsDeleted(int id, int round) => ((id * 7919) + (round * 104_729)) % 10 == 0;

    private static string Id(int id) => $"id/{id:D6}";

    private static byte[] Value(int id, int round)
    {
        // Every 50th id carries an overflow value.
        byte[] value = new byte[id % 50 == 0 ? 3_000 + (round % 7) : 24 + ((id + round) % 60)];
        BinaryPrimitives.WriteInt32LittleEndian(value, id);
        BinaryPrimitives.WriteInt32LittleEndian(value.AsSpan(4), round);
        return value;
    }
}
