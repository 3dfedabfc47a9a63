using System.Diagnostics.Metrics;

namespace Folio.Buffers;

/// <summary>How a <see cref="BufferPool"/> behaves beyond its size; the defaults are what a store uses.</summary>
internal sealed class BufferPoolOptions
{
    /// <summary>Pins of a page that already has readers take the lock-free fast path (default true); false takes the
    /// frame's lock for every pin and unpin (the baseline <c>PinBenchmarks</c> compares against).</summary>
    public bool FastPath { get; init; } = true;

    /// <summary>The two-queue CLOCK that keeps hot pages through long scans (default true); false is plain CLOCK
    /// (<see cref="FrameClock"/>).</summary>
    public bool ScanResistant { get; init; } = true;

    /// <summary>
    /// Fill a frame with <see cref="BufferPool.ScribbleByte"/> when its page leaves it, so a span used after its
    /// unpin reads garbage that fails loudly instead of a stale page (default: on in Debug builds, off in Release).
    /// </summary>
    public bool Scribble { get; init; }
#if DEBUG
        = true;
#endif

    /// <summary>Back the frames with transparent huge pages where the system allows it (default false; Linux, pools of
    /// at least 2 MiB): the memory is then taken from the system 2 MiB at a time as frames are first used. Off by
    /// default: random reads over a full pool measured no faster with them, and on a virtual machine whose host backs
    /// guest memory lazily the first touch of a fresh huge page costs several times that of 4 KiB pages, which made a
    /// store's first scan after an open twice as slow (docs/measurements.md, 2026-11-29).</summary>
    public bool HugePages { get; init; }

    /// <summary>Evict (and scribble) a page as soon as its last pin goes, instead of keeping it cached (default
    /// false; tests that hunt uses after unpin turn it on).</summary>
    public bool EvictOnLastUnpin { get; init; }

    /// <summary>How long a pin waits for a frame to free up when every frame is pinned before it throws (default
    /// 10 seconds).</summary>
    public TimeSpan ExhaustedWait { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>Where the pool's instruments go (<c>Meter("Folio")</c>); null: a private meter.</summary>
    public IMeterFactory? MeterFactory { get; init; }
}
