using System.Globalization;

namespace Folio.Benchmarks.Report;

/// <summary>The chunk size <c>CheckpointBenchmarks</c> appends to checkpoint-stats.csv (<c>time,chunk bytes</c>):
/// the last line.</summary>
internal static class CheckpointStats
{
    public static long? Load(string path)
    {
        long? bytes = null;
        if (!File.Exists(path))
        {
            return bytes;
        }

        foreach (string line in File.ReadAllLines(path))
        {
            string[] fields = line.Split(',');
            if (fields.Length == 2
                && long.TryParse(fields[1], NumberStyles.Integer, CultureInfo.InvariantCulture, out long value))
            {
                bytes = value;
            }
        }

        return bytes;
    }
}
