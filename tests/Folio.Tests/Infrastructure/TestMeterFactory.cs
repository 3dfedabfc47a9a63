using System.Collections.Concurrent;
using System.Diagnostics.Metrics;

namespace Folio.Tests.Infrastructure;

/// <summary>An <see cref="IMeterFactory"/> whose meters only this test listens to (other tests' stores, running in
/// parallel, publish on meters of their own).</summary>
internal sealed class TestMeterFactory : IMeterFactory
{
    public ConcurrentBag<Meter> Meters { get; } = [];

    /// <summary>A listener (not started yet) for the instruments of this factory's meters that
    /// <paramref name="include"/> selects (all by default).</summary>
    public MeterListener Listen(Func<Instrument, bool>? include = null) => new()
    {
        InstrumentPublished = (instrument, listener) =>
        {
            if (Meters.Contains(instrument.Meter) && (include is null || include(instrument)))
            {
                listener.EnableMeasurementEvents(instrument);
            }
        },
    };

    /// <summary>A started listener that sums every <see cref="long"/> measurement of this factory's instruments into
    /// <paramref name="totals"/>, by instrument name.</summary>
    public MeterListener ListenToTotals(out ConcurrentDictionary<string, long> totals)
    {
        var sums = new ConcurrentDictionary<string, long>();
        MeterListener listener = Listen();
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) =>
            sums.AddOrUpdate(instrument.Name, value, (_, total) => total + value));
        listener.Start();
        totals = sums;
        return listener;
    }

    public Meter Create(MeterOptions options)
    {
        var meter = new Meter(options);
        Meters.Add(meter);
        return meter;
    }

    public void Dispose()
    {
        foreach (Meter meter in Meters)
        {
            meter.Dispose();
        }
    }
}
