using System.Text.RegularExpressions;
using Microsoft.CodeAnalysis;
using Microsoft.CodeAnalysis.CSharp;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Docs;

/// <summary>
/// README.md's C# snippets compile against the library as a user would write them in a <c>dotnet new console</c>
/// project (its implicit global usings): the main snippet with <c>using Folio;</c> alone (plus the two names it
/// assumes: a <c>User</c> class and a cancellation token <c>ct</c>).
/// </summary>
public sealed partial class ReadmeSnippetTests
{
    [Fact]
    public void The_main_snippet_compiles_with_using_Folio_alone()
    {
        string snippet = RepositoryFiles.ReadmeSnippet("## The API in 25 lines");
        Assert.StartsWith("using Folio;", snippet, StringComparison.Ordinal);
        Assert.Single(UsingLine().Matches(snippet));

        // Top-level statements: the snippet, then what it assumes (declarations follow the statements in C#).
        string program = snippet.Replace("using Folio;",
            "using Folio;\nvar ct = System.Threading.CancellationToken.None;", StringComparison.Ordinal)
            + "\npublic sealed class User { public string Name { get; set; } = \"\"; }\n";
        Compile(program, OutputKind.ConsoleApplication);
    }

    [Fact]
    public void The_operations_snippet_compiles_with_using_Folio_alone()
    {
        string snippet = RepositoryFiles.ReadmeSnippet("## Operations");
        Assert.StartsWith("using Folio;", snippet, StringComparison.Ordinal);
        Assert.Single(UsingLine().Matches(snippet));
        Compile(snippet, OutputKind.ConsoleApplication);
    }

    /// <summary>The global usings of a <c>dotnet new console</c> project (ImplicitUsings, Microsoft.NET.Sdk).</summary>
    private const string ImplicitUsings = """
        global using System;
        global using System.Collections.Generic;
        global using System.IO;
        global using System.Linq;
        global using System.Net.Http;
        global using System.Threading;
        global using System.Threading.Tasks;
        """;

    private static void Compile(string source, OutputKind kind)
    {
        var references = ((string)AppContext.GetData("TRUSTED_PLATFORM_ASSEMBLIES")!)
            .Split(Path.PathSeparator)
            .Where(path => Path.GetFileName(path).StartsWith("System.", StringComparison.Ordinal)
                || Path.GetFileName(path) is "netstandard.dll" or "mscorlib.dll")
            .Select(path => MetadataReference.CreateFromFile(path))
            .Append(MetadataReference.CreateFromFile(typeof(DocumentStore).Assembly.Location))
            .ToList();
        CSharpCompilation compilation = CSharpCompilation.Create(
            "ReadmeSnippet",
            [CSharpSyntaxTree.ParseText(source, new CSharpParseOptions(LanguageVersion.Latest)),
                CSharpSyntaxTree.ParseText(ImplicitUsings)],
            references,
            new CSharpCompilationOptions(kind, nullableContextOptions: NullableContextOptions.Enable));
        using var output = new MemoryStream();
        Microsoft.CodeAnalysis.Emit.EmitResult result = compilation.Emit(output);
        string[] errors = [.. result.Diagnostics.Where(d => d.Severity == DiagnosticSeverity.Error).Select(d
            => d.ToString())];
        Assert.True(result.Success, $"README's snippet does not compile:\n{string.Join("\n", errors)}\n\n{source}");
    }

    [GeneratedRegex("^using ", RegexOptions.Multiline)]
    private static partial Regex UsingLine();
}
