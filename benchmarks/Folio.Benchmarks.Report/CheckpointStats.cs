using System.Globalization;

namespace Folio.Benchmarks.Report;

/// <summary>
/// What <c>CheckpointBenchmarks</c> appends to checkpoint-stats.csv: the chunk size (<c>time,chunk bytes</c>, the
/// last such line counts) and each iteration's phases (<c>time,phases,method,collections,apply ms,serialize ms,write
/// ms</c>; the last ten lines of a case are its measured iterations, the lines before them warm-ups).
/// </summary>
internal sealed class CheckpointStats
{
    private const int MeasuredIterations = 10;

    private readonly Dictionary<(string Method, string Collections), List<(double Apply, double Serialize,
        double Write)>> _phases = [];

    /// <summary>The bytes one checkpoint wrote, or null when the file had none.</summary>
    public long? ChunkBytes { get; private set; }

    public static CheckpointStats Load(string path)
    {
        var stats = new CheckpointStats();
        if (!File.Exists(path))
        {
            return stats;
        }

        foreach (string line in File.ReadAllLines(path))
        {
            string[] fields = line.Split(',');
            if (fields.Length == 2
                && long.TryParse(fields[1], NumberStyles.Integer, CultureInfo.InvariantCulture, out long value))
            {
                stats.ChunkBytes = value;
            }
            else if (fields.Length == 7 && fields[1] == "phases"
                && double.TryParse(fields[4], NumberStyles.Float, CultureInfo.InvariantCulture, out double apply)
                && double.TryParse(fields[5], NumberStyles.Float, CultureInfo.InvariantCulture, out double serialize)
                && double.TryParse(fields[6], NumberStyles.Float, CultureInfo.InvariantCulture, out double write))
            {
                (string, string) key = (fields[2], fields[3]);
                if (!stats._phases.TryGetValue(key, out var list))
                {
                    stats._phases[key] = list = [];
                }

                list.Add((apply, serialize, write));
            }
        }

        return stats;
    }

    /// <summary>The median over a case's measured iterations of the time before the write (applying the changes
    /// and serializing the pages) and of the write with its fdatasyncs, in ms; null when the file has none.</summary>
    public (double BeforeWrite, double Write)? Medians(string method, string collections)
    {
        if (!_phases.TryGetValue((method, collections), out var all) || all.Count == 0)
        {
            return null;
        }

        var measured = all.Skip(Math.Max(0, all.Count - MeasuredIterations)).ToList();
        return (GroupCommitStats.Median(measured.Select(p => p.Apply + p.Serialize)),
            GroupCommitStats.Median(measured.Select(p => p.Write)));
    }
}
