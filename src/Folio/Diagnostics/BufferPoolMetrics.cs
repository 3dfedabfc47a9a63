using System.Diagnostics.Metrics;

namespace Folio.Diagnostics;

/// <summary>
/// The buffer pool's instruments on <c>Meter("Folio")</c> (through <see cref="IMeterFactory"/> when the host gives
/// one; else a private meter of the same name). Hits are recorded on the pin fast path by any thread (an instrument
/// with no listener costs one flag check); misses and evictions on the slow path; the gauges read the pool when a
/// collector asks.
/// </summary>
internal sealed class BufferPoolMetrics : IDisposable
{
    private readonly FolioMeter _folioMeter;
    private readonly Counter<long> _hits;
    private readonly Counter<long> _misses;
    private readonly Counter<long> _evictions;
    private readonly Counter<long> _prefetchIssued;
    private readonly Counter<long> _prefetchUsed;
    private readonly Counter<long> _prefetchDropped;

    public BufferPoolMetrics(IMeterFactory? meterFactory, Func<int> pinnedFrames, Func<long> cachedBytes)
    {
        _folioMeter = new FolioMeter(meterFactory);
        Meter meter = _folioMeter.Meter;
        _hits = meter.CreateCounter<long>("folio.cache.hits", "{pin}", "Pins of a page already in the cache.");
        _misses = meter.CreateCounter<long>("folio.cache.misses", "{pin}",
            "Pins that read their page from the data file.");
        _evictions = meter.CreateCounter<long>("folio.cache.evictions", "{page}",
            "Pages that left the cache to make room for others.");
        _prefetchIssued = meter.CreateCounter<long>("folio.cache.prefetch.issued", "{page}",
            "Pages a range read's prefetch read into the cache ahead of the cursor, by the prefetch worker or with " +
            "the leaf the cursor needed (a run of neighbouring pages read together).");
        _prefetchUsed = meter.CreateCounter<long>("folio.cache.prefetch.used", "{page}",
            "Prefetched pages a reader pinned afterwards.");
        _prefetchDropped = meter.CreateCounter<long>("folio.cache.prefetch.dropped", "{page}",
            "Pages asked for by prefetch and not read: pushed out of the full queue, abandoned while a checkpoint " +
            "wrote, or left without a frame.");
        meter.CreateObservableGauge("folio.cache.pinned_frames", pinnedFrames, "{frame}",
            "Cache frames pinned by a reader now.");
        meter.CreateObservableGauge("folio.cache.bytes", cachedBytes, "By", "Bytes of pages held in the cache.");
    }

    public void Hit() => GuardedInstruments.Add(_hits, 1);

    public void Miss() => GuardedInstruments.Add(_misses, 1);

    public void Evicted() => GuardedInstruments.Add(_evictions, 1);

    public void PrefetchIssued() => GuardedInstruments.Add(_prefetchIssued, 1);

    public void PrefetchUsed() => GuardedInstruments.Add(_prefetchUsed, 1);

    public void PrefetchDropped(int pages) => GuardedInstruments.Add(_prefetchDropped, pages);

    public void Dispose() => _folioMeter.Dispose();
}
