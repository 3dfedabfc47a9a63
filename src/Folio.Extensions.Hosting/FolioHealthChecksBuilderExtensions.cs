using Folio.Extensions.Hosting;
using Microsoft.Extensions.Diagnostics.HealthChecks;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>Adds Folio's health check.</summary>
public static class FolioHealthChecksBuilderExtensions
{
    /// <summary>
    /// Adds a check that reports <c>Unhealthy</c> (or <paramref name="failureStatus"/>) when the store is faulted or
    /// its disk is full, and <c>Degraded</c> when its last checkpoint attempt failed or its average fsync duration
    /// exceeds <see cref="FolioOptions.DegradedSyncLatency"/>.
    /// Requires <c>AddFolio</c>.
    /// </summary>
    /// <param name="builder">The health checks builder.</param>
    /// <param name="name">The check's name. Default <c>folio</c>.</param>
    /// <param name="failureStatus">Status reported for a faulted store. Default
    /// <see cref="HealthStatus.Unhealthy"/>.</param>
    /// <param name="tags">Tags for filtering checks; none by default.</param>
    /// <returns><paramref name="builder"/>.</returns>
    public static IHealthChecksBuilder AddFolioHealthCheck(this IHealthChecksBuilder builder, string name = "folio",
        HealthStatus? failureStatus = null, IEnumerable<string>? tags = null)
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrEmpty(name);
        return builder.AddCheck<FolioHealthCheck>(name, failureStatus ?? HealthStatus.Unhealthy, tags ?? []);
    }
}
