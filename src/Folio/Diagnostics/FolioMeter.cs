using System.Diagnostics.Metrics;

namespace Folio.Diagnostics;

/// <summary>
/// The <c>Meter("Folio")</c> one set of instruments records on: created through <see cref="IMeterFactory"/> when the
/// host gives one (so DI-scoped collectors see it; the factory owns and disposes it), else a private meter of the
/// same name that this owner disposes.
/// </summary>
internal sealed class FolioMeter : IDisposable
{
    private readonly bool _owned;

    public FolioMeter(IMeterFactory? meterFactory)
    {
        _owned = meterFactory is null;
        Meter = meterFactory?.Create(FolioMetrics.MeterName) ?? new Meter(FolioMetrics.MeterName);
    }

    public Meter Meter { get; }

    public void Dispose()
    {
        if (_owned)
        {
            Meter.Dispose();
        }
    }
}
