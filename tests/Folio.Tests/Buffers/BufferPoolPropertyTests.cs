using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Buffers;

namespace Folio.Tests.Buffers;

/// <summary>
/// Random programs of pins and unpins on a pool of 4 frames and 10 pages against a model that only knows which pins
/// are held: every held pin reads its page's bytes; pins of one page share a frame, pins of different pages never do;
/// the pinned-frame count is the number of distinct pages held; a pin of a new page fails exactly when every frame is
/// pinned; a page loads again only after it was evicted; a prefetch loads only a page not cached, never while every
/// frame is pinned, and never disturbs a held pin.
/// </summary>
public sealed class BufferPoolPropertyTests
{
    private const int Frames = 4;

    [Property(MaxTest = 200, Arbitrary = [typeof(BufferPoolPropertyTests)])]
    public void The_pool_agrees_with_a_model_of_the_pins_held(int[] program, bool scanResistant)
    {
        using var pool = new BufferPool(Frames, 4096, new BufferPoolOptions
        {
            ScanResistant = scanResistant,
            ExhaustedWait = TimeSpan.Zero,
        });
        var held = new List<(long Page, PageHandle Handle)>();
        var loads = new Dictionary<long, int>();
        int prefetched = 0;
        PageLoader loader = (page, frame) =>
        {
            loads[page] = loads.GetValueOrDefault(page) + 1;
            BufferPoolTests.Fill(page, frame);
        };

        try
        {
            foreach (int op in program)
            {
                if (op % 7 == 6)
                {
                    // A prefetch: never touches a held pin, loads only an uncached page, never when every frame is
                    // pinned.
                    long page = (op / 7) % 10;
                    bool cached = pool.IsCached(page);
                    int loadsBefore = loads.GetValueOrDefault(page);
                    PrefetchOutcome outcome = pool.Prefetch(page, loader);
                    int distinct = held.Select(h => h.Page).Distinct().Count();
                    Assert.Equal(cached, outcome == PrefetchOutcome.Cached);
                    Assert.True(!(distinct == Frames && !cached) || outcome == PrefetchOutcome.NoFrame);
                    Assert.Equal(outcome == PrefetchOutcome.Loaded ? loadsBefore + 1 : loadsBefore,
                        loads.GetValueOrDefault(page));
                    Assert.Equal(outcome is PrefetchOutcome.Loaded or PrefetchOutcome.Cached, pool.IsCached(page));
                    prefetched += outcome == PrefetchOutcome.Loaded ? 1 : 0;
                }
                else if (op % 3 == 0 && held.Count > 0)
                {
                    int index = (op / 3) % held.Count;
                    held[index].Handle.Dispose();
                    held.RemoveAt(index);
                }
                else
                {
                    long page = (op / 3) % 10;
                    bool pinnedAlready = held.Exists(h => h.Page == page);
                    int distinct = held.Select(h => h.Page).Distinct().Count();
                    if (!pinnedAlready && distinct == Frames)
                    {
                        Assert.Throws<InvalidOperationException>(() => pool.Pin(page, loader));
                        continue;
                    }

                    bool cached = pool.IsCached(page);
                    int loadsBefore = loads.GetValueOrDefault(page);
                    held.Add((page, pool.Pin(page, loader)));
                    Assert.Equal(cached ? loadsBefore : loadsBefore + 1, loads.GetValueOrDefault(page));
                    Assert.True(!pinnedAlready || cached, "a pinned page was not cached");
                }

                foreach ((long page, PageHandle handle) in held)
                {
                    Assert.Equal(-1, BufferPoolTests.Mismatch(page, handle.Bytes));
                    foreach ((long other, PageHandle otherHandle) in held)
                    {
                        Assert.Equal(page == other, handle.Frame == otherHandle.Frame);
                    }
                }

                Assert.Equal(held.Select(h => h.Page).Distinct().Count(), pool.PinnedFrames);
            }
        }
        finally
        {
            foreach ((_, PageHandle handle) in held)
            {
                handle.Dispose();
            }
        }

        Assert.Equal(0, pool.PinnedFrames);
        Assert.Equal(loads.Values.Sum(), pool.Misses + prefetched);
        Assert.Equal(prefetched, pool.Prefetched);
    }

    public static Arbitrary<int[]> Programs() =>
        Gen.ArrayOf(Gen.Choose(0, 1_000_000)).Select(ops => ops.Length > 200 ? ops[..200] : ops).ToArbitrary();
}
