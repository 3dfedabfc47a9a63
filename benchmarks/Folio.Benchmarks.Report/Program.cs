using System.Diagnostics;
using Folio.Benchmarks;
using Folio.Benchmarks.Report;

// One command runs the headline benchmarks and regenerates the report in docs/benchmarks.md with its charts:
//   dotnet run -c Release --project benchmarks/Folio.Benchmarks.Report
// Options: --skip-run (regenerate from docs/benchmark-results), --only <Class> (run one class, keep the others'
// results).
string[] headline = ["GroupCommitBenchmarks", "PointReadBenchmarks", "JournalReadBenchmarks", "MixedWorkloadBenchmarks",
    "RecoveryBenchmarks", "OpenBenchmarks", "CheckpointBenchmarks"];

// The statistics file a class appends its own figures to (in FOLIO_BENCH_DIR), cleared before it runs and kept with its
// results.
var statsFiles = new Dictionary<string, string>(StringComparer.Ordinal)
{
    ["GroupCommitBenchmarks"] = "group-commit-stats.csv",
    ["RecoveryBenchmarks"] = "recovery-stats.csv",
    ["OpenBenchmarks"] = "open-stats.csv",
    ["CheckpointBenchmarks"] = "checkpoint-stats.csv",
};
bool skipRun = false;
var only = new List<string>();
for (int i = 0; i < args.Length; i++)
{
    switch (args[i])
    {
        case "--skip-run":
            skipRun = true;
            break;
        case "--only" when i + 1 < args.Length && headline.Contains(args[i + 1]):
            only.Add(args[++i]);
            break;
        case "-h" or "--help":
            Console.WriteLine(
                "Usage: dotnet run -c Release --project benchmarks/Folio.Benchmarks.Report -- [--skip-run] [--only " +
                "<Class>]...");
            Console.WriteLine("Classes: " + string.Join(", ", headline));
            return 0;
        default:
            Console.Error.WriteLine($"Unknown or incomplete option '{args[i]}'; see --help.");
            return 2;
    }
}

string repo = FindRepository();
string results = Path.Combine(repo, "docs", "benchmark-results");
string images = Path.Combine(repo, "docs", "images");
Directory.CreateDirectory(results);
Directory.CreateDirectory(images);

if (!skipRun)
{
    string artifacts = Path.Combine(repo, "BenchmarkDotNet.Artifacts", "headline");
    string data = Environment.GetEnvironmentVariable("FOLIO_BENCH_DIR") is { Length: > 0 } set ? set
        : Path.Combine(repo, "BenchmarkDotNet.Artifacts", "bench-data");
    Directory.CreateDirectory(data);
    foreach (string type in only.Count > 0 ? only.ToArray() : headline)
    {
        string? stats = statsFiles.TryGetValue(type, out string? statsName) ? Path.Combine(data, statsName) : null;
        if (stats is not null && File.Exists(stats))
        {
            File.Delete(stats);
        }

        var start = new ProcessStartInfo("dotnet",
            ["run", "-c", "Release", "--project", Path.Combine(repo, "benchmarks", "Folio.Benchmarks"), "--",
            "--filter", $"*.{type}.*", "--exporters", "json", "--artifacts", artifacts])
        {
            WorkingDirectory = repo,
        };
        start.Environment["FOLIO_BENCH_DIR"] = data;
        Console.WriteLine($"== {type}: {string.Join(' ', start.ArgumentList)}");
        using Process run = Process.Start(start)!;
        await run.WaitForExitAsync();
        string json = Path.Combine(artifacts, "results", $"Folio.Benchmarks.{type}-report-full-compressed.json");
        if (run.ExitCode != 0 || !File.Exists(json))
        {
            Console.Error.WriteLine($"{type} failed (exit code {run.ExitCode}); its previous results are kept.");
            continue;
        }

        File.Copy(json, Path.Combine(results, Path.GetFileName(json)), overwrite: true);
        string table = Path.Combine(artifacts, "results", $"Folio.Benchmarks.{type}-report-github.md");
        if (File.Exists(table))
        {
            File.Copy(table, Path.Combine(results, Path.GetFileName(table)), overwrite: true);
        }
        if (stats is not null && File.Exists(stats))
        {
            File.Copy(stats, Path.Combine(results, Path.GetFileName(stats)), overwrite: true);
        }
    }
}

BenchmarkResults loaded = BenchmarkResults.Load(results);
if (loaded.All.Count == 0)
{
    Console.Error.WriteLine($"No results in {results}; run without --skip-run first.");
    return 1;
}

IReadOnlyList<GroupCommitStats> groupStats = GroupCommitStats.Load(Path.Combine(results, "group-commit-stats.csv"),
    BenchmarkConstants.GroupCommitIterations);
RecoveryStats? recoveryStats = RecoveryStats.Load(Path.Combine(results, "recovery-stats.csv"));
Charts.CommitsPerWriters(loaded, Path.Combine(images, "commits-per-writers.png"));
Charts.PointReads(loaded, Path.Combine(images, "point-reads.png"));
Charts.JournalReads(loaded, Path.Combine(images, "journal-reads.png"));
Charts.Mixed(loaded, Path.Combine(images, "mixed-workloads.png"));
Charts.OpenTime(loaded, Path.Combine(images, "open-time.png"));

string report = Path.Combine(repo, "docs", "benchmarks.md");
string section = ReportWriter.Write(loaded, groupStats, recoveryStats, "images/", results);
string text = File.Exists(report) ? File.ReadAllText(report) : "# Benchmarks\n";
int begin = text.IndexOf(ReportWriter.Begin, StringComparison.Ordinal);
int end = text.IndexOf(ReportWriter.End, StringComparison.Ordinal);
if (begin >= 0 && end > begin)
{
    text = string.Concat(text.AsSpan(0, begin), section, text.AsSpan(end + ReportWriter.End.Length + 1));
}
else
{
    int afterTitle = text.IndexOf('\n', StringComparison.Ordinal) + 1;
    text = text[..afterTitle] + "\n" + section + "\n" + text[afterTitle..];
}

File.WriteAllText(report, text);
Console.WriteLine($"Wrote {report} and 5 charts in {images} from {loaded.All.Count} results.");
return 0;

static string FindRepository()
{
    for (string? dir = Directory.GetCurrentDirectory(); dir is not null; dir = Path.GetDirectoryName(dir))
    {
        if (File.Exists(Path.Combine(dir, "Storage.sln")))
        {
            return dir;
        }
    }

    throw new InvalidOperationException(
        "Run from inside the Folio repository (no Storage.sln found above the current folder).");
}
