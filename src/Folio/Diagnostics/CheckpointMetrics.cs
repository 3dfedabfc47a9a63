using System.Diagnostics.Metrics;
using Folio.Pages;

namespace Folio.Diagnostics;

/// <summary>
/// The checkpoint instruments on <c>Meter("Folio")</c> (created through <see cref="IMeterFactory"/> when the host
/// gives one, which hands back the meter the commit instruments use; else a private meter of the same name). The
/// observable gauges read the store when a collector asks; the recorders run on the checkpoint's thread.
/// </summary>
internal sealed class CheckpointMetrics : IDisposable
{
    private static readonly KeyValuePair<string, object?> s_apply = new("folio.phase", "apply");
    private static readonly KeyValuePair<string, object?> s_serialize = new("folio.phase", "serialize");
    private static readonly KeyValuePair<string, object?> s_write = new("folio.phase", "write");
    private static readonly KeyValuePair<string, object?> s_publish = new("folio.phase", "publish");

    private readonly FolioMeter _folioMeter;
    private readonly Histogram<double> _duration;
    private readonly Histogram<double> _phaseDuration;
    private readonly Counter<long> _bytes;
    private readonly Counter<long> _pages;
    private readonly Counter<long> _failures;
    private readonly Counter<long> _backpressure;

    public CheckpointMetrics(IMeterFactory? meterFactory, Func<long> journalBytesSinceCheckpoint,
        Func<int> chunks, Func<double> fillRate, Func<long> journalHeldBytes, Func<long> lapsedHolds)
    {
        _folioMeter = new FolioMeter(meterFactory);
        Meter meter = _folioMeter.Meter;
        _duration = meter.CreateHistogram<double>("folio.checkpoint.duration", "ms",
            "Duration of one checkpoint, from collecting its changes to its durable header.");
        _phaseDuration = meter.CreateHistogram<double>("folio.checkpoint.phase.duration", "ms",
            "Duration of one phase of a checkpoint, tagged folio.phase: apply (the changes to the trees), serialize "
            + "(the changed pages into chunks), write (the chunks and the header, with their fdatasyncs) or publish.");
        _bytes = meter.CreateCounter<long>("folio.checkpoint.bytes", "By",
            "Bytes written to the data file by checkpoints.");
        _pages = meter.CreateCounter<long>("folio.checkpoint.pages", "{page}", "Pages written by checkpoints.");
        _failures = meter.CreateCounter<long>("folio.checkpoint.failures", "{checkpoint}",
            "Checkpoints that failed (the journal keeps every commit; the next one retries).");
        _backpressure = meter.CreateCounter<long>("folio.checkpoint.backpressure", "{event}",
            "Times checkpoints fell behind the writers far enough that new commits waited for one.");
        meter.CreateObservableGauge("folio.journal.bytes_since_checkpoint", journalBytesSinceCheckpoint, "By",
            "Journal bytes in segments after the last checkpoint (what the next open replays, at most).");
        meter.CreateObservableGauge("folio.journal.held_bytes", journalHeldBytes, "By",
            "Journal bytes a checkpoint covered that the last purge kept for change-feed readers and backups still "
            + "reading them (bounded per reader by MaxChangeFeedLag).");
        meter.CreateObservableCounter("folio.changefeed.holds_lapsed", lapsedHolds, "{hold}",
            "Change-feed readers whose hold on the journal a purge gave up (too far behind, or the disk full).");
        meter.CreateObservableGauge("folio.datafile.chunks", chunks, "{chunk}", "Chunks in the data file.");
        meter.CreateObservableGauge("folio.datafile.fill_rate", fillRate, "1",
            "Live pages over all pages of the data file's live chunks, at the last checkpoint.");
    }

    public void Checkpointed(TimeSpan duration, CheckpointStatistics statistics)
    {
        GuardedInstruments.Record(_duration, duration.TotalMilliseconds);
        CheckpointPhases phases = statistics.Phases;
        GuardedInstruments.Record(_phaseDuration, phases.Apply.TotalMilliseconds, s_apply);
        GuardedInstruments.Record(_phaseDuration, phases.Serialize.TotalMilliseconds, s_serialize);
        GuardedInstruments.Record(_phaseDuration, phases.Write.TotalMilliseconds, s_write);
        GuardedInstruments.Record(_phaseDuration, phases.Publish.TotalMilliseconds, s_publish);
        GuardedInstruments.Add(_bytes, statistics.Bytes);
        GuardedInstruments.Add(_pages, statistics.Pages);
    }

    public void Failed() => GuardedInstruments.Add(_failures, 1);

    public void BackpressureStarted() => GuardedInstruments.Add(_backpressure, 1);

    public void Dispose() => _folioMeter.Dispose();
}
