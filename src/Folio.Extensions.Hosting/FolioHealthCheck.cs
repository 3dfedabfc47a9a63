using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Options;

namespace Folio.Extensions.Hosting;

/// <summary>
/// Reports the store's health: <c>Unhealthy</c> when it is faulted (a journal write or fsync failed, or a group in the
/// journal could not be applied to the in-memory state: commits fail until it is reopened) or when the disk is full
/// (commits fail with <see cref="StoreFullException"/> until space is freed, then it is healthy again) or the journal
/// cannot create its next segment for another cause (<see cref="StoreDiagnostics.SegmentUnavailable"/>) or it refuses
/// writes because checkpoints fail on damage in its data file (<see cref="StoreDiagnostics.WritesRefused"/>),
/// <c>Degraded</c> when the last checkpoint attempt failed (<see cref="StoreDiagnostics.CheckpointFailure"/>) or the
/// average fsync duration exceeds <see cref="FolioOptions.DegradedSyncLatency"/>, else <c>Healthy</c>. The data
/// carries the last committed sequence and the fsync figures. Reading them is lock-free; the check never touches the
/// disk.
/// </summary>
internal sealed class FolioHealthCheck : IHealthCheck
{
    private readonly FolioStoreHost _host;
    private readonly IOptionsMonitor<FolioOptions> _options;

    public FolioHealthCheck(FolioStoreHost host, IOptionsMonitor<FolioOptions> options)
    {
        _host = host;
        _options = options;
    }

    public Task<HealthCheckResult> CheckHealthAsync(HealthCheckContext context,
        CancellationToken cancellationToken = default)
    {
        StoreDiagnostics diagnostics;
        try
        {
            diagnostics = _host.Store.GetDiagnostics();
        }
        catch (Exception e) when (
            e is FolioException or ObjectDisposedException or IOException or UnauthorizedAccessException)
        {
            return Task.FromResult(
                new HealthCheckResult(context.Registration.FailureStatus, "The Folio store is not open: " + e.Message,
                e));
        }

        return Task.FromResult(Evaluate(diagnostics, context.Registration.FailureStatus,
            _options.CurrentValue.DegradedSyncLatency));
    }

    /// <summary>The health <paramref name="diagnostics"/> describe (see the type's summary):
    /// <paramref name="failureStatus"/> for a store whose commits fail, degraded past
    /// <paramref name="degradedSyncLatency"/> of average fsync.</summary>
    internal static HealthCheckResult Evaluate(StoreDiagnostics diagnostics, HealthStatus failureStatus,
        TimeSpan degradedSyncLatency)
    {
        var data = new Dictionary<string, object>
        {
            ["lastCommittedSequence"] = diagnostics.LastCommittedSequence,
            ["syncCount"] = diagnostics.SyncCount,
            ["lastSyncMs"] = diagnostics.LastSyncDuration.TotalMilliseconds,
            ["averageSyncMs"] = diagnostics.AverageSyncDuration.TotalMilliseconds,
        };

        (string? failure, Exception? cause) = diagnostics switch
        {
            { IsFaulted: true } => ("The Folio store is faulted; commits fail until it is reopened: ",
                diagnostics.Fault),
            { IsDiskFull: true } => ("The disk is full: commits fail until space is freed: ", diagnostics.DiskFull),
            { SegmentUnavailable: { } unavailable } => (
                "The journal cannot create its next segment; commits fail until it can: ", unavailable),
            { WritesRefused: { } damage } => (
                "Checkpoints fail on damage in the data file; commits fail until the store is repaired: ", damage),
            _ => (null, null),
        };
        if (failure is not null)
        {
            return new HealthCheckResult(failureStatus, failure + cause?.Message, cause, data);
        }

        if (diagnostics.CheckpointFailure is { } checkpoint)
        {
            return HealthCheckResult.Degraded(
                "Checkpoints fail, so the journal is not purged until one succeeds: " + checkpoint.Message,
                checkpoint, data);
        }

        if (diagnostics.AverageSyncDuration > degradedSyncLatency)
        {
            return HealthCheckResult.Degraded(
                $"Journal fsyncs average {diagnostics.AverageSyncDuration.TotalMilliseconds:F1} ms, above " +
                    $"{degradedSyncLatency.TotalMilliseconds:F1} ms.",
                data: data);
        }

        return HealthCheckResult.Healthy("The Folio store is open and committing.", data);
    }
}
