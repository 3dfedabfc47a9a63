using Folio.Transactions;

namespace Folio.Tests.Transactions;

/// <summary><see cref="EntrySlabs"/>: per-thread slabs the batch entries are cut from.</summary>
public sealed class EntrySlabsTests
{
    [Fact]
    public async Task Regions_cut_on_many_threads_never_overlap_and_keep_what_was_written_into_them()
    {
        const int Threads = 8;
        const int PerThread = 20_000;
        var regions = new Memory<byte>[Threads][];
        await Task.WhenAll(Enumerable.Range(0, Threads).Select(t => Task.Factory.StartNew(() =>
        {
            var random = new Random(t);
            var mine = new Memory<byte>[PerThread];
            for (int i = 0; i < PerThread; i++)
            {
                // Mostly small entries, some over the slabbed limit, some exactly at it.
                int length = (i % 50) switch
                {
                    0 => EntrySlabs.MaxSlabbedEntry + 1 + random.Next(100),
                    1 => EntrySlabs.MaxSlabbedEntry,
                    _ => 1 + random.Next(400),
                };
                mine[i] = EntrySlabs.Allocate(length);
                Assert.Equal(length, mine[i].Length);
                Fill(mine[i].Span, t, i);
            }

            regions[t] = mine;
        }, TaskCreationOptions.LongRunning)));

        for (int t = 0; t < Threads; t++)
        {
            for (int i = 0; i < PerThread; i++)
            {
                Span<byte> expected = new byte[regions[t][i].Length];
                Fill(expected, t, i);
                Assert.True(expected.SequenceEqual(regions[t][i].Span), $"thread {t} entry {i} was overwritten");
            }
        }
    }

    [Fact]
    public void Entries_over_the_limit_get_arrays_of_their_own_and_small_ones_share_a_slab()
    {
        Memory<byte> large = EntrySlabs.Allocate(EntrySlabs.MaxSlabbedEntry + 1);
        Assert.True(System.Runtime.InteropServices.MemoryMarshal.TryGetArray((ReadOnlyMemory<byte>)large,
            out ArraySegment<byte> own));
        Assert.Equal(0, own.Offset);
        Assert.Equal(EntrySlabs.MaxSlabbedEntry + 1, own.Array!.Length);

        Memory<byte> first = EntrySlabs.Allocate(10);
        Memory<byte> second = EntrySlabs.Allocate(10);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray((ReadOnlyMemory<byte>)first,
            out ArraySegment<byte> a);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray((ReadOnlyMemory<byte>)second,
            out ArraySegment<byte> b);
        if (ReferenceEquals(a.Array, b.Array))
        {
            Assert.Equal(a.Offset + 10, b.Offset); // consecutive in one slab
        }
        else
        {
            Assert.Equal(0, b.Offset); // the slab was full: a new one
        }

        Assert.Equal(EntrySlabs.SlabSize, b.Array!.Length);
    }

    private static void Fill(Span<byte> region, int thread, int entry)
    {
        for (int k = 0; k < region.Length; k++)
        {
            region[k] = (byte)(thread * 31 + entry * 7 + k);
        }
    }
}
