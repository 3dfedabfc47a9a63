using System.Diagnostics;
using System.Runtime.InteropServices;

namespace Folio.Benchmarks;

/// <summary>
/// Measures what this shared virtual machine charges for memory the process has not touched yet. Replaying a journal
/// builds its whole in-memory state in fresh pages (a 200,000-document replay faults in about 10,000 pages of heap, of
/// which the live values' slab is about 6,600), so the time an open takes moves with this figure: on 2026-11-23 it was
/// 11-14 µs per 4 KiB page in the evening (touching the same pages again: 0.06 µs each).
/// Benchmarks whose Mean depends on it print it from their setup, so each run records its host's state.
/// </summary>
internal static class HostProbe
{
    private const int ProbeBytes = 64 << 20;
    private const int PageSize = 4096;

    /// <summary>Microseconds to fault in one fresh 4 KiB page: 64 MiB of native memory (mapped by the C allocator on
    /// demand), one write per page.</summary>
    public static unsafe double FreshPageMicroseconds()
    {
        byte* memory = (byte*)NativeMemory.Alloc(ProbeBytes);
        try
        {
            long start = Stopwatch.GetTimestamp();
            for (int offset = 0; offset < ProbeBytes; offset += PageSize)
            {
                memory[offset] = 1;
            }

            return Stopwatch.GetElapsedTime(start).TotalMicroseconds / (ProbeBytes / PageSize);
        }
        finally
        {
            NativeMemory.Free(memory);
        }
    }

    /// <summary>A line for the benchmark log: the fresh-page cost <paramref name="freshPageUs"/> (from
    /// <see cref="FreshPageMicroseconds"/>).</summary>
    public static string Describe(double freshPageUs)
        => $"// host: a fresh 4 KiB page of memory costs {freshPageUs:F2} µs to fault in (64 MiB probe)";
}
