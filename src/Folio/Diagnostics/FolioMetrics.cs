using System.Diagnostics.Metrics;

namespace Folio.Diagnostics;

/// <summary>
/// Folio's instruments, all on one <c>Meter("Folio")</c> created through <see cref="IMeterFactory"/> when the host
/// gives one (so DI-scoped collectors see it), else a private meter.
/// </summary>
internal sealed class FolioMetrics : IDisposable
{
    public const string MeterName = "Folio";

    private readonly FolioMeter _folioMeter;

    public FolioMetrics(IMeterFactory? meterFactory, Func<long> queueDepth)
    {
        _folioMeter = new FolioMeter(meterFactory);
        Meter meter = _folioMeter.Meter;
        Commits = meter.CreateCounter<long>("folio.commits", "{batch}", "Batches committed (acknowledged).");
        FailedCommits = meter.CreateCounter<long>("folio.commits.failed", "{batch}",
            "Batches that failed (conflict, validation, fault, cancellation).");
        Groups = meter.CreateCounter<long>("folio.commit.groups", "{group}",
            "Commit groups written: one journal record each.");
        BatchesPerGroup = meter.CreateHistogram<int>("folio.commit.group.batches", "{batch}",
            "Batches merged into one commit group.");
        CommandsPerGroup = meter.CreateHistogram<int>("folio.commit.group.commands", "{command}",
            "Commands merged into one commit group.");
        SyncDuration = meter.CreateHistogram<double>("folio.journal.fsync.duration", "ms",
            "Duration of one journal fdatasync.");
        meter.CreateObservableGauge("folio.commit.queue.depth", queueDepth, "{batch}",
            "Batches submitted and not yet taken into a group.");
    }

    public Counter<long> Commits { get; }

    public Counter<long> FailedCommits { get; }

    public Counter<long> Groups { get; }

    public Histogram<int> BatchesPerGroup { get; }

    public Histogram<int> CommandsPerGroup { get; }

    public Histogram<double> SyncDuration { get; }

    public void Dispose() => _folioMeter.Dispose();
}
