using ScottPlot;

namespace Folio.Benchmarks.Report;

/// <summary>The report's charts, drawn with ScottPlot into PNG files.</summary>
internal static class Charts
{
    private static readonly Dictionary<string, Color> s_colors = new(StringComparer.Ordinal)
    {
        ["Folio"] = Colors.DarkOrange,
        ["FolioRaw"] = Colors.OrangeRed,
        ["FolioPut"] = Colors.DarkOrange,
        ["FolioSession"] = Colors.Gold,
        ["Merger"] = Colors.Brown,
        ["SqliteBatched"] = Colors.DarkBlue,
        ["FolioRawDeserialized"] = Colors.Peru,
        ["RawFdatasync"] = Colors.Gray,
        ["Sqlite"] = Colors.SteelBlue,
        ["SqliteTyped"] = Colors.LightSteelBlue,
        ["FolioSourceGenerated"] = Colors.SandyBrown,
        ["SqliteTypedSourceGenerated"] = Colors.LightBlue,
        ["LiteDb"] = Colors.SeaGreen,
        ["ConcurrentDictionary"] = Colors.DimGray,
        ["ForwardScan"] = Colors.DarkOrange,
        ["ForwardScanWithWriter"] = Colors.Orange,
        ["ShortRangeQueries"] = Colors.OrangeRed,
        ["TailFollow"] = Colors.Gold,
        ["RawRead"] = Colors.Gray,
        ["ShortRangeQueriesSustained"] = Colors.Salmon,
        ["Replay"] = Colors.SteelBlue,
        ["Checkpointed"] = Colors.DarkOrange,
        ["FolioRawCheckpointed"] = Colors.Chocolate,
        ["FolioRawCheckpointedUncached"] = Colors.Tan,
    };

    /// <summary>Commits per second against the number of concurrent writers, one line per engine (log-scaled
    /// axes).</summary>
    public static void CommitsPerWriters(BenchmarkResults results, string file)
    {
        const string type = "GroupCommitBenchmarks";
        var plot = new Plot();
        IReadOnlyList<string> writers = results.Values(type, "Writers");
        string[] methods = ["FolioPut", "FolioSession", "Merger", "RawFdatasync", "Sqlite", "SqliteBatched", "LiteDb"];
        foreach (string method in methods)
        {
            var xs = new List<double>();
            var ys = new List<double>();
            foreach (string w in writers)
            {
                if (results.Find(type, method, "Writers", w) is { } r)
                {
                    xs.Add(Math.Log2(double.Parse(w, System.Globalization.CultureInfo.InvariantCulture)));
                    ys.Add(Math.Log10(1e9 / r.MeanNs));
                }
            }

            if (xs.Count > 0)
            {
                var line = plot.Add.Scatter(xs.ToArray(), ys.ToArray(), Color(method));
                line.LegendText = method == "RawFdatasync" ? "raw write+fdatasync (1 thread)" : method;
                line.LineWidth = 2;
                line.MarkerSize = 8;
            }
        }

        plot.Axes.Bottom.TickGenerator = new ScottPlot.TickGenerators.NumericManual(
            writers.Select(w => Math.Log2(double.Parse(w, System.Globalization.CultureInfo.InvariantCulture)))
                .ToArray(), writers.ToArray());
        LogAxis(plot.Axes.Left);
        plot.Title("Durable commits per second vs concurrent writers (higher is better)");
        plot.XLabel("concurrent writers (single-document commits)");
        plot.YLabel("commits/s (log scale)");
        plot.ShowLegend(Alignment.UpperLeft);
        plot.SavePng(file, 900, 520);
    }

    /// <summary>Reads per second per thread, grouped bars per engine for each thread count (log-scaled).</summary>
    public static void PointReads(BenchmarkResults results, string file)
    {
        const string type = "PointReadBenchmarks";
        string[] methods = ["FolioRaw", "FolioRawCheckpointed", "FolioRawCheckpointedUncached", "FolioRawDeserialized",
            "Folio", "FolioSourceGenerated", "Sqlite", "SqliteTyped", "SqliteTypedSourceGenerated", "LiteDb",
            "ConcurrentDictionary"];
        Grouped(results, type, "Threads", methods, r => 1e9 / r.MeanNs, file,
            "Point reads by id per second per thread, 100k documents (higher is better)",
                "reads/s per thread (log scale)", t => $"{t} thread{(t == "1" ? "" : "s")}");
    }

    /// <summary>Operations per second of the YCSB-style mixed workloads (16 sessions, durable writes).</summary>
    public static void Mixed(BenchmarkResults results, string file)
    {
        const string type = "MixedWorkloadBenchmarks";
        Grouped(results, type, "Workload", ["Folio", "Sqlite", "LiteDb"], r => 1e9 / r.MeanNs, file,
            "YCSB-style mixed workloads, 16 sessions, durable writes (higher is better)", "operations/s (log scale)",
            w => w switch { "A" => "A: 50% read, 50% update", "B" => "B: 95% read, 5% update", _ => w });
    }

    /// <summary>Open time (µs, log scale) against the history behind the store: full replay and the checkpointed
    /// open side by side.</summary>
    public static void OpenTime(BenchmarkResults results, string file)
    {
        const string type = "OpenBenchmarks";
        Grouped(results, type, "History", ["Replay", "Checkpointed"], r => r.MeanNs / 1e3, file,
            "Open time against history: full replay vs checkpoint + journal tail (lower is better)",
            "µs per open (log scale)", h => h switch
            {
                "1000x0" => "1,000 docs",
                "1000x1M" => "1,000 docs, 1M overwrites",
                "1000x10M" => "1,000 docs, 10M overwrites",
                "1Mx1KiB" => "1M docs of 1 KiB",
                _ => h,
            });
    }

    /// <summary>Journal read costs: nanoseconds of wall time per entry (or per iterator) with 8 readers.</summary>
    public static void JournalReads(BenchmarkResults results, string file)
    {
        const string type = "JournalReadBenchmarks";
        string[] methods = ["RawRead", "ForwardScan", "ForwardScanWithWriter", "TailFollow", "ShortRangeQueries",
            "ShortRangeQueriesSustained"];
        var plot = new Plot();
        var ticks = new List<Tick>();
        for (int i = 0; i < methods.Length; i++)
        {
            if (results.Find(type, methods[i]) is not { } r)
            {
                continue;
            }

            var bar = plot.Add.Bar(i, r.MeanNs);
            bar.Color = Color(methods[i]);
            bar.Bars[0].Label = r.MeanNs.ToString("N1", System.Globalization.CultureInfo.InvariantCulture);
            bar.ValueLabelStyle.FontSize = 12;
            ticks.Add(
                new Tick(i, methods[i].StartsWith("ShortRange", StringComparison.Ordinal)
                ? methods[i].Replace("Queries", "") + "\n(per iterator)" : methods[i]));
        }

        plot.Axes.Bottom.TickGenerator = new ScottPlot.TickGenerators.NumericManual(ticks.ToArray());
        plot.Axes.Margins(bottom: 0);
        plot.Title("Journal reads, 8 concurrent readers: wall ns per entry (lower is better)");
        plot.YLabel("ns (wall time, all readers)");
        plot.SavePng(file, 900, 520);
    }

    private static void Grouped(BenchmarkResults results, string type, string parameter, string[] methods,
        Func<BenchmarkResult, double> value, string file, string title, string yLabel, Func<string, string> groupLabel)
    {
        var plot = new Plot();
        IReadOnlyList<string> groups = results.Values(type, parameter);
        var ticks = new List<Tick>();
        var legend = new HashSet<string>(StringComparer.Ordinal);
        double position = 0;
        double highest = 0;
        foreach (string group in groups)
        {
            double start = position;
            foreach (string method in methods)
            {
                if (results.Find(type, method, parameter, group) is not { } r)
                {
                    continue;
                }

                double v = value(r);
                highest = Math.Max(highest, Math.Log10(v));
                var bar = new Bar { Position = position, Value = Math.Log10(v), ValueBase = 0,
                    FillColor = Color(method), Label = Short(v) };
                var bars = plot.Add.Bars(new[] { bar });
                bars.ValueLabelStyle.FontSize = 11;
                if (legend.Add(method))
                {
                    bars.LegendText = method;
                }

                position++;
            }

            ticks.Add(new Tick((start + position - 1) / 2, groupLabel(group)));
            position += 1;
        }

        plot.Axes.Bottom.TickGenerator = new ScottPlot.TickGenerators.NumericManual(ticks.ToArray());
        LogAxis(plot.Axes.Left);
        plot.Axes.SetLimitsY(0, Math.Ceiling(highest) + 1.5); // head room for the legend above the bars
        plot.Title(title);
        plot.YLabel(yLabel);
        plot.ShowLegend(Alignment.UpperRight);
        plot.SavePng(file, 900, 520);
    }

    /// <summary>Shows log10 values as powers of ten with log-spaced minor ticks.</summary>
    private static void LogAxis(IAxis axis)
    {
        axis.TickGenerator = new ScottPlot.TickGenerators.NumericAutomatic
        {
            MinorTickGenerator = new ScottPlot.TickGenerators.LogMinorTickGenerator(),
            IntegerTicksOnly = true,
            LabelFormatter = static y => Short(Math.Pow(10, y)),
        };
    }

    private static string Short(double value) => value switch
    {
        >= 1e6 => (value / 1e6).ToString("0.##", System.Globalization.CultureInfo.InvariantCulture) + "M",
        >= 1e3 => (value / 1e3).ToString("0.#", System.Globalization.CultureInfo.InvariantCulture) + "k",
        _ => value.ToString("0", System.Globalization.CultureInfo.InvariantCulture),
    };

    private static Color Color(string method) => s_colors.TryGetValue(method, out Color color) ? color : Colors.Black;
}
