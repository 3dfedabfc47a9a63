using System.Diagnostics;

namespace Folio.Tests.Infrastructure;

/// <summary>Runs the <c>folio</c> tool (tools/Folio.Tool, built with the tests) as a child process.</summary>
internal static class FolioToolProcess
{
    /// <summary>Runs <c>folio</c> with <paramref name="arguments"/>, standard input from <paramref name="input"/>
    /// when given, and returns its exit code and both outputs.</summary>
    public static async Task<(int ExitCode, string Output, string Error)> RunWithInputAsync(string? input,
        params string[] arguments)
    {
        string tool = ToolDll();
        Assert.True(File.Exists(tool), $"the tool is built with the tests: {tool}");
        var start = new ProcessStartInfo("dotnet", [tool, .. arguments])
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            RedirectStandardInput = input is not null,
        };
        using Process child = Process.Start(start)!;
        Task<string> output = child.StandardOutput.ReadToEndAsync();
        Task<string> error = child.StandardError.ReadToEndAsync();
        if (input is not null)
        {
            try
            {
                await child.StandardInput.WriteAsync(input);
                child.StandardInput.Close();
            }
            catch (IOException)
            {
                // The tool stopped reading and exited before the input ended (an import stops at its first bad
                // line): the rest of the input, more than the pipe holds, has nowhere to go.
            }
        }

        await child.WaitForExitAsync().WaitAsync(TimeSpan.FromMinutes(2));
        return (child.ExitCode, await output, await error);
    }

    /// <summary>Starts <c>folio</c> with <paramref name="arguments"/> and standard output redirected, for a command
    /// that runs until it is stopped (the caller reads its lines and kills it).</summary>
    public static Process Start(params string[] arguments)
    {
        string tool = ToolDll();
        Assert.True(File.Exists(tool), $"the tool is built with the tests: {tool}");
        var start = new ProcessStartInfo("dotnet", [tool, .. arguments])
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        return Process.Start(start)!;
    }

    /// <summary>The tool in its own build output (with its dependencies, not the tests'): from
    /// tests/Folio.Tests/bin/&lt;Configuration&gt;/net10.0/ to
    /// tools/Folio.Tool/bin/&lt;Configuration&gt;/net10.0/.</summary>
    private static string ToolDll()
    {
        var output = new DirectoryInfo(AppContext.BaseDirectory.TrimEnd(Path.DirectorySeparatorChar));
        string repo = output.Parent!.Parent!.Parent!.Parent!.Parent!.FullName;
        return Path.Combine(repo, "tools", "Folio.Tool", "bin", output.Parent!.Name, output.Name, "Folio.Tool.dll");
    }

    public static Task<(int ExitCode, string Output, string Error)> RunAsync(params string[] arguments) =>
        RunWithInputAsync(null, arguments);
}
