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

    /// <summary>Drops every file under <paramref name="folder"/> from the operating system's page cache (Linux
    /// <c>posix_fadvise(POSIX_FADV_DONTNEED)</c>; their pages must be clean: closed, or fsynced), so a case starts
    /// with none of its data cached whatever ran before it.</summary>
    protected static void DropFromPageCache(string folder)
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        foreach (string file in Directory.EnumerateFiles(folder, "*", SearchOption.AllDirectories))
        {
            using var stream = new FileStream(file, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete);
            _ = PosixFAdvise((int)stream.SafeFileHandle.DangerousGetHandle(), 0, 0, DontNeed);
        }
    }

    private const int DontNeed = 4; // POSIX_FADV_DONTNEED

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "posix_fadvise")]
    private static extern int PosixFAdvise(int fd, long offset, long length, int advice);

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
