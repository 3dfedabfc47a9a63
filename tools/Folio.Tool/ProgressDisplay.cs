using System.Diagnostics;
using System.Globalization;

namespace Folio.Tool;

/// <summary>
/// Progress of a long command on standard error: on a terminal, one bar redrawn in place with the rate and the time
/// left; when standard error is redirected, a plain line every two seconds. Reports may come from any thread; each is
/// drawn under a lock. It counts bytes, or items of a named unit ("documents").
/// </summary>
internal sealed class ProgressDisplay : IProgress<long>
{
    private readonly string _label;
    private long _total;
    private readonly string? _unit;
    private readonly bool _terminal = !Console.IsErrorRedirected;
    private readonly Stopwatch _elapsed = Stopwatch.StartNew();
    private readonly Lock _lock = new();
    private long _lastDrawn = long.MinValue / 2;
    private long _done;

    /// <summary>A display of <paramref name="total"/> bytes, or of <paramref name="total"/> items named
    /// <paramref name="unit"/>.</summary>
    public ProgressDisplay(string label, long total, string? unit = null)
    {
        _label = label;
        _total = Math.Max(total, 0);
        _unit = unit;
    }

    public void Report(long value)
    {
        lock (_lock)
        {
            _done = value;
            long now = _elapsed.ElapsedMilliseconds;
            if (now - _lastDrawn >= (_terminal ? 100 : 2000))
            {
                _lastDrawn = now;
                Draw(final: false);
            }
        }
    }

    /// <summary>Draws the final state (at <paramref name="value"/> when given) and ends the line.</summary>
    public void Complete(long? value = null)
    {
        lock (_lock)
        {
            // The total given at the start was an estimate (a backup's is the files' size, preallocated journal
            // included); once the work is done, what was done is the whole of it.
            _done = value ?? _done;
            _total = _done;
            Draw(final: true);
        }
    }

    private static string Remaining(TimeSpan left) => left.ToString(left >= TimeSpan.FromHours(1) ? @"h\:mm\:ss"
        : @"m\:ss", CultureInfo.InvariantCulture);

    private void Draw(bool final)
    {
        double fraction = final || _total == 0 ? 1 : Math.Clamp((double)_done / _total, 0, 1); // nothing: all done
        double seconds = Math.Max(_elapsed.Elapsed.TotalSeconds, 0.001);
        double rate = _done / seconds;
        // A rate from the first bytes (a header) predicts nothing: no estimate before a second or 1% of the work.
        string left = final ? "0:00"
            : rate <= 0 || (seconds < 1 && fraction < 0.01) ? "-:--"
            : Remaining(TimeSpan.FromSeconds(Math.Min((_total - _done) / rate, TimeSpan.MaxValue.TotalSeconds / 2)));
        string figures = _unit is null
            ? string.Create(CultureInfo.InvariantCulture,
                $"{fraction,4:P0} {_done / 1048576.0:F1} of {_total / 1048576.0:F1} MiB, {rate / 1048576.0:F1} MiB/s")
            : string.Create(CultureInfo.InvariantCulture,
                $"{fraction,4:P0} {_done:N0} of {_total:N0} {_unit}, {rate:N0}/s");
        if (_terminal)
        {
            const int Width = 30;
            int filled = (int)(fraction * Width);
            string bar = new string('#', filled) + new string('-', Width - filled);
            Console.Error.Write($"\r{_label} [{bar}] {figures}, {left} left ");
            if (final)
            {
                Console.Error.WriteLine();
            }
        }
        else
        {
            Console.Error.WriteLine(final ? $"{_label}: done, {figures}" : $"{_label}: {figures}, {left} left");
        }
    }
}
