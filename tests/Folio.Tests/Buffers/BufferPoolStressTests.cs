using Folio.Buffers;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Buffers;

/// <summary>
/// Pins, unpins and evictions racing on a pool of 8 frames: 64 threads pin pages of a set three times larger than the
/// pool, so most pins evict, and check every byte of every page they pin, before and after yielding while they hold
/// it (a frame handed to another page while pinned, or a pin of a stale generation, shows up as another page's
/// bytes). Four of the threads prefetch random pages meanwhile.
/// </summary>
public sealed class BufferPoolStressTests
{
    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void Sixty_four_threads_on_eight_frames_always_read_the_page_they_pinned(bool fastPath)
    {
        using var pool = new BufferPool(8, 4096, new BufferPoolOptions
        {
            FastPath = fastPath,
            ExhaustedWait = TimeSpan.FromSeconds(30),
        });
        long[] loads = new long[24];
        PageLoader loader = (page, frame) =>
        {
            Interlocked.Increment(ref loads[page]);
            BufferPoolTests.Fill(page, frame);
        };

        // Threads, not pool tasks: a pin that waits for a frame blocks its thread, and holders parked on a starved
        // thread pool would never unpin.
        double seconds = StressDuration.Seconds(3);
        using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(seconds));
        long pins = 0;
        var failures = new System.Collections.Concurrent.ConcurrentQueue<Exception>();
        Thread[] threads = Enumerable.Range(0, 64).Select(t => new Thread(() =>
        {
            try
            {
                var random = new Random(t);
                while (!stop.IsCancellationRequested)
                {
                    // Mostly a hot page pinned by many threads at once (the fast path), else any page (evictions).
                    long page = random.Next(4) == 0 ? random.Next(24) : random.Next(3);
                    if (t % 16 == 0)
                    {
                        // Four threads prefetch instead: loads into unpinned frames racing the pins and the clock.
                        pool.Prefetch(random.Next(24), loader);
                        continue;
                    }

                    using (PageHandle handle = pool.Pin(page, loader))
                    {
                        Assert.Equal(-1, BufferPoolTests.Mismatch(page, handle.Bytes));
                        if (random.Next(8) == 0)
                        {
                            Thread.Yield();
                        }

                        Assert.Equal(-1, BufferPoolTests.Mismatch(page, handle.Bytes));
                    }

                    Interlocked.Increment(ref pins);
                }
            }
            catch (Exception e)
            {
                failures.Enqueue(e);
            }
        }) { IsBackground = true }).ToArray();
        foreach (Thread thread in threads)
        {
            thread.Start();
        }

        foreach (Thread thread in threads)
        {
            Assert.True(thread.Join(TimeSpan.FromSeconds(seconds + 60)), "a thread never finished");
        }

        Assert.Empty(failures);
        Assert.Equal(0, pool.PinnedFrames);
        Assert.True(pool.Evictions > 100, $"{pool.Evictions} evictions in {pins} pins");
        Assert.Equal(loads.Sum(), pool.Misses + pool.Prefetched);
        Assert.True(pool.Prefetched > 0, "no prefetch loaded a page");
    }
}
