using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;

namespace Folio.Tests.Documents;

public sealed class ValueSlabsTests
{
    /// <summary>
    /// Random values (empty, small, up to the slabbed maximum and larger), with and without a known total: every copy
    /// keeps its bytes, slabbed copies share slabs within the size bounds, and larger values get arrays of their own.
    /// </summary>
    [Property(MaxTest = 200)]
    public void Copies_keep_their_bytes_and_only_small_values_share_slabs(int[] lengths, bool knownTotal)
    {
        var random = new Random(lengths.Length);
        byte[][] values = lengths.Select(l => (l & 3) switch
        {
            0 => 0,
            1 => 1 + ((l >>> 2) % 300),
            2 => 1 + ((l >>> 2) % ValueSlabs.MaxSlabbedValue),
            _ => ValueSlabs.MaxSlabbedValue + 1 + ((l >>> 2) % 5000),
        }).Select(n =>
        {
            byte[] value = new byte[n];
            random.NextBytes(value);
            return value;
        }).ToArray();
        long slabbed = values.Where(v => v.Length <= ValueSlabs.MaxSlabbedValue).Sum(v => (long)v.Length);
        var slabs = new ValueSlabs(knownTotal ? slabbed : 0);
        var copies = values.Select(v => slabs.Copy(v)).ToList();
        var slabArrays = new HashSet<byte[]>(ReferenceEqualityComparer.Instance);
        for (int i = 0; i < values.Length; i++)
        {
            Assert.True(copies[i].Span.SequenceEqual(values[i]));
            if (values[i].Length == 0)
            {
                continue;
            }

            System.Runtime.InteropServices.MemoryMarshal.TryGetArray(copies[i], out ArraySegment<byte> segment);
            if (values[i].Length > ValueSlabs.MaxSlabbedValue)
            {
                Assert.Equal(values[i].Length, segment.Array!.Length); // its own array
                Assert.NotSame(values[i], segment.Array); // a copy
            }
            else
            {
                Assert.InRange(segment.Array!.Length, ValueSlabs.MinSlabSize, ValueSlabs.MaxSizedSlab);
                slabArrays.Add(segment.Array);
            }
        }

        if (knownTotal && slabbed > 0)
        {
            // Sized to the total: what was copied, plus at most a value's worth of slack per slab (a slab's tail).
            Assert.True(slabArrays.Sum(a => (long)a.Length) <= Math.Max(slabbed, ValueSlabs.MinSlabSize)
                + ((long)ValueSlabs.MaxSlabbedValue * slabArrays.Count));
        }
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
        Assert.Equal(ValueSlabs.MinSlabSize, segment.Array!.Length);

        var huge = new ValueSlabs(expectedBytes: 10L * ValueSlabs.MaxSizedSlab);
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray(huge.Copy(new byte[10]), out segment);
        Assert.Equal(ValueSlabs.MaxSizedSlab, segment.Array!.Length);
    }
}
