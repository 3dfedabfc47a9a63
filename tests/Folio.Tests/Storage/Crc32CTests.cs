using System.Text;
using Folio.Storage;

namespace Folio.Tests.Storage;

/// <summary>
/// The checksum against a bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78) for every length around the
/// interleaved paths' block boundaries, at unaligned starts, and in running pieces.
/// </summary>
public sealed class Crc32CTests
{
    [Fact]
    public void The_standard_check_value_of_123456789_is_E3069283()
    {
        Assert.Equal(0xE3069283u, Crc32C.Compute("123456789"u8));
    }

    [Fact]
    public void Every_length_and_alignment_matches_the_bitwise_definition()
    {
        var random = new Random(18);
        byte[] buffer = new byte[(3 * 4096 * 2) + 3000];
        random.NextBytes(buffer);
        int[] lengths =
        [
            .. Enumerable.Range(0, 80), 767, 768, 769, 775, 776, 1535, 1536, 1537, 2303, 2304, 12_287, 12_288,
            12_289, 12_295, 12_288 + 768, 12_288 + 767, 16_384, 16_383, 16_391, 24_576, 24_576 + 800, 27_000,
        ];
        foreach (int length in lengths)
        {
            for (int offset = 0; offset < 9; offset++)
            {
                ReadOnlySpan<byte> data = buffer.AsSpan(offset, length);
                Assert.True(Bitwise(data) == Crc32C.Compute(data), $"length {length}, offset {offset}");
            }
        }
    }

    [Fact]
    public void A_checksum_appended_in_pieces_equals_the_checksum_of_the_whole()
    {
        var random = new Random(7);
        byte[] buffer = new byte[40_000];
        random.NextBytes(buffer);
        for (int round = 0; round < 200; round++)
        {
            int length = random.Next(buffer.Length);
            uint crc = Crc32C.Seed;
            int at = 0;
            while (at < length)
            {
                int piece = Math.Min(length - at, random.Next(1, 14_000));
                crc = Crc32C.Append(crc, buffer.AsSpan(at, piece));
                at += piece;
            }

            Assert.Equal(Bitwise(buffer.AsSpan(0, length)), Crc32C.Finish(crc));
        }

        Assert.Equal(Crc32C.Compute(Encoding.UTF8.GetBytes("a")), Bitwise("a"u8));
    }

    private static uint Bitwise(ReadOnlySpan<byte> data)
    {
        uint crc = 0xFFFF_FFFFu;
        foreach (byte b in data)
        {
            crc ^= b;
            for (int bit = 0; bit < 8; bit++)
            {
                crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78u : crc >> 1;
            }
        }

        return ~crc;
    }
}
