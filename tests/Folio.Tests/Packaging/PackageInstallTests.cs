using System.Diagnostics;
using System.IO.Compression;
using System.Net;
using System.Net.Sockets;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Packaging;

/// <summary>
/// The path a user takes: both packages are packed, installed from a local folder feed into a new console app and a
/// new web app made by <c>dotnet new</c>, and README.md's snippets run there. Also checks what the packages carry
/// (license, README, tags, a prerelease version, symbols).
/// </summary>
public sealed class PackageInstallTests(ITestOutputHelper output)
{
    private static readonly TimeSpan s_commandTimeout = TimeSpan.FromMinutes(3);

    [Fact]
    public async Task Both_packages_install_from_a_local_feed_into_new_apps_and_README_snippets_run()
    {
        string root = RepositoryFiles.Root();
        using var work = new TempDirectory();
        string feed = Path.Combine(work.Path, "feed");
        await RunAsync(root, "dotnet", "pack", Path.Combine(root, "src", "Folio"), "-c", "Release", "-o", feed);
        await RunAsync(root, "dotnet", "pack", Path.Combine(root, "src", "Folio.Extensions.Hosting"), "-c", "Release",
            "-o", feed);
        string package = Directory.GetFiles(feed, "Folio.0.*.nupkg").Single();
        string version = Path.GetFileNameWithoutExtension(package)["Folio.".Length..];
        Assert.Contains("-", version, StringComparison.Ordinal); // a prerelease until the format is declared stable
        Assert.Single(Directory.GetFiles(feed, "Folio.*.snupkg"), f
            => !f.Contains("Extensions", StringComparison.Ordinal));
        using (ZipArchive zip = ZipFile.OpenRead(package))
        {
            Assert.NotNull(zip.GetEntry("README.md"));
            Assert.NotNull(zip.GetEntry("LICENSE"));
            using var nuspec = new StreamReader(
                zip.Entries.Single(e => e.FullName.EndsWith(".nuspec", StringComparison.Ordinal)).Open());
            string text = await nuspec.ReadToEndAsync();
            Assert.Contains("<license type=\"expression\">MIT</license>", text, StringComparison.Ordinal);
            Assert.Contains("<readme>README.md</readme>", text, StringComparison.Ordinal);
            Assert.Contains("<tags>", text, StringComparison.Ordinal);
        }

        string config = $"""
            <?xml version="1.0" encoding="utf-8"?>
            <configuration>
              <packageSources>
                <add key="folio-local" value="{feed}" />
              </packageSources>
            </configuration>
            """;

        // A console app running README's main snippet (its change-feed loop tails until the token is cancelled).
        string console = Path.Combine(work.Path, "console");
        await RunAsync(work.Path, "dotnet", "new", "console", "-o", console, "--no-restore");
        File.WriteAllText(Path.Combine(console, "nuget.config"), config);
        await RunAsync(console, "dotnet", "add", "package", "Folio", "--version", version);
        string snippet = RepositoryFiles.ReadmeSnippet("## The API in 25 lines");
        File.WriteAllText(Path.Combine(console, "Program.cs"), $$"""
            using Folio;
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(3));
            var ct = cts.Token;
            try
            {
            {{snippet.Replace("using Folio;", "", StringComparison.Ordinal)}}
            }
            catch (OperationCanceledException)
            {
                Console.WriteLine("the feed was tailed until cancelled");
            }

            public sealed class User { public string Name { get; set; } = ""; }
            """);
        string printed = await RunAsync(console, "dotnet", "run");
        Assert.Contains("Put User/users/alan", printed, StringComparison.Ordinal);
        Assert.Contains("Put User/users/grace", printed, StringComparison.Ordinal);
        Assert.Contains("Delete User/users/alan", printed, StringComparison.Ordinal);
        Assert.Contains("the feed was tailed until cancelled", printed, StringComparison.Ordinal);

        // A web app with README's hosting snippet: it starts, serves the health check and a 404 for a missing user.
        string web = Path.Combine(work.Path, "web");
        await RunAsync(work.Path, "dotnet", "new", "web", "-o", web, "--no-restore");
        File.WriteAllText(Path.Combine(web, "nuget.config"), config);
        await RunAsync(web, "dotnet", "add", "package", "Folio.Extensions.Hosting", "--version", version);
        string[] hosting = RepositoryFiles.ReadmeSnippet("In ASP.NET Core (package `Folio.Extensions.Hosting`)")
            .Split('\n');
        string services = string.Join('\n',
            hosting.Where(line => line.StartsWith("builder.", StringComparison.Ordinal)));
        string endpoints = string.Join('\n',
            hosting.Where(line => !line.StartsWith("builder.", StringComparison.Ordinal)));
        File.WriteAllText(Path.Combine(web, "Program.cs"), $$"""
            using Folio;
            var builder = WebApplication.CreateBuilder(args);
            {{services}}
            var app = builder.Build();
            {{endpoints}}
            app.Run();

            public sealed class User { public string Name { get; set; } = ""; }
            """);
        File.WriteAllText(Path.Combine(web, "appsettings.json"), """{ "Folio": { "Path": "data/folio" } }""");
        await RunAsync(web, "dotnet", "build");
        int port = FreePort();
        using Process server = Start(web, "dotnet", "run", "--no-build", "--urls", $"http://127.0.0.1:{port}");
        try
        {
            using var http = new HttpClient { BaseAddress = new Uri($"http://127.0.0.1:{port}") };
            HttpResponseMessage? health = null;
            var started = Stopwatch.StartNew();
            while (health is null && started.Elapsed < s_commandTimeout)
            {
                try
                {
                    health = await http.GetAsync(new Uri("/health", UriKind.Relative));
                }
                catch (HttpRequestException)
                {
                    Assert.False(server.HasExited, "the web app exited");
                    await Task.Delay(200);
                }
            }

            Assert.Equal(HttpStatusCode.OK, health!.StatusCode);
            Assert.Equal(HttpStatusCode.NotFound,
                (await http.GetAsync(new Uri("/users/nobody", UriKind.Relative))).StatusCode);
        }
        finally
        {
            server.Kill(entireProcessTree: true);
            await server.WaitForExitAsync();
        }
    }

    [Fact]
    public async Task The_tool_installs_from_a_local_feed_and_its_commands_run()
    {
        string root = RepositoryFiles.Root();
        using var work = new TempDirectory();
        string feed = Path.Combine(work.Path, "feed");
        await RunAsync(root, "dotnet", "pack", Path.Combine(root, "tools", "Folio.Tool"), "-c", "Release", "-o",
            feed);
        string package = Directory.GetFiles(feed, "Folio.Tool.0.*.nupkg").Single();
        string version = Path.GetFileNameWithoutExtension(package)["Folio.Tool.".Length..];
        string tools = Path.Combine(work.Path, "tools");
        await RunAsync(work.Path, "dotnet", "tool", "install", "Folio.Tool", "--version", version, "--tool-path",
            tools, "--add-source", feed);

        string store = Path.Combine(work.Path, "store");
        await using (DocumentStore opened = DocumentStore.Open(store))
        {
            await opened.PutAsync("people", "ada", "{\"name\":\"Ada\"}"u8.ToArray());
        }

        string folio = Path.Combine(tools, OperatingSystem.IsWindows() ? "folio.exe" : "folio");
        string info = await RunAsync(work.Path, folio, "info", store);
        Assert.Contains("people  1 documents", info, StringComparison.Ordinal);
        string backup = Path.Combine(work.Path, "store.backup");
        await RunAsync(work.Path, folio, "backup", store, backup);
        string restored = await RunAsync(work.Path, folio, "restore", backup, Path.Combine(work.Path, "restored"));
        Assert.Contains("1 documents, verified", restored, StringComparison.Ordinal);
    }

    private async Task<string> RunAsync(string directory, string file, params string[] arguments)
    {
        using Process process = Start(directory, file, arguments);
        Task<string> stdout = process.StandardOutput.ReadToEndAsync();
        Task<string> stderr = process.StandardError.ReadToEndAsync();
        await process.WaitForExitAsync().WaitAsync(s_commandTimeout);
        string text = await stdout + await stderr;
        output.WriteLine($"$ {file} {string.Join(' ', arguments)}\n{text}");
        Assert.True(process.ExitCode == 0,
            $"'{file} {string.Join(' ', arguments)}' exited with {process.ExitCode}:\n{text}");
        return text;
    }

    private static Process Start(string directory, string file, params string[] arguments)
    {
        var start = new ProcessStartInfo(file, arguments)
        {
            WorkingDirectory = directory,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        start.Environment["DOTNET_CLI_TELEMETRY_OPTOUT"] = "1";
        start.Environment["DOTNET_NOLOGO"] = "1";
        return Process.Start(start)!;
    }

    private static int FreePort()
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        return ((IPEndPoint)listener.LocalEndpoint).Port;
    }
}
