using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Options;

namespace Folio.Extensions.Hosting;

/// <summary>
/// Reports the store's health: <c>Unhealthy</c> when it is faulted (a journal write or fsync failed, or a group in the
/// journal could not be applied to the in-memory state: commits fail until it is reopened) or when the disk is full
/// (commits fail with <see cref="StoreFullException"/> until space is freed, then it is healthy again) or the journal
/// cannot create its next segment for another cause (<see cref="StoreDiagnostics.SegmentUnavailable"/>),
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
            _ => (null, null),
        };
        if (failure is not null)
        {
            return Task.FromResult(new HealthCheckResult(context.Registration.FailureStatus, failure + cause?.Message,
                cause, data));
        }

        if (diagnostics.CheckpointFailure is { } checkpoint)
        {
            return Task.FromResult(HealthCheckResult.Degraded(
                "Checkpoints fail, so the journal is not purged until one succeeds: " + checkpoint.Message,
                checkpoint, data));
        }

        TimeSpan degraded = _options.CurrentValue.DegradedSyncLatency;
        if (diagnostics.AverageSyncDuration > degraded)
        {
            return Task.FromResult(HealthCheckResult.Degraded(
                $"Journal fsyncs average {diagnostics.AverageSyncDuration.TotalMilliseconds:F1} ms, above " +
                    $"{degraded.TotalMilliseconds:F1} ms.",
                data: data));
        }

        return Task.FromResult(HealthCheckResult.Healthy("The Folio store is open and committing.", data));
    }
}
