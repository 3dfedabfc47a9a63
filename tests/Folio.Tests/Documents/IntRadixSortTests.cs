using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;

namespace Folio.Tests.Documents;

/// <summary>The radix sort a checkpoint uses must order ints as the comparison sort does: negative and positive
/// values, duplicates, values that share their high or low bits, lengths around the threshold below which it defers to
/// the comparison sort.</summary>
public sealed class IntRadixSortTests
{
    [Property(MaxTest = 300, Arbitrary = [typeof(IntRadixSortTests)])]
    public void Ints_come_out_in_the_order_of_the_comparison_sort(int seed)
    {
        var random = new Random(seed);
        int length = random.Next(4) switch
        {
            0 => random.Next(0, 300),
            1 => random.Next(250, 260),
            _ => random.Next(300, 50_000),
        };
        int[] values = new int[length];
        int shape = random.Next(4);
        for (int i = 0; i < length; i++)
        {
            values[i] = shape switch
            {
                0 => random.Next(int.MinValue, int.MaxValue), // hashes: any int
                1 => random.Next(1, 1 << 22), // head references: the high digit alike
                2 => random.Next(-8, 8) << random.Next(0, 29), // few distinct digits, duplicates
                _ => random.Next(2) == 0 ? int.MinValue + random.Next(3) : int.MaxValue - random.Next(3),
            };
        }

        int[] expected = [.. values];
        Array.Sort(expected);
        IntRadixSort.Sort(values);
        Assert.Equal(expected, values);
    }

    [Fact]
    public void A_slice_is_sorted_in_place_and_the_rest_of_its_array_is_left_alone()
    {
        int[] values = [.. Enumerable.Range(0, 10_000).Select(i => (i * 7_919) % 10_000)];
        IntRadixSort.Sort(values.AsSpan(1_000, 5_000));
        int[] expected = [.. values.AsSpan(1_000, 5_000).ToArray().Order()];
        Assert.Equal(expected, values.AsSpan(1_000, 5_000).ToArray());
        int[] untouched = [.. Enumerable.Range(0, 1_000).Select(i => (i * 7_919) % 10_000)];
        Assert.Equal(untouched, values.AsSpan(0, 1_000).ToArray());
    }

    public static Arbitrary<int> Seeds() => Gen.Choose(0, int.MaxValue).ToArbitrary();
}
