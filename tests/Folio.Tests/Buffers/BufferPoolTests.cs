using System.Buffers.Binary;
using Folio.Buffers;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Buffers;

/// <summary>
/// The buffer pool's pins, loads and evictions, and the three DuckDB buffer-manager bugs its protocol is built against:
/// a frame evicted between the check and the pin (#15893), eviction and loading deadlocking (#12391), and a page used
/// after its unpin (#5263).
/// </summary>
public sealed class BufferPoolTests
{
    private const int FrameSize = 4096;

    /// <summary>Fills a frame with page <paramref name="page"/>'s pattern: every 8 bytes hold the page number mixed
    /// with their offset.</summary>
    internal static void Fill(long page, Span<byte> frame)
    {
        for (int offset = 0; offset < frame.Length; offset += 8)
        {
            BinaryPrimitives.WriteInt64LittleEndian(frame[offset..], Expected(page, offset));
        }
    }

    /// <summary>The offset at which <paramref name="frame"/> differs from page <paramref name="page"/>'s pattern, or
    /// -1.</summary>
    internal static int Mismatch(long page, ReadOnlySpan<byte> frame)
    {
        for (int offset = 0; offset < frame.Length; offset += 8)
        {
            if (BinaryPrimitives.ReadInt64LittleEndian(frame[offset..]) != Expected(page, offset))
            {
                return offset;
            }
        }

        return -1;
    }

    [Fact]
    public void Pins_of_a_cached_page_share_its_frame_and_only_the_first_loads_it()
    {
        using var pool = new BufferPool(4, FrameSize);
        int loads = 0;
        PageLoader loader = (page, frame) =>
        {
            loads++;
            Fill(page, frame);
        };

        PageHandle first = pool.Pin(7, loader);
        PageHandle second = pool.Pin(7, loader);
        Assert.Equal(first.Frame, second.Frame);
        Assert.Equal(-1, Mismatch(7, first.Bytes));
        Assert.Equal(1, loads);
        Assert.Equal(1, pool.PinnedFrames);
        first.Dispose();
        Assert.Equal(1, pool.PinnedFrames);
        second.Dispose();
        Assert.Equal(0, pool.PinnedFrames);

        using (PageHandle again = pool.Pin(7, loader))
        {
            Assert.Equal(-1, Mismatch(7, again.Bytes)); // still cached: no load
        }

        Assert.Equal(1, loads);
        Assert.Equal(1, pool.Misses);
    }

    [Fact]
    public void A_failed_load_leaves_the_page_uncached_and_the_next_pin_loads_it_again()
    {
        using var pool = new BufferPool(2, FrameSize);
        Assert.Throws<IOException>(() => pool.Pin(3, (_, _) => throw new IOException("bad sector")));
        Assert.False(pool.IsCached(3));
        Assert.Equal(0, pool.PinnedFrames);
        using PageHandle handle = pool.Pin(3, Fill);
        Assert.Equal(-1, Mismatch(3, handle.Bytes));
    }

    [Fact]
    public async Task Pins_wait_for_a_frame_while_every_frame_is_pinned_and_fail_when_none_frees_up()
    {
        using var pool = new BufferPool(2, FrameSize,
            new BufferPoolOptions { ExhaustedWait = TimeSpan.FromSeconds(5) });
        PageHandle a = pool.Pin(1, Fill);
        PageHandle b = pool.Pin(2, Fill);
        Task<int> waiting = Task.Run(() =>
        {
            using PageHandle c = pool.Pin(3, Fill);
            return Mismatch(3, c.Bytes);
        });
        await Task.Delay(100);
        Assert.False(waiting.IsCompleted);
        a.Dispose(); // frees a frame: the waiting pin takes it
        Assert.Equal(-1, await waiting.WaitAsync(TimeSpan.FromSeconds(10)));
        b.Dispose();

        using var small = new BufferPool(1, FrameSize,
            new BufferPoolOptions { ExhaustedWait = TimeSpan.FromMilliseconds(50) });
        using PageHandle held = small.Pin(1, Fill);
        var error = Assert.Throws<InvalidOperationException>(() => small.Pin(2, Fill));
        Assert.Contains("stayed pinned", error.Message, StringComparison.Ordinal);
        using PageHandle same = small.Pin(1, Fill); // a cached page needs no frame
    }

    [Fact]
    public void A_pin_at_a_remembered_frame_pins_the_page_only_while_that_frame_holds_it()
    {
        using var pool = new BufferPool(2, FrameSize);
        int frame;
        using (PageHandle first = pool.Pin(1, Fill))
        {
            frame = first.Frame;
        }

        // Still cached there (from zero readers, and beside another reader): pinned in place, counted as a hit.
        Assert.True(pool.TryPinAt(frame, 1, out PageHandle again));
        Assert.True(pool.TryPinAt(frame, 1, out PageHandle shared));
        Assert.Equal(frame, again.Frame);
        Assert.Equal(-1, Mismatch(1, again.Bytes));
        Assert.Equal(1, pool.PinnedFrames);
        shared.Dispose();
        again.Dispose();
        Assert.Equal(0, pool.PinnedFrames);

        // Another page's frame, a frame out of range, and a page no frame holds: no pin.
        using (PageHandle two = pool.Pin(2, Fill))
        {
            Assert.NotEqual(frame, two.Frame);
            Assert.False(pool.TryPinAt(two.Frame, 1, out _));
        }

        Assert.False(pool.TryPinAt(-1, 1, out _));
        Assert.False(pool.TryPinAt(2, 1, out _));
        Assert.False(pool.TryPinAt(frame, 9, out _));

        // Page 1 evicted and its frame reused for page 3: the remembered frame no longer pins page 1.
        using (PageHandle two = pool.Pin(2, Fill))
        using (PageHandle three = pool.Pin(3, Fill))
        {
            Assert.Equal(frame, three.Frame);
            Assert.False(pool.TryPinAt(frame, 1, out _));
        }

        Assert.Equal(0, pool.PinnedFrames);
        Assert.Equal(3, pool.Misses);
    }

    [Fact]
    public void A_frame_evicted_and_reloaded_between_the_check_and_the_pin_is_not_pinned_as_the_old_page()
    {
        // DuckDB #15893. A reader checks that page 1's frame is loaded with readers, then, before its swap, the other
        // reader unpins, and page 2 evicts page 1 from the only frame. The swap must fail and the pin load page 1
        // again, not pin the frame that now holds page 2.
        using var pool = new BufferPool(1, FrameSize,
            new BufferPoolOptions { ExhaustedWait = TimeSpan.FromSeconds(10) });
        PageHandle other = pool.Pin(1, Fill);
        bool raced = false;
        pool.BeforeFastPathSwap = frame =>
        {
            if (raced)
            {
                return;
            }

            raced = true;
            Task.Run(() =>
            {
                other.Dispose();
                using PageHandle page2 = pool.Pin(2, Fill);
            }).Wait();
        };

        using PageHandle pinned = pool.Pin(1, Fill);
        Assert.True(raced);
        Assert.Equal(-1, Mismatch(1, pinned.Bytes));
        Assert.Equal(3, pool.Misses); // page 1, page 2, page 1 again
    }

    [Fact]
    public async Task A_slow_load_holds_up_neither_evictions_nor_pins_of_other_pages()
    {
        // DuckDB #12391: loading and evicting must not wait for each other.
        using var pool = new BufferPool(3, FrameSize);
        using var loading = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        Task<int> slow = Task.Run(() =>
        {
            using PageHandle handle = pool.Pin(100, (page, frame) =>
            {
                loading.Set();
                release.Wait();
                Fill(page, frame);
            });
            return Mismatch(100, handle.Bytes);
        });
        Assert.True(loading.Wait(TimeSpan.FromSeconds(10)));

        Task others = Task.Run(() =>
        {
            for (int i = 0; i < 200; i++) // two frames for 20 pages: evictions all along
            {
                using PageHandle handle = pool.Pin(i % 20, Fill);
                Assert.Equal(-1, Mismatch(i % 20, handle.Bytes));
            }
        });
        await others.WaitAsync(TimeSpan.FromSeconds(10)); // times out if pins of other pages wait for a slow load
        Assert.False(slow.IsCompleted);

        Task<int> sameAgain = Task.Run(() =>
        {
            using PageHandle handle = pool.Pin(100, Fill); // waits for the load in flight, loads nothing itself
            return Mismatch(100, handle.Bytes);
        });
        await Task.Delay(50);
        Assert.False(sameAgain.IsCompleted);
        release.Set();
        Assert.Equal(-1, await slow);
        Assert.Equal(-1, await sameAgain);
        Assert.True(pool.Evictions > 0);
    }

    [Fact]
    public void A_span_used_after_its_last_unpin_reads_scribble_not_a_stale_page()
    {
        // DuckDB #5263: with scribbling, a use after unpin fails loudly.
        using var pool = new BufferPool(2, FrameSize,
            new BufferPoolOptions { Scribble = true, EvictOnLastUnpin = true });
        PageHandle handle = pool.Pin(5, Fill);
        Span<byte> kept = handle.Bytes;
        Assert.Equal(-1, Mismatch(5, kept));
        handle.Dispose();
        Assert.False(pool.IsCached(5));
        Assert.Equal(BufferPool.ScribbleByte, kept[0]);
        Assert.Equal(BufferPool.ScribbleByte, kept[^1]);
    }

    [Fact]
    public void Unpinning_more_often_than_pinning_throws_and_leaves_the_count_intact()
    {
        using var pool = new BufferPool(2, FrameSize);
        PageHandle handle = pool.Pin(1, Fill);
        handle.Dispose();
        Assert.Throws<InvalidOperationException>(handle.Dispose);
        using PageHandle again = pool.Pin(1, Fill);
        Assert.Equal(1, pool.PinnedFrames);
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void A_long_scan_leaves_the_pages_point_reads_keep_hot_in_the_cache(bool scanResistant)
    {
        using var pool = new BufferPool(64, FrameSize, new BufferPoolOptions { ScanResistant = scanResistant });
        for (int round = 0; round < 3; round++)
        {
            for (long page = 0; page < 32; page++)
            {
                pool.Pin(page, Fill).Dispose();
            }
        }

        for (long page = 1_000; page < 3_000; page++)
        {
            pool.Pin(page, Fill).Dispose(); // each scanned page once
        }

        int hot = 0;
        for (long page = 0; page < 32; page++)
        {
            hot += pool.IsCached(page) ? 1 : 0;
        }

        if (scanResistant)
        {
            Assert.Equal(32, hot);
        }
        else
        {
            Assert.Equal(0, hot); // plain CLOCK: the scan flushed them (the baseline the policy is chosen against)
        }
    }

    [Fact]
    public void Hits_misses_evictions_pinned_frames_and_cached_bytes_are_published_on_the_folio_meter()
    {
        using var meters = new TestMeterFactory();
        using System.Diagnostics.Metrics.MeterListener listener = meters.Listen();
        var recorded = new System.Collections.Concurrent.ConcurrentDictionary<string, long>();
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) =>
            recorded.AddOrUpdate(instrument.Name, value, (_, total) => total + value));
        listener.SetMeasurementEventCallback<int>((instrument, value, _, _) => recorded[instrument.Name] = value);
        listener.Start();
        using var pool = new BufferPool(2, FrameSize, new BufferPoolOptions { MeterFactory = meters });
        using PageHandle held = pool.Pin(1, Fill); // miss
        pool.Pin(1, Fill).Dispose(); // hit
        pool.Pin(2, Fill).Dispose(); // miss
        pool.Pin(3, Fill).Dispose(); // miss, evicts 2
        listener.RecordObservableInstruments();

        Assert.Equal(1, recorded.GetValueOrDefault("folio.cache.hits"));
        Assert.Equal(3, recorded.GetValueOrDefault("folio.cache.misses"));
        Assert.Equal(1, recorded.GetValueOrDefault("folio.cache.evictions"));
        Assert.Equal(1, recorded.GetValueOrDefault("folio.cache.pinned_frames"));
        Assert.Equal(2 * FrameSize, recorded.GetValueOrDefault("folio.cache.bytes"));
    }

    [Fact]
    public void A_prefetched_page_is_cached_unpinned_and_its_first_pin_is_a_hit_counted_as_used_once()
    {
        using var pool = new BufferPool(4, FrameSize);
        int loads = 0;
        PageLoader loader = (page, frame) =>
        {
            loads++;
            Fill(page, frame);
        };

        Assert.Equal(PrefetchOutcome.Loaded, pool.Prefetch(5, loader));
        Assert.True(pool.IsCached(5));
        Assert.Equal(0, pool.PinnedFrames);
        Assert.Equal(PrefetchOutcome.Cached, pool.Prefetch(5, loader));
        using (PageHandle handle = pool.Pin(5, loader))
        {
            Assert.Equal(-1, Mismatch(5, handle.Bytes));
        }

        pool.Pin(5, loader).Dispose();
        Assert.Equal(1, loads);
        Assert.Equal(0, pool.Misses); // the prefetch read it, not a pin
        Assert.Equal(1, pool.Prefetched);
        Assert.Equal(1, pool.PrefetchUsed);
    }

    [Fact]
    public void A_prefetch_never_waits_for_a_frame_and_never_takes_a_pinned_one()
    {
        using var pool = new BufferPool(2, FrameSize,
            new BufferPoolOptions { ExhaustedWait = TimeSpan.FromSeconds(30) });
        using PageHandle first = pool.Pin(1, Fill);
        using PageHandle second = pool.Pin(2, Fill);
        var started = System.Diagnostics.Stopwatch.StartNew();
        Assert.Equal(PrefetchOutcome.NoFrame, pool.Prefetch(3, Fill));
        Assert.True(started.Elapsed < TimeSpan.FromSeconds(5), "the prefetch waited for a frame");
        Assert.False(pool.IsCached(3));
        Assert.Equal(-1, Mismatch(1, first.Bytes));
        Assert.Equal(-1, Mismatch(2, second.Bytes));
    }

    [Fact]
    public void A_failed_prefetch_leaves_no_page_and_the_pin_that_needs_it_reports_the_failure()
    {
        using var pool = new BufferPool(2, FrameSize);
        Assert.Equal(PrefetchOutcome.Failed, pool.Prefetch(4, (_, _) => throw new IOException("bad sector")));
        Assert.False(pool.IsCached(4));
        Assert.Throws<IOException>(() => pool.Pin(4, (_, _) => throw new IOException("bad sector")));
        using PageHandle handle = pool.Pin(4, Fill);
        Assert.Equal(-1, Mismatch(4, handle.Bytes));
    }

    [Fact]
    public void Prefetched_pages_a_scan_reads_once_stay_on_probation_and_do_not_push_out_hot_pages()
    {
        using var pool = new BufferPool(64, FrameSize);
        for (int round = 0; round < 3; round++)
        {
            for (long page = 0; page < 32; page++)
            {
                pool.Pin(page, Fill).Dispose();
            }
        }

        for (long page = 1_000; page < 3_000; page += 4)
        {
            for (long ahead = page; ahead < page + 4; ahead++)
            {
                pool.Prefetch(ahead, Fill);
            }

            for (long read = page; read < page + 4; read++)
            {
                pool.Pin(read, Fill).Dispose(); // the scan reads each prefetched page once
            }
        }

        for (long page = 0; page < 32; page++)
        {
            Assert.True(pool.IsCached(page), $"hot page {page} was evicted by the prefetching scan");
        }

        Assert.True(pool.PrefetchUsed > 1_500, $"{pool.PrefetchUsed} of {pool.Prefetched} prefetched pages used");
    }

    [Fact]
    public void A_prefetched_page_evicted_before_any_pin_counts_as_unused()
    {
        using var pool = new BufferPool(2, FrameSize);
        Assert.Equal(PrefetchOutcome.Loaded, pool.Prefetch(1, Fill));
        pool.Pin(2, Fill).Dispose();
        pool.Pin(3, Fill).Dispose();
        pool.Pin(4, Fill).Dispose();
        Assert.False(pool.IsCached(1));
        Assert.Equal(1, pool.PrefetchUnused);
        Assert.Equal(0, pool.PrefetchUsed);
    }

    [Fact]
    public async Task A_pin_of_a_page_being_prefetched_waits_for_that_load_instead_of_reading_it_again()
    {
        using var pool = new BufferPool(4, FrameSize);
        using var loading = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        int loads = 0;
        Task<PrefetchOutcome> prefetch = Task.Run(() => pool.Prefetch(9, (page, frame) =>
        {
            Interlocked.Increment(ref loads);
            loading.Set();
            release.Wait();
            Fill(page, frame);
        }));
        loading.Wait();
        Task<bool> pin = Task.Run(() =>
        {
            using PageHandle handle = pool.Pin(9, (page, frame) =>
            {
                Interlocked.Increment(ref loads);
                Fill(page, frame);
            });
            return Mismatch(9, handle.Bytes) == -1;
        });
        await Task.Delay(100);
        Assert.False(pin.IsCompleted, "the pin did not wait for the prefetch's load");
        release.Set();
        Assert.Equal(PrefetchOutcome.Loaded, await prefetch);
        Assert.True(await pin);
        Assert.Equal(1, loads);
        Assert.Equal(1, pool.PrefetchUsed);
    }

    [Fact]
    public async Task A_load_in_progress_when_the_pool_is_disposed_keeps_the_frames_until_its_pin_is_released()
    {
        // A store's disposal races its readers: a load that had claimed a frame must not write into freed memory.
        var pool = new BufferPool(2, FrameSize);
        using var loading = new ManualResetEventSlim();
        using var release = new ManualResetEventSlim();
        bool releasedDuringLoad = true;
        Task<int> slow = Task.Run(() =>
        {
            using PageHandle handle = pool.Pin(5, (page, frame) =>
            {
                loading.Set();
                release.Wait();
                releasedDuringLoad = pool.IsMemoryReleased;
                Fill(page, frame);
            });
            Assert.False(pool.IsMemoryReleased, "the memory was freed under a pin");
            return Mismatch(5, handle.Bytes);
        });
        Assert.True(loading.Wait(TestDeadline.Hang));

        pool.Dispose();
        Assert.False(pool.IsMemoryReleased, "the disposal freed the frame a load was writing");
        Assert.Throws<ObjectDisposedException>(() => pool.Pin(6, Fill));
        release.Set();
        Assert.Equal(-1, await slow.WaitAsync(TestDeadline.Hang));
        Assert.False(releasedDuringLoad, "the memory was freed while the load wrote it");
        Assert.True(pool.IsMemoryReleased, "the last unpin after the disposal frees the memory");
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public void Pins_made_after_the_disposal_fail_even_on_a_page_pinned_before_it_and_the_last_unpin_frees(
        bool fastPath)
    {
        var pool = new BufferPool(2, FrameSize, new BufferPoolOptions { FastPath = fastPath });
        PageHandle held = pool.Pin(3, Fill);
        PageHandle unpinned = pool.Pin(4, Fill);
        unpinned.Dispose();

        pool.Dispose();
        Assert.False(pool.IsMemoryReleased, "the disposal freed a pinned frame");
        Assert.Equal(-1, Mismatch(3, held.Bytes)); // a pin held across the disposal still reads its page
        Assert.Throws<ObjectDisposedException>(() => pool.Pin(3, Fill)); // the fast path's frame has readers
        Assert.Throws<ObjectDisposedException>(() => pool.TryPin(4, out _));
        Assert.False(pool.TryPinAt(held.Frame, 3, out _));
        Assert.False(pool.TryPinAt(unpinned.Frame, 4, out _));
        Assert.Equal(PrefetchOutcome.NoFrame, pool.Prefetch(9, Fill));
        Assert.Equal(1, pool.PinnedFrames);
        Assert.False(pool.IsMemoryReleased);

        held.Dispose();
        Assert.True(pool.IsMemoryReleased);
        Assert.Equal(0, pool.PinnedFrames);
        pool.Dispose(); // idempotent: frees nothing twice
    }

    [Fact]
    public async Task Pins_racing_the_disposal_either_read_their_page_or_fail_disposed_and_the_memory_is_freed_once()
    {
        for (int round = 0; round < 100; round++)
        {
            var pool = new BufferPool(4, FrameSize, new BufferPoolOptions { Scribble = true });
            using var start = new Barrier(5);
            int wrongBytes = 0;
            var pinners = new Task[4];
            for (int t = 0; t < pinners.Length; t++)
            {
                int seed = (round * 8) + t;
                pinners[t] = Task.Factory.StartNew(() => // own threads: the barrier blocks them
                {
                    var random = new Random(seed);
                    start.SignalAndWait();
                    for (int i = 0; i < 1_000; i++)
                    {
                        long page = random.Next(12);
                        try
                        {
                            using PageHandle handle = pool.Pin(page, Fill);
                            if (pool.IsMemoryReleased || Mismatch(page, handle.Bytes) >= 0)
                            {
                                Interlocked.Increment(ref wrongBytes);
                            }
                        }
                        catch (ObjectDisposedException)
                        {
                            return;
                        }
                    }
                }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default);
            }

            start.SignalAndWait();
            Thread.SpinWait(Random.Shared.Next(20_000));
            pool.Dispose();
            await Task.WhenAll(pinners).WaitAsync(TestDeadline.Hang);
            Assert.Equal(0, wrongBytes);
            Assert.True(pool.IsMemoryReleased, $"round {round}: no pin is left, yet the memory was kept");
        }
    }

    private static long Expected(long page, int offset) => (page * 1_000_003) ^ offset;
}
