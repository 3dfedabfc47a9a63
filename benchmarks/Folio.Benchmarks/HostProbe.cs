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

    /// <summary>
    /// Microseconds per random 16 KiB read of <paramref name="path"/> (uncached: the file is dropped from the page
    /// cache first), one after another, and with all of them advised at once (<c>POSIX_FADV_WILLNEED</c>) before they
    /// are read: how much parallel reads gain on this disk now, which bounds what read-ahead can gain (Linux only;
    /// zeros elsewhere).
    /// </summary>
    public static (double Sequential, double Advised) RandomReadMicroseconds(string path, int reads = 64)
    {
        if (!OperatingSystem.IsLinux())
        {
            return (0, 0);
        }

        using var stream = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete);
        long blocks = stream.Length / 16384;
        var random = new Random(3);
        byte[] buffer = new byte[16384];
        double Measure(bool advise)
        {
            OsPageCache.Drop(stream.SafeFileHandle);
            long[] offsets = new long[reads];
            for (int i = 0; i < reads; i++)
            {
                offsets[i] = random.NextInt64(blocks) * 16384;
            }

            long start = Stopwatch.GetTimestamp();
            if (advise)
            {
                foreach (long offset in offsets)
                {
                    OsPageCache.WillNeed(stream.SafeFileHandle, offset, 16384);
                }
            }

            foreach (long offset in offsets)
            {
                RandomAccess.Read(stream.SafeFileHandle, buffer, offset);
            }

            return Stopwatch.GetElapsedTime(start).TotalMicroseconds / reads;
        }

        return (Measure(advise: false), Measure(advise: true));
    }

    /// <summary>
    /// Microseconds per random read of <paramref name="size"/> bytes (a multiple of 4 KiB) from a 4 KiB boundary of
    /// <paramref name="path"/> around the page cache (<c>O_DIRECT</c>), one after another: what one read of that size
    /// costs on this disk now, the floor of a lookup that misses every cache. Null where uncached reads are not
    /// available (not Linux, or a file system that refuses them).
    /// </summary>
    public static unsafe double? UncachedReadMicroseconds(string path, int size, int reads = 256)
    {
        using Microsoft.Win32.SafeHandles.SafeFileHandle? handle = Storage.NativeMethods.OpenForUncachedReads(path);
        if (handle is null)
        {
            return null;
        }

        long blocks = (RandomAccess.GetLength(handle) - size) / 4096;
        if (blocks <= 0)
        {
            return null;
        }

        byte* buffer = (byte*)NativeMemory.AlignedAlloc((nuint)size, 4096);
        try
        {
            var span = new Span<byte>(buffer, size);
            var random = new Random(5);
            long start = Stopwatch.GetTimestamp();
            for (int i = 0; i < reads; i++)
            {
                RandomAccess.Read(handle, span, random.NextInt64(blocks) * 4096);
            }

            return Stopwatch.GetElapsedTime(start).TotalMicroseconds / reads;
        }
        catch (IOException)
        {
            return null;
        }
        finally
        {
            NativeMemory.AlignedFree(buffer);
        }
    }

    /// <summary>The bytes this process has had its storage devices read for it (<c>read_bytes</c> of
    /// <c>/proc/self/io</c>; 0 where there is no such file).</summary>
    public static long StorageBytesRead()
    {
        if (!File.Exists("/proc/self/io"))
        {
            return 0;
        }

        foreach (string line in File.ReadLines("/proc/self/io"))
        {
            if (line.StartsWith("read_bytes:", StringComparison.Ordinal))
            {
                return long.Parse(line.AsSpan("read_bytes:".Length), System.Globalization.CultureInfo.InvariantCulture);
            }
        }

        return 0;
    }

    /// <summary>A line for the benchmark log from <see cref="RandomReadMicroseconds"/>.</summary>
    public static string DescribeReads((double Sequential, double Advised) reads)
        => $"// host: a random 16 KiB read costs {reads.Sequential:F0} µs one after another, {reads.Advised:F0} µs " +
            "each with 64 advised at once";
}
