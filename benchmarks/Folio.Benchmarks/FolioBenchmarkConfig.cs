using BenchmarkDotNet.Columns;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Diagnosers;
using BenchmarkDotNet.Exporters;
using BenchmarkDotNet.Exporters.Csv;
using BenchmarkDotNet.Jobs;
using BenchmarkDotNet.Reports;

namespace Folio.Benchmarks;

/// <summary>
/// One configuration for every benchmark: a short job (this machine is shared and noisy: compare methods side by
/// side in one run and read ratios, not absolute times), memory diagnostics, ratio columns against the baseline,
/// and Markdown/CSV exports for docs/benchmarks.md.
/// </summary>
public sealed class FolioBenchmarkConfig : ManualConfig
{
    /// <summary>The shared job: 2 warm-up and 8 measured iterations in one process (id <c>Folio</c>).</summary>
    public static Job ShortJob { get; } = Job.Default.WithWarmupCount(2).WithIterationCount(8).WithLaunchCount(1)
        .WithId("Folio");

    public FolioBenchmarkConfig()
    {
        AddJob(ShortJob);
        AddDiagnoser(MemoryDiagnoser.Default);
        AddColumnProvider(DefaultColumnProviders.Instance);
        AddColumn(StatisticColumn.P50, StatisticColumn.P95);
        AddLogger(BenchmarkDotNet.Loggers.ConsoleLogger.Default);
        AddExporter(MarkdownExporter.GitHub, CsvExporter.Default);
        WithSummaryStyle(SummaryStyle.Default.WithRatioStyle(RatioStyle.Trend));
        WithOptions(ConfigOptions.JoinSummary | ConfigOptions.DisableLogFile);
    }
}
