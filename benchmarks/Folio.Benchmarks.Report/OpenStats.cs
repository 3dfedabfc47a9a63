using System.Globalization;

namespace Folio.Benchmarks.Report;

/// <summary>The disk sizes <c>OpenBenchmarks</c> appends to open-stats.csv (<c>time,history,checkpointed bytes,
/// journal-only bytes</c>): the last line per history.</summary>
internal static class OpenStats
{
    public static IReadOnlyDictionary<string, (long Checkpointed, long Replay)> Load(string path)
    {
        var sizes = new Dictionary<string, (long, long)>(StringComparer.Ordinal);
        if (!File.Exists(path))
        {
            return sizes;
        }

        foreach (string line in File.ReadAllLines(path))
        {
            string[] fields = line.Split(',');
            if (fields.Length == 4
                && long.TryParse(fields[2], NumberStyles.Integer, CultureInfo.InvariantCulture, out long checkpointed)
                && long.TryParse(fields[3], NumberStyles.Integer, CultureInfo.InvariantCulture, out long replay))
            {
                sizes[fields[1]] = (checkpointed, replay);
            }
        }

        return sizes;
    }
}
