using System.Reflection;

namespace Folio.Tests.Infrastructure;

/// <summary>Files of the repository the tests run from: its root, and code blocks of README.md.</summary>
internal static class RepositoryFiles
{
    /// <summary>The folder holding Storage.sln, above the test assembly.</summary>
    public static string Root()
    {
        string? directory = Path.GetDirectoryName(Assembly.GetExecutingAssembly().Location);
        while (directory is not null && !File.Exists(Path.Combine(directory, "Storage.sln")))
        {
            directory = Path.GetDirectoryName(directory);
        }

        return directory ?? throw new InvalidOperationException("Storage.sln not found above the test assembly.");
    }

    /// <summary>The first ```csharp block after <paramref name="heading"/> in README.md.</summary>
    public static string ReadmeSnippet(string heading)
    {
        const string fence = "```csharp\n";
        string readme = File.ReadAllText(Path.Combine(Root(), "README.md"));
        int at = readme.IndexOf(heading, StringComparison.Ordinal);
        Assert.True(at >= 0, $"README.md has no '{heading}'");
        int start = readme.IndexOf(fence, at, StringComparison.Ordinal) + fence.Length;
        return readme[start..readme.IndexOf("```", start, StringComparison.Ordinal)];
    }
}
