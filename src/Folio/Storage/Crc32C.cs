using System.Buffers.Binary;
using System.Numerics;
using System.Runtime.CompilerServices;

namespace Folio.Storage;

/// <summary>
/// CRC-32C (Castagnoli), the checksum of journal records and data-file pages, computed with the processor's CRC32
/// instruction through <see cref="BitOperations.Crc32C(uint, ulong)"/> (SSE4.2 on x64, CRC on Arm64; a table fallback
/// elsewhere).
/// </summary>
internal static class Crc32C
{
    /// <summary>Starts a checksum.</summary>
    public const uint Seed = 0xFFFF_FFFFu;

    /// <summary>Adds <paramref name="data"/> to a running checksum.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static uint Append(uint crc, ReadOnlySpan<byte> data)
    {
        while (data.Length >= 8)
        {
            crc = BitOperations.Crc32C(crc, BinaryPrimitives.ReadUInt64LittleEndian(data));
            data = data[8..];
        }

        if (data.Length >= 4)
        {
            crc = BitOperations.Crc32C(crc, BinaryPrimitives.ReadUInt32LittleEndian(data));
            data = data[4..];
        }

        foreach (byte b in data)
        {
            crc = BitOperations.Crc32C(crc, b);
        }

        return crc;
    }

    /// <summary>Ends a running checksum.</summary>
    public static uint Finish(uint crc) => ~crc;

    /// <summary>The checksum of one span.</summary>
    public static uint Compute(ReadOnlySpan<byte> data) => Finish(Append(Seed, data));
}
