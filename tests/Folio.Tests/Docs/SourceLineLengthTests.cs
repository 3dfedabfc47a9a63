using Folio.Tests.Infrastructure;

namespace Folio.Tests.Docs;

/// <summary>The style guide's line limit, checked over every C# file of the repository (not build output).</summary>
public sealed class SourceLineLengthTests
{
    private const int MaxLineLength = 120;

    [Fact]
    public void No_line_of_csharp_source_is_longer_than_120_characters()
    {
        string root = RepositoryFiles.Root();
        var longLines = new List<string>();
        foreach (string folder in new[] { "src", "tests", "benchmarks", "samples", "tools" })
        {
            string path = Path.Combine(root, folder);
            if (!Directory.Exists(path))
            {
                continue;
            }

            foreach (string file in Directory.EnumerateFiles(path, "*.cs", SearchOption.AllDirectories))
            {
                string relative = Path.GetRelativePath(root, file);
                string[] parts = relative.Split(Path.DirectorySeparatorChar);
                if (parts.Contains("obj") || parts.Contains("bin"))
                {
                    continue;
                }

                string[] lines = File.ReadAllLines(file);
                for (int i = 0; i < lines.Length; i++)
                {
                    if (lines[i].Length > MaxLineLength)
                    {
                        longLines.Add($"{relative}:{i + 1} ({lines[i].Length} characters)");
                    }
                }
            }
        }

        Assert.True(longLines.Count == 0, "Lines over 120 characters:\n" + string.Join('\n', longLines));
    }
}
