using System.Buffers;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Folio.Documents;

/// <summary>
/// Sorts ints in ascending order by their bits, eleven at a time from the least significant (an LSD radix sort: three
/// counting passes at most, each reading the values twice and writing them once, in place of the comparison sort's
/// n log n steps). A checkpoint sorts hundreds of thousands of ints twice (the heads it takes, into commit order, and
/// the hashes of the ids it changed), a cost its thread pays while commits wait for CPU (docs/measurements.md,
/// "Checkpoints that encode their leaves as they finish them"). A pass whose eleven bits are the same in every value
/// is skipped: head references below 2^22 take two passes.
/// </summary>
internal static class IntRadixSort
{
    private const int DigitBits = 11;
    private const int Buckets = 1 << DigitBits;

    /// <summary>Below this many values the comparison sort is as fast: it is used instead.</summary>
    private const int MinLength = 256;

    /// <summary>Sorts <paramref name="values"/> in ascending (signed) order.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // a few calls per checkpoint, each over many values
    public static void Sort(Span<int> values)
    {
        if (values.Length < MinLength)
        {
            values.Sort();
            return;
        }

        int[] scratch = ArrayPool<int>.Shared.Rent(values.Length);
        try
        {
            Span<int> source = values;
            Span<int> target = scratch.AsSpan(0, values.Length);
            Span<int> counts = stackalloc int[Buckets];
            for (int shift = 0; shift < 32; shift += DigitBits)
            {
                counts.Clear();
                foreach (int value in source)
                {
                    counts[Digit(value, shift)]++;
                }

                if (counts[Digit(source[0], shift)] == source.Length)
                {
                    continue; // every value has this digit: the order stands
                }

                int start = 0;
                for (int i = 0; i < Buckets; i++)
                {
                    int count = counts[i];
                    counts[i] = start;
                    start += count;
                }

                foreach (int value in source)
                {
                    target[counts[Digit(value, shift)]++] = value;
                }

                Span<int> sorted = target;
                target = source;
                source = sorted;
            }

            if (!Unsafe.AreSame(ref MemoryMarshal.GetReference(source), ref MemoryMarshal.GetReference(values)))
            {
                source.CopyTo(values);
            }
        }
        finally
        {
            ArrayPool<int>.Shared.Return(scratch);
        }
    }

    /// <summary>The digit of <paramref name="value"/> at <paramref name="shift"/>, its sign bit flipped so negative
    /// values sort first.</summary>
    private static int Digit(int value, int shift) => (int)((((uint)value ^ 0x8000_0000u) >> shift) & (Buckets - 1));
}
