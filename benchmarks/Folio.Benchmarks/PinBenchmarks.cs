using BenchmarkDotNet.Attributes;
using Folio.Buffers;

namespace Folio.Benchmarks;

/// <summary>
/// Pinning one hot page of the buffer pool, <see cref="Threads"/> threads at once, each pinning and unpinning it
/// <see cref="PinsPerThread"/> times. A hot page (a tree's root, say) is one some reader always holds: the setup keeps
/// one long-lived pin on it. <c>Locked</c> takes the frame's lock for every pin and unpin (the baseline);
/// <c>FastPath</c> is the pool as a store uses it: a compare-and-swap on the frame's word, no lock. <c>FromZero</c> is
/// the fast-path pool without the long-lived pin, so every pin takes the page from no readers to one and every unpin
/// back (both the slow path). Mean is per pin and unpin, on each thread.
/// </summary>
public class PinBenchmarks
{
    private const int PinsPerThread = 1_000_000;
    private const long HotPage = 42;
    private BufferPool _locked = null!;
    private BufferPool _fast = null!;
    private BufferPool _fromZero = null!;
    private PageHandle _lockedHeld;
    private PageHandle _fastHeld;

    [Params(1, 2)]
    public int Threads { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        _locked = new BufferPool(16, 4096, new BufferPoolOptions { FastPath = false, Scribble = false });
        _fast = new BufferPool(16, 4096, new BufferPoolOptions { Scribble = false });
        _fromZero = new BufferPool(16, 4096, new BufferPoolOptions { Scribble = false });
        _lockedHeld = _locked.Pin(HotPage, Load);
        _fastHeld = _fast.Pin(HotPage, Load);
        _fromZero.Pin(HotPage, Load).Dispose();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _lockedHeld.Dispose();
        _fastHeld.Dispose();
        _locked.Dispose();
        _fast.Dispose();
        _fromZero.Dispose();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = PinsPerThread)]
    public long Locked() => Run(_locked);

    [Benchmark(OperationsPerInvoke = PinsPerThread)]
    public long FastPath() => Run(_fast);

    [Benchmark(OperationsPerInvoke = PinsPerThread)]
    public long FromZero() => Run(_fromZero);

    private static void Load(long page, Span<byte> frame) => frame.Fill((byte)page);

    private long Run(BufferPool pool)
    {
        if (Threads == 1)
        {
            return PinLoop(pool);
        }

        long total = 0;
        var threads = new Thread[Threads];
        for (int t = 0; t < threads.Length; t++)
        {
            threads[t] = new Thread(() => Interlocked.Add(ref total, PinLoop(pool)));
            threads[t].Start();
        }

        foreach (Thread thread in threads)
        {
            thread.Join();
        }

        return total;
    }

    private static long PinLoop(BufferPool pool)
    {
        long sum = 0;
        PageLoader loader = Load;
        for (int i = 0; i < PinsPerThread; i++)
        {
            using PageHandle handle = pool.Pin(HotPage, loader);
            sum += handle.Frame;
        }

        return sum;
    }
}
