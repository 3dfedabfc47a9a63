namespace Folio.Benchmarks;

/// <summary>
/// The shared setup of every storage benchmark: a fresh folder on the real disk (not tmpfs: fsync must mean
/// something), removed at cleanup. Benchmarks derive from it.
/// </summary>
public abstract class BenchmarkDirectory
{
    protected string Root { get; private set; } = string.Empty;

    protected string NewFolder(string name)
    {
        string path = Path.Combine(Root, name);
        Directory.CreateDirectory(path);
        return path;
    }

    /// <summary>The folder benchmark data goes in: <c>FOLIO_BENCH_DIR</c>, or <c>bench-data</c> beside the benchmark
    /// binaries.</summary>
    protected static string DataFolder => Environment.GetEnvironmentVariable("FOLIO_BENCH_DIR")
        ?? Path.Combine(AppContext.BaseDirectory, "bench-data");

    /// <summary>
    /// A statistics file in <see cref="DataFolder"/> that a benchmark appends its own figures to (rows the
    /// BenchmarkDotNet export cannot carry); the report tool clears it before the class runs and reads it after.
    /// </summary>
    protected static string StatsFile(string name) => Path.Combine(DataFolder, name);

    /// <summary>
    /// Data a benchmark builds once and reuses: when <paramref name="folder"/> holds a <c>built</c> marker (or
    /// <paramref name="marker"/> exists, when given), returns what it says; otherwise recreates the folder empty, runs
    /// <paramref name="build"/>, and writes what it returns (how long the build took) to the marker, so an interrupted
    /// build is redone from scratch.
    /// </summary>
    protected static string BuildOnce(string folder, Func<string> build, string? marker = null)
    {
        marker ??= Path.Combine(folder, "built");
        if (File.Exists(marker))
        {
            return File.ReadAllText(marker);
        }

        if (Directory.Exists(folder))
        {
            Directory.Delete(folder, recursive: true);
        }

        Directory.CreateDirectory(folder);
        string built = build();
        File.WriteAllText(marker, built);
        return built;
    }

    protected void CreateRoot()
    {
        Root = Path.Combine(DataFolder, GetType().Name + "-" + Guid.NewGuid().ToString("N")[..8]);
        Directory.CreateDirectory(Root);
    }

    protected void DeleteRoot()
    {
        if (Root.Length > 0 && Directory.Exists(Root))
        {
            Directory.Delete(Root, recursive: true);
        }
    }
}
