using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;

namespace Folio.Diagnostics;

/// <summary>
/// Measurements on Folio's instruments. A measurement runs the listeners' callbacks on the recording thread (the
/// committer, a checkpoint, a reader's pin), and those callbacks are the application's code: one that throws loses
/// its measurement, and the store goes on. Every measurement is taken after the state it reports has changed, so
/// nothing of the store is left half done. An instrument nobody listens to costs its flag check.
/// </summary>
internal static class GuardedInstruments
{
    public static void Add(Counter<long> counter, long value)
    {
        if (counter.Enabled)
        {
            AddGuarded(counter, value);
        }
    }

    public static void Record<T>(Histogram<T> histogram, T value)
        where T : struct
    {
        if (histogram.Enabled)
        {
            RecordGuarded(histogram, value, default, tagged: false);
        }
    }

    public static void Record<T>(Histogram<T> histogram, T value, KeyValuePair<string, object?> tag)
        where T : struct
    {
        if (histogram.Enabled)
        {
            RecordGuarded(histogram, value, tag, tagged: true);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void AddGuarded(Counter<long> counter, long value)
    {
        try
        {
            counter.Add(value);
        }
#pragma warning disable CA1031 // a listener's failure is the listener's, not the store's
        catch (Exception)
#pragma warning restore CA1031
        {
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void RecordGuarded<T>(Histogram<T> histogram, T value, KeyValuePair<string, object?> tag,
        bool tagged)
        where T : struct
    {
        try
        {
            if (tagged)
            {
                histogram.Record(value, tag);
            }
            else
            {
                histogram.Record(value);
            }
        }
#pragma warning disable CA1031 // a listener's failure is the listener's, not the store's
        catch (Exception)
#pragma warning restore CA1031
        {
        }
    }
}
