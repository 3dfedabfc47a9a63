using System.Diagnostics.Metrics;

namespace Folio.Diagnostics;

/// <summary>
/// The document cache's instruments on <c>Meter("Folio")</c> (through <see cref="IMeterFactory"/> when the host gives
/// one; else a private meter of the same name). Hits and misses are recorded by the reading thread (an instrument with
/// no listener costs one flag check); the gauges read the cache when a collector asks.
/// </summary>
internal sealed class DocumentCacheMetrics : IDisposable
{
    private readonly FolioMeter _folioMeter;
    private readonly Counter<long> _hits;
    private readonly Counter<long> _misses;

    public DocumentCacheMetrics(IMeterFactory? meterFactory, Func<long> entries, Func<long> bytes)
    {
        _folioMeter = new FolioMeter(meterFactory);
        Meter meter = _folioMeter.Meter;
        _hits = meter.CreateCounter<long>("folio.document_cache.hits", "{read}",
            "Point reads of a checkpointed document answered by the document cache.");
        _misses = meter.CreateCounter<long>("folio.document_cache.misses", "{read}",
            "Point reads that found a checkpointed document in its tree (and cached it).");
        meter.CreateObservableGauge("folio.document_cache.entries", entries, "{document}",
            "Documents held in the document cache.");
        meter.CreateObservableGauge("folio.document_cache.bytes", bytes, "By",
            "Bytes the document cache's entries take (an estimate).");
    }

    public void Hit() => GuardedInstruments.Add(_hits, 1);

    public void Miss() => GuardedInstruments.Add(_misses, 1);

    public void Dispose() => _folioMeter.Dispose();
}
