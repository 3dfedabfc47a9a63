using System.Globalization;

namespace Folio.Tests.Infrastructure;

/// <summary>How long a timed stress test runs: a few seconds in CI, or <c>FOLIO_STRESS_SECONDS</c> for long runs
/// (README).</summary>
internal static class StressDuration
{
    /// <summary>The seconds to run: <c>FOLIO_STRESS_SECONDS</c> when set, else the default.</summary>
    public static double Seconds(double defaultSeconds) =>
        double.TryParse(Environment.GetEnvironmentVariable("FOLIO_STRESS_SECONDS"), NumberStyles.Float,
            CultureInfo.InvariantCulture, out double seconds) ? seconds : defaultSeconds;
}
