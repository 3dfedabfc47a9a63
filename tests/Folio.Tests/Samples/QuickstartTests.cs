using System.Diagnostics;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Samples;

/// <summary>Runs the README's main command (the quickstart) as a process, from its own build output.</summary>
public sealed class QuickstartTests
{
    private static string QuickstartDll()
    {
        // tests/Folio.Tests/bin/<Configuration>/net10.0/ ->
        // samples/Folio.Samples.Quickstart/bin/<Configuration>/net10.0/
        var output = new DirectoryInfo(AppContext.BaseDirectory.TrimEnd(Path.DirectorySeparatorChar));
        string framework = output.Name;
        string configuration = output.Parent!.Name;
        string repo = output.Parent!.Parent!.Parent!.Parent!.Parent!.FullName;
        return Path.Combine(repo, "samples", "Folio.Samples.Quickstart", "bin", configuration, framework,
            "Folio.Samples.Quickstart.dll");
    }

    private static async Task<(int ExitCode, string Output, string Error)> RunAsync(params string[] args)
    {
        var start = new ProcessStartInfo("dotnet", [QuickstartDll(), .. args])
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        using Process process = Process.Start(start)!;
        Task<string> output = process.StandardOutput.ReadToEndAsync();
        Task<string> error = process.StandardError.ReadToEndAsync();
        using var timeout = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        await process.WaitForExitAsync(timeout.Token);
        return (process.ExitCode, await output, await error);
    }

    [Fact]
    public async Task Quickstart_writes_loads_queries_and_reads_the_feed_then_exits_0_and_again_on_reopen()
    {
        Assert.True(File.Exists(QuickstartDll()), $"the quickstart is built with the tests: {QuickstartDll()}");
        using var dir = new TempDirectory();
        string data = Path.Combine(dir.Path, "data");

        (int code, string output, string error) = await RunAsync("--data", data, "--documents", "400", "--sessions",
            "8");
        Assert.True(code == 0, $"exit {code}: {output}{error}");
        Assert.Contains("Wrote 400 documents from 8 concurrent sessions", output, StringComparison.Ordinal);
        Assert.Contains("Loaded 400 of 400 documents", output, StringComparison.Ordinal);
        Assert.Contains("ConcurrencyException as expected", output, StringComparison.Ordinal);
        Assert.Contains("Change feed: 401 changes", output, StringComparison.Ordinal);

        (code, output, error) = await RunAsync("--data", data, "--documents", "400", "--sessions", "8", "--buffered");
        Assert.True(code == 0, $"exit {code} on reopen: {output}{error}");
        Assert.Contains("last committed sequence 401.", output, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Quickstart_prints_help_and_rejects_bad_options()
    {
        (int code, string output, _) = await RunAsync("--help");
        Assert.Equal(0, code);
        Assert.Contains("--documents <n>", output, StringComparison.Ordinal);

        (code, _, string error) = await RunAsync("--documents", "zero");
        Assert.Equal(2, code);
        Assert.Contains("--documents", error, StringComparison.Ordinal);
    }
}
