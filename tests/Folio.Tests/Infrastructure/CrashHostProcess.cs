using System.Diagnostics;

namespace Folio.Tests.Infrastructure;

/// <summary>The crash tests' child process (tests/Folio.CrashHost, built next to the tests).</summary>
internal static class CrashHostProcess
{
    /// <summary>How many kill cycles a crash test runs: FOLIO_CRASH_CYCLES, or 3 (CI).</summary>
    public static int Cycles => int.TryParse(Environment.GetEnvironmentVariable("FOLIO_CRASH_CYCLES"), out int n) ? n
        : 3;

    /// <summary>Starts the child with <paramref name="arguments"/>, its output redirected, and waits for its READY
    /// line.</summary>
    public static Process Start(params string[] arguments)
    {
        string host = Path.Combine(AppContext.BaseDirectory, "Folio.CrashHost.dll");
        Assert.True(File.Exists(host), $"the crash host is built next to the tests: {host}");
        var start = new ProcessStartInfo("dotnet", [host, .. arguments])
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        Process child = Process.Start(start)!;
        string? ready = child.StandardError.ReadLine();
        Assert.StartsWith("READY", ready ?? "(no output)", StringComparison.Ordinal);
        return child;
    }

    /// <summary>Kills <paramref name="child"/> with SIGKILL (no finally blocks, no flush, no dispose) and waits for it
    /// and for <paramref name="reading"/>, the task draining its output.</summary>
    public static async Task KillAsync(Process child, Task reading)
    {
        child.Kill();
        await child.WaitForExitAsync();
        await reading.WaitAsync(TestDeadline.Hang);
    }
}
