using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Transactions;

namespace Folio.Tests.Transactions;

public sealed class ValueSlabsTests
{
    /// <summary>
    /// Random copies (empty, small, slab-sized and larger than a slabbed value) and releases against a model that
    /// keeps every live copy's bytes and the live bytes per backing array: every copy keeps its bytes, and a value is
    /// sparse exactly when its slab's live bytes are under half of what the slab holds.
    /// </summary>
    [Property(MaxTest = 200)]
    public void Copies_keep_their_bytes_and_sparseness_follows_the_live_bytes(int[] program)
    {
        var slabs = new ValueSlabs();
        var live = new List<(ReadOnlyMemory<byte> Copy, byte[] Expected)>();
        var random = new Random(program.Length);
        byte[]? current = null; // the slab copies go to now, and how far it is filled
        int currentEnd = 0;
        foreach (int op in program)
        {
            if ((op & 3) != 3 || live.Count == 0)
            {
                int length = (op >>> 2) % 4 switch
                {
                    0 => 0,
                    1 => 1 + ((op >>> 4) % 300),
                    2 => 1 + ((op >>> 4) % ValueSlabs.MaxSlabbedValue),
                    _ => ValueSlabs.MaxSlabbedValue + 1 + ((op >>> 4) % 5000),
                };
                byte[] value = new byte[length];
                random.NextBytes(value);
                ReadOnlyMemory<byte> copy = slabs.Copy(value);
                live.Add((copy, value));
                if (length is > 0 and <= ValueSlabs.MaxSlabbedValue)
                {
                    System.Runtime.InteropServices.MemoryMarshal.TryGetArray(copy, out ArraySegment<byte> made);
                    Assert.True(made.Array!.Length is >= ValueSlabs.FirstSlabSize and <= ValueSlabs.MaxSlabSize);
                    current = made.Array;
                    currentEnd = made.Offset + made.Count;
                }
            }
            else
            {
                int at = (op >>> 2) % live.Count;
                slabs.Release(live[at].Copy);
                live.RemoveAt(at);
            }

            foreach ((ReadOnlyMemory<byte> copy, byte[] expected) in live)
            {
                Assert.True(copy.Span.SequenceEqual(expected));
            }
        }

        // The model: live bytes per slab (a slab is an array shared by more than one copy or made by the slabs).
        var liveBytes = new Dictionary<byte[], int>(ReferenceEqualityComparer.Instance);
        foreach ((ReadOnlyMemory<byte> copy, _) in live)
        {
            if (System.Runtime.InteropServices.MemoryMarshal.TryGetArray(copy, out ArraySegment<byte> segment) && segment.Array is { Length: >= ValueSlabs.FirstSlabSize } array && copy.Length <= ValueSlabs.MaxSlabbedValue)
            {
                liveBytes[array] = liveBytes.GetValueOrDefault(array) + copy.Length;
            }
        }

        foreach ((ReadOnlyMemory<byte> copy, _) in live)
        {
            if (copy.Length == 0 || copy.Length > ValueSlabs.MaxSlabbedValue)
            {
                Assert.False(slabs.IsSparse(copy)); // not in a slab
                continue;
            }

            System.Runtime.InteropServices.MemoryMarshal.TryGetArray(copy, out ArraySegment<byte> segment);
            // A slab holds all of its length once a newer slab exists, and up to its last copy while it is the current one.
            int used = ReferenceEquals(segment.Array, current) ? currentEnd : segment.Array!.Length;
            Assert.Equal(liveBytes[segment.Array!] * 2L < used, slabs.IsSparse(copy));
        }
    }

    [Fact]
    public void A_mostly_released_slab_is_sparse_and_a_full_one_is_not()
    {
        var slabs = new ValueSlabs();
        var copies = new List<ReadOnlyMemory<byte>>();
        for (int i = 0; i < 300; i++)
        {
            copies.Add(slabs.Copy(new byte[200]));
        }

        Assert.False(slabs.AnySparse);
        for (int i = 0; i < 250; i++)
        {
            slabs.Release(copies[i]);
        }

        Assert.True(slabs.AnySparse);
        Assert.True(slabs.IsSparse(copies[299]));
        Assert.False(slabs.IsSparse(new byte[10])); // memory not made by the slabs
        Assert.False(new ValueSlabs(trackLive: false).IsSparse(copies[299]));
    }

    [Fact]
    public void Expected_bytes_size_the_slabs_up_to_the_largest_sized_slab()
    {
        var slabs = new ValueSlabs(expectedBytes: 300_000);
        ReadOnlyMemory<byte> first = slabs.Copy(new byte[100]);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray(first, out ArraySegment<byte> segment);
        Assert.Equal(300_000, segment.Array!.Length);

        var small = new ValueSlabs(expectedBytes: 10);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray(small.Copy(new byte[10]), out segment);
        Assert.Equal(ValueSlabs.FirstSlabSize, segment.Array!.Length);

        var huge = new ValueSlabs(expectedBytes: 10L * ValueSlabs.MaxSizedSlab);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray(huge.Copy(new byte[10]), out segment);
        Assert.Equal(ValueSlabs.MaxSizedSlab, segment.Array!.Length);
    }

    [Fact]
    public void Slabs_grow_from_the_first_size_to_the_largest()
    {
        var slabs = new ValueSlabs();
        var arrays = new List<byte[]>();
        for (int i = 0; i < 20_000; i++)
        {
            ReadOnlyMemory<byte> copy = slabs.Copy(new byte[200]);
            System.Runtime.InteropServices.MemoryMarshal.TryGetArray(copy, out ArraySegment<byte> segment);
            if (arrays.Count == 0 || !ReferenceEquals(arrays[^1], segment.Array))
            {
                arrays.Add(segment.Array!);
            }
        }

        Assert.Equal(ValueSlabs.FirstSlabSize, arrays[0].Length);
        Assert.Equal(ValueSlabs.FirstSlabSize * 2, arrays[1].Length);
        Assert.Equal(ValueSlabs.MaxSlabSize, arrays[^1].Length);
        Assert.True(arrays.TrueForAll(a => a.Length <= ValueSlabs.MaxSlabSize));
    }
}
