using System.Globalization;

namespace Folio.Benchmarks.Report;

/// <summary>
/// The recovery benchmark's own figures, from the CSV its setup appends to (one row per benchmark process):
/// <c>time,journal entry bytes,fresh page µs,live value bytes</c>. The sizes are the same in every row; the fresh-page
/// cost is the median over the rows (the host's state while the class ran).
/// </summary>
internal sealed record RecoveryStats(long JournalBytes, double FreshPageUs, long LiveValueBytes)
{
    /// <summary>What faulting in pages for the live documents' bytes alone costs at <see cref="FreshPageUs"/>, in
    /// milliseconds.</summary>
    public double LiveValuePageFaultMs => Math.Ceiling(LiveValueBytes / 4096.0) * FreshPageUs / 1000;

    public static RecoveryStats? Load(string file)
    {
        if (!File.Exists(file))
        {
            return null;
        }

        long bytes = 0;
        long values = 0;
        var pages = new List<double>();
        foreach (string line in File.ReadLines(file))
        {
            string[] f = line.Split(',');
            if (f.Length == 4
                && long.TryParse(f[1], CultureInfo.InvariantCulture, out long b)
                && double.TryParse(f[2], NumberStyles.Float, CultureInfo.InvariantCulture, out double us)
                && long.TryParse(f[3], CultureInfo.InvariantCulture, out long v))
            {
                bytes = b;
                values = v;
                pages.Add(us);
            }
        }

        if (pages.Count == 0)
        {
            return null;
        }

        return new RecoveryStats(bytes, GroupCommitStats.Median(pages), values);
    }
}
