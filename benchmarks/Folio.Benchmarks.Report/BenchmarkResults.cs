using System.Globalization;
using System.Text.Json;

namespace Folio.Benchmarks.Report;

/// <summary>One benchmark case from BenchmarkDotNet's JSON export: a method with its parameters and
/// statistics.</summary>
/// <param name="Type">The benchmark class (<c>GroupCommitBenchmarks</c>).</param>
/// <param name="Method">The method (<c>Folio</c>).</param>
/// <param name="Parameters">Parameter values by name (<c>Writers</c> = <c>64</c>).</param>
/// <param name="MeanNs">Mean per operation, nanoseconds.</param>
/// <param name="MedianNs">Median per operation, nanoseconds.</param>
/// <param name="StdDevNs">Standard deviation per operation, nanoseconds.</param>
/// <param name="AllocatedBytes">Managed bytes allocated per operation, when measured.</param>
/// <param name="Job">The job's id (<c>Folio</c>, the shared job, unless a class adds its own).</param>
internal sealed record BenchmarkResult(string Type, string Method, IReadOnlyDictionary<string, string> Parameters,
    double MeanNs, double MedianNs, double StdDevNs, long? AllocatedBytes, string Job)
{
    public string Parameter(string name) => Parameters.TryGetValue(name, out string? value) ? value : "";
}

/// <summary>The machine a run measured, from BenchmarkDotNet's host environment section.</summary>
internal sealed record MachineInfo(string Os, string Processor, int PhysicalCores, int LogicalCores, string Runtime,
    string BenchmarkDotNet);

/// <summary>Every result of the headline classes, loaded from a folder of <c>*-report-full-compressed.json</c>
/// files.</summary>
internal sealed class BenchmarkResults
{
    private readonly List<BenchmarkResult> _results = [];

    public MachineInfo? Machine { get; private set; }

    public DateTime? Measured { get; private set; }

    /// <summary>When each class's results were written (UTC), by class name.</summary>
    public Dictionary<string, DateTime> MeasuredByType { get; } = new(StringComparer.Ordinal);

    public IReadOnlyList<BenchmarkResult> All => _results;

    public static BenchmarkResults Load(string folder)
    {
        var results = new BenchmarkResults();
        IEnumerable<string> files =
            Directory.GetFiles(folder, "*-report-full-compressed.json").Order(StringComparer.Ordinal);
        foreach (string file in files)
        {
            using JsonDocument document = JsonDocument.Parse(File.ReadAllBytes(file));
            JsonElement root = document.RootElement;
            JsonElement host = root.GetProperty("HostEnvironmentInfo");
            results.Machine ??= new MachineInfo(
                host.GetProperty("OsVersion").GetString() ?? "?",
                host.GetProperty("ProcessorName").GetString() ?? "?",
                host.GetProperty("PhysicalCoreCount").GetInt32(),
                host.GetProperty("LogicalCoreCount").GetInt32(),
                host.GetProperty("RuntimeVersion").GetString() ?? "?",
                host.GetProperty("BenchmarkDotNetVersion").GetString() ?? "?");
            // BenchmarkDotNet titles a run "BenchmarkRun-joined-yyyy-MM-dd-HH-mm-ss" (local time of the run; UTC here);
            // fall back to the file's time when the title has another shape.
            string title = root.TryGetProperty("Title", out JsonElement t) ? t.GetString() ?? "" : "";
            DateTime written = title.Length >= 19
                && DateTime.TryParseExact(title[^19..], "yyyy-MM-dd-HH-mm-ss", CultureInfo.InvariantCulture,
                DateTimeStyles.None, out DateTime started)
                ? started
                : File.GetLastWriteTimeUtc(file);
            results.Measured = results.Measured is { } m && m > written ? m : written;
            string fileType = Path.GetFileName(file).Replace("Folio.Benchmarks.", "", StringComparison.Ordinal)
                .Replace("-report-full-compressed.json", "", StringComparison.Ordinal);
            results.MeasuredByType[fileType] = written;
            foreach (JsonElement benchmark in root.GetProperty("Benchmarks").EnumerateArray())
            {
                if (!benchmark.TryGetProperty("Statistics", out JsonElement statistics)
                    || statistics.ValueKind != JsonValueKind.Object)
                {
                    continue; // the case failed: no statistics
                }

                var parameters = new Dictionary<string, string>(StringComparer.Ordinal);
                string[] pairs = (benchmark.GetProperty("Parameters").GetString() ?? "")
                    .Split('&', StringSplitOptions.RemoveEmptyEntries);
                foreach (string pair in pairs)
                {
                    int eq = pair.IndexOf('=', StringComparison.Ordinal);
                    if (eq > 0)
                    {
                        parameters[pair[..eq]] = pair[(eq + 1)..];
                    }
                }

                long? allocated = benchmark.TryGetProperty("Memory", out JsonElement memory)
                    && memory.ValueKind == JsonValueKind.Object
                    ? memory.GetProperty("BytesAllocatedPerOperation").GetInt64()
                    : null;
                results._results.Add(new BenchmarkResult(
                    benchmark.GetProperty("Type").GetString()!,
                    benchmark.GetProperty("Method").GetString()!,
                    parameters,
                    statistics.GetProperty("Mean").GetDouble(),
                    statistics.GetProperty("Median").GetDouble(),
                    statistics.GetProperty("StandardDeviation").GetDouble(),
                    allocated,
                    JobOf(benchmark.GetProperty("DisplayInfo").GetString() ?? "")));
            }
        }

        results.PoolRounds();
        return results;
    }

    /// <summary>
    /// Replaces the cases of a class that ran in interleaved rounds (a <c>Round</c> parameter) by one case per method
    /// and other parameters, pooled over its rounds, and keeps each round's case for <see cref="Rounds"/>. Every round
    /// runs the same number of iterations of the same number of operations, so the pooled mean per operation is the
    /// mean of the rounds' means (total time over total operations), and the pooled standard deviation combines each
    /// round's spread with the spread of the rounds' means. The pooled median is the median of the rounds' medians
    /// (the iterations themselves are not in the export).
    /// </summary>
    private void PoolRounds()
    {
        var pooled = new Dictionary<string, List<BenchmarkResult>>(StringComparer.Ordinal);
        var order = new List<string>();
        for (int i = _results.Count - 1; i >= 0; i--)
        {
            BenchmarkResult result = _results[i];
            if (!result.Parameters.ContainsKey(BenchmarkConstants.RoundParameter))
            {
                continue;
            }

            string key = result.Type + "." + result.Method + ":" + result.Job + "?" + string.Join('&',
                result.Parameters.Where(p => p.Key != BenchmarkConstants.RoundParameter)
                    .OrderBy(p => p.Key, StringComparer.Ordinal).Select(p => p.Key + "=" + p.Value));
            if (!pooled.TryGetValue(key, out List<BenchmarkResult>? rounds))
            {
                pooled[key] = rounds = [];
                order.Add(key);
            }

            rounds.Add(result);
            _rounds.Add(result);
            _results.RemoveAt(i);
        }

        order.Reverse();
        foreach (string key in order)
        {
            List<BenchmarkResult> rounds = pooled[key];
            double mean = rounds.Average(r => r.MeanNs);
            double secondMoment = rounds.Average(r => (r.StdDevNs * r.StdDevNs) + (r.MeanNs * r.MeanNs));
            BenchmarkResult first = rounds[0];
            var parameters = first.Parameters.Where(p => p.Key != BenchmarkConstants.RoundParameter)
                .ToDictionary(p => p.Key, p => p.Value, StringComparer.Ordinal);
            long? allocated = rounds.All(r => r.AllocatedBytes is not null)
                ? (long)rounds.Average(r => r.AllocatedBytes!.Value) : null;
            _results.Add(new BenchmarkResult(first.Type, first.Method, parameters, mean,
                GroupCommitStats.Median(rounds.Select(r => r.MedianNs)),
                Math.Sqrt(Math.Max(0, secondMoment - (mean * mean))), allocated, first.Job));
        }
    }

    private readonly List<BenchmarkResult> _rounds = [];

    /// <summary>
    /// The per-round cases of <paramref name="type"/>.<paramref name="method"/> with one parameter value, in round
    /// order (empty when the class did not run in rounds).
    /// </summary>
    public IReadOnlyList<BenchmarkResult> Rounds(string type, string method, string parameter, string value) =>
        _rounds.Where(r => r.Type == type && r.Method == method && r.Parameter(parameter) == value)
            .OrderBy(r => int.Parse(r.Parameter(BenchmarkConstants.RoundParameter), CultureInfo.InvariantCulture))
            .ToList();

    /// <summary>The job id in a display string such as <c>RecoveryBenchmarks.OpenAndReplay: ServerGc(Server=True,
    /// ...)</c>.</summary>
    private static string JobOf(string displayInfo)
    {
        int colon = displayInfo.IndexOf(": ", StringComparison.Ordinal);
        string job = colon < 0 ? "" : displayInfo[(colon + 2)..];
        int paren = job.IndexOf('(', StringComparison.Ordinal);
        return paren < 0 ? job.Trim() : job[..paren].Trim();
    }

    /// <summary>The result of <paramref name="type"/>.<paramref name="method"/> in job <paramref name="job"/>, or
    /// null.</summary>
    public BenchmarkResult? FindInJob(string type, string method, string job) =>
        _results.Find(r => r.Type == type && r.Method == method && r.Job == job);

    /// <summary>The jobs class <paramref name="type"/> ran in, in the order first seen.</summary>
    public IReadOnlyList<string> Jobs(string type) => _results.Where(r => r.Type == type).Select(r => r.Job).Distinct()
        .ToList();

    /// <summary>Whether any result of class <paramref name="type"/> was loaded.</summary>
    public bool Has(string type) => _results.Exists(r => r.Type == type);

    /// <summary>The result of <paramref name="type"/>.<paramref name="method"/> with one parameter value, or
    /// null.</summary>
    public BenchmarkResult? Find(string type, string method, string? parameter = null, string? value = null)
    {
        foreach (BenchmarkResult result in _results)
        {
            if (result.Type == type && result.Method == method
                && (parameter is null || result.Parameter(parameter) == value))
            {
                return result;
            }
        }

        return null;
    }

    /// <summary>The distinct values of a parameter of a class, numerically sorted when they are numbers.</summary>
    public IReadOnlyList<string> Values(string type, string parameter)
    {
        var values = _results.Where(r => r.Type == type).Select(r => r.Parameter(parameter)).Distinct().ToList();
        return values.All(v => double.TryParse(v, NumberStyles.Float, CultureInfo.InvariantCulture, out _))
            ? values.OrderBy(v => double.Parse(v, CultureInfo.InvariantCulture)).ToList()
            : values.Order(StringComparer.Ordinal).ToList();
    }
}

/// <summary>
/// The group-commit benchmark's own statistics (p50/p99 commit latency and average group size per iteration), from the
/// CSV it appends to: <c>time,writers,method,p50 µs,p99 µs,average group[,average group fsync µs of the
/// iteration[,round]]</c> (the last two columns were added later; older rows read as NaN and round 1).
/// </summary>
internal sealed record GroupCommitStats(int Writers, string Method, double P50Us, double P99Us, double AverageGroup,
    double AverageSyncUs)
{
    /// <summary>Whether the row carries a group fsync duration (rows written before the column existed do
    /// not).</summary>
    public bool HasSync => AverageSyncUs > 0;

    /// <summary>The fsync-bound ceiling: each writer waits for its own commit, so W writers complete at most W commits
    /// per group fsync.</summary>
    public double CeilingPerSecond => Writers * 1e6 / AverageSyncUs;

    /// <summary>
    /// Per (writers, method), pooled over the rounds: the median of the measured iterations' percentiles and fsync
    /// averages, and the mean of the rounds' group sizes. A round's rows are its jitting, warm-up and measured
    /// iterations in order; only its last <paramref name="measured"/> rows are measured ones. The group size is
    /// cumulative over a round, so a round's last row.
    /// </summary>
    public static IReadOnlyList<GroupCommitStats> Load(string file, int measured)
    {
        if (!File.Exists(file))
        {
            return [];
        }

        var rows = new List<(int Writers, string Method, int Round, double P50, double P99, double Group,
            double Sync)>();
        foreach (string line in File.ReadLines(file))
        {
            string[] f = line.Split(',');
            if (f.Length is >= 6 and <= 8 && int.TryParse(f[1], CultureInfo.InvariantCulture, out int writers))
            {
                int round = f.Length == 8 ? int.Parse(f[7], CultureInfo.InvariantCulture) : 1;
                rows.Add((writers, f[2], round, Parse(f[3]), Parse(f[4]), Parse(f[5]),
                    f.Length >= 7 ? Parse(f[6]) : double.NaN));
            }
        }

        var stats = new List<GroupCommitStats>();
        foreach (var cell in rows.GroupBy(r => (r.Writers, r.Method)))
        {
            var rounds = cell.GroupBy(r => r.Round).Select(g => g.ToList()).ToList();
            var kept = rounds.SelectMany(r => r.Skip(Math.Max(0, r.Count - measured))).ToList();
            stats.Add(new GroupCommitStats(cell.Key.Writers, cell.Key.Method, Median(kept.Select(r => r.P50)),
                Median(kept.Select(r => r.P99)), rounds.Average(r => r[^1].Group),
                Median(kept.Select(r => r.Sync).Where(v => v > 0))));
        }

        return stats;

        static double Parse(string text) => double.Parse(text, NumberStyles.Float, CultureInfo.InvariantCulture);
    }

    /// <summary>The median of <paramref name="values"/> (NaN when there are none).</summary>
    internal static double Median(IEnumerable<double> values)
    {
        double[] sorted = values.Order().ToArray();
        return sorted.Length == 0 ? double.NaN : sorted.Length % 2 == 1 ? sorted[sorted.Length / 2]
            : (sorted[(sorted.Length / 2) - 1] + sorted[sorted.Length / 2]) / 2;
    }
}
