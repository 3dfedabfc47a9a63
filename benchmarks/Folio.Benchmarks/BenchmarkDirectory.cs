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

    protected void CreateRoot()
    {
        string parent = Environment.GetEnvironmentVariable("FOLIO_BENCH_DIR") ?? Path.Combine(AppContext.BaseDirectory, "bench-data");
        Root = Path.Combine(parent, GetType().Name + "-" + Guid.NewGuid().ToString("N")[..8]);
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
