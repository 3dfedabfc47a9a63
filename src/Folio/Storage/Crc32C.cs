using System.Buffers.Binary;
using System.Numerics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Folio.Storage;

/// <summary>
/// CRC-32C (Castagnoli), the checksum of journal records and data-file pages, computed with the processor's CRC32
/// instruction through <see cref="BitOperations.Crc32C(uint, ulong)"/> (SSE4.2 on x64, CRC on Arm64; a table fallback
/// elsewhere).
/// <para>
/// One CRC32 instruction takes three cycles to give its result and the next one needs it, so one running checksum
/// uses a third of what the unit can do. Long inputs therefore run three checksums at once, over three consecutive
/// blocks (<see cref="LongBlock"/> bytes, then <see cref="ShortBlock"/>), the second and third starting from zero,
/// and join them (Mark Adler's crc32c.c): the CRC register is linear, so the register after block A then B is the
/// register after A moved past |B| zero bytes, XOR the register after B alone. Moving a register past a fixed number
/// of zero bytes is itself linear in its four bytes, so it is four lookups in tables built once at startup.
/// </para>
/// </summary>
internal static class Crc32C
{
    /// <summary>Starts a checksum.</summary>
    public const uint Seed = 0xFFFF_FFFFu;

    private const int LongBlock = 4096;
    private const int ShortBlock = 256;

    // Per block length: four tables of 256 entries, the register after 'length' zero bytes from byte b at byte k.
    private static readonly uint[] s_long = ZeroTables(LongBlock);
    private static readonly uint[] s_short = ZeroTables(ShortBlock);

    /// <summary>Adds <paramref name="data"/> to a running checksum.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static uint Append(uint crc, ReadOnlySpan<byte> data)
    {
        if (data.Length >= 3 * ShortBlock)
        {
            return AppendLong(crc, data);
        }

        return AppendSerial(crc, data);
    }

    /// <summary>Ends a running checksum.</summary>
    public static uint Finish(uint crc) => ~crc;

    /// <summary>The checksum of one span.</summary>
    public static uint Compute(ReadOnlySpan<byte> data) => Finish(Append(Seed, data));

    /// <summary>One running checksum, eight bytes an instruction (short inputs, and what the blocks leave).</summary>
    /// <remarks>Fully optimized from its first call, as are the block loops: a scrub, a restore or a tool run checks
    /// a gigabyte once per process, most of it before tiered compilation would have replaced the first code.</remarks>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    internal static uint AppendSerial(uint crc, ReadOnlySpan<byte> data)
    {
        ref byte start = ref MemoryMarshal.GetReference(data);
        int length = data.Length;
        int i = 0;
        for (; i + 8 <= length; i += 8)
        {
            crc = BitOperations.Crc32C(crc, Word(ref Unsafe.Add(ref start, i)));
        }

        if (i + 4 <= length)
        {
            uint word = Unsafe.ReadUnaligned<uint>(ref Unsafe.Add(ref start, i));
            crc = BitOperations.Crc32C(crc,
                BitConverter.IsLittleEndian ? word : BinaryPrimitives.ReverseEndianness(word));
            i += 4;
        }

        for (; i < length; i++)
        {
            crc = BitOperations.Crc32C(crc, Unsafe.Add(ref start, i));
        }

        return crc;
    }

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    private static uint AppendLong(uint crc, ReadOnlySpan<byte> data)
    {
        crc = Interleaved(crc, ref data, LongBlock, s_long);
        crc = Interleaved(crc, ref data, ShortBlock, s_short);
        return AppendSerial(crc, data);
    }

    /// <summary>Consumes whole groups of three blocks of <paramref name="block"/> bytes from
    /// <paramref name="data"/>, three checksums at once.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)]
    private static uint Interleaved(uint crc, ref ReadOnlySpan<byte> data, int block, uint[] zeros)
    {
        ref byte start = ref MemoryMarshal.GetReference(data);
        int done = 0;
        while (data.Length - done >= 3 * block)
        {
            uint crc1 = 0;
            uint crc2 = 0;
            ref byte first = ref Unsafe.Add(ref start, done);
            for (int i = 0; i < block; i += 8)
            {
                crc = BitOperations.Crc32C(crc, Word(ref Unsafe.Add(ref first, i)));
                crc1 = BitOperations.Crc32C(crc1, Word(ref Unsafe.Add(ref first, i + block)));
                crc2 = BitOperations.Crc32C(crc2, Word(ref Unsafe.Add(ref first, i + (2 * block))));
            }

            crc = Shift(zeros, crc) ^ crc1;
            crc = Shift(zeros, crc) ^ crc2;
            done += 3 * block;
        }

        data = data[done..];
        return crc;
    }

    /// <summary>The eight bytes at <paramref name="source"/> as a little-endian word (the CRC consumes bytes in
    /// order, lowest first).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static ulong Word(ref byte source)
    {
        ulong word = Unsafe.ReadUnaligned<ulong>(ref source);
        return BitConverter.IsLittleEndian ? word : BinaryPrimitives.ReverseEndianness(word);
    }

    /// <summary>The register <paramref name="crc"/> moved past the tables' number of zero bytes.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static uint Shift(uint[] zeros, uint crc) =>
        zeros[(int)(crc & 0xFF)] ^ zeros[256 + (int)((crc >> 8) & 0xFF)]
        ^ zeros[512 + (int)((crc >> 16) & 0xFF)] ^ zeros[768 + (int)(crc >> 24)];

    /// <summary>Entry 256 k + b: the register after <paramref name="length"/> zero bytes from the register holding
    /// byte b at byte k (and zeros elsewhere).</summary>
    private static uint[] ZeroTables(int length)
    {
        var tables = new uint[4 * 256];
        for (int k = 0; k < 4; k++)
        {
            for (int b = 0; b < 256; b++)
            {
                uint register = (uint)b << (8 * k);
                for (int i = 0; i < length; i += 8)
                {
                    register = BitOperations.Crc32C(register, 0UL);
                }

                tables[(256 * k) + b] = register;
            }
        }

        return tables;
    }
}
