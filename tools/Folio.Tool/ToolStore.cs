using System.CommandLine;
using System.Text.Json;

namespace Folio.Tool;

/// <summary>
/// How every command opens a store and reports failure: a store must exist (the tool never creates one by accident),
/// a store another process holds is refused with a sentence saying so, and any failure becomes one line on standard
/// error and exit code 1.
/// </summary>
internal static class ToolStore
{
    /// <summary>Exit code of a command that failed.</summary>
    public const int Failed = 1;

    /// <summary>Exit code of <c>verify</c> when the store has problems.</summary>
    public const int Damaged = 2;

    /// <summary>Serializer options for a store the tool opens: it loads no entities, so only their depth matters,
    /// which bounds how deeply nested a document <c>import</c> may write.</summary>
    private static readonly JsonSerializerOptions s_rawOnly = new() { MaxDepth = DocumentStoreOptions.MaxJsonDepth };

    /// <summary>The <c>&lt;store&gt;</c> argument every command but <c>restore</c> takes.</summary>
    public static Argument<string> StoreArgument() => new("store") { Description = "The store's folder." };

    /// <summary>Opens the store in <paramref name="folder"/> (a small cache: the tool reads most pages once); unless
    /// <paramref name="create"/>, the store must exist. <paramref name="maxDocumentSize"/>: the largest document a
    /// write may put (the store's default unless a command takes it as an option).</summary>
    public static DocumentStore Open(string folder, bool create = false,
        int maxDocumentSize = DocumentStoreOptions.DefaultMaxDocumentSize)
    {
        string path = create ? Path.GetFullPath(folder) : RequireStore(folder);

        try
        {
            return DocumentStore.Open(path, new DocumentStoreOptions
            {
                CacheSize = 64L << 20,
                MaxDocumentSize = maxDocumentSize,
                // A segment holds any document in one record: room for the largest and the default's headroom.
                SegmentSize = Math.Max(DocumentStoreOptions.DefaultSegmentSize, 2L * maxDocumentSize),
                // The tool writes raw documents only: it accepts them as deep as any store can hold them.
                JsonSerializerOptions = s_rawOnly,
            });
        }
        catch (StoreLockedException)
        {
            throw new ToolException($"the store '{path}' is open in another process (its lock is held); stop that "
                + "process first, or back it up from there with DocumentStore.BackupAsync");
        }
    }

    /// <summary>The full path of the store in <paramref name="folder"/>; a folder with no store fails.</summary>
    public static string RequireStore(string folder)
    {
        string path = Path.GetFullPath(folder);
        if (!Directory.Exists(Path.Combine(path, "journal")) && !File.Exists(Path.Combine(path, "data.folio")))
        {
            throw new ToolException($"no Folio store at '{path}'");
        }

        return path;
    }

    /// <summary>The size of the store's files (data file and journal segments): what a backup reads at most, read
    /// from the file system alone.</summary>
    public static long FileBytes(string folder)
    {
        string data = Path.Combine(folder, "data.folio");
        long bytes = File.Exists(data) ? new FileInfo(data).Length : 0;
        foreach (string segment in Directory.EnumerateFiles(Path.Combine(folder, "journal"), "*.journal"))
        {
            bytes += new FileInfo(segment).Length;
        }

        return bytes;
    }

    /// <summary>Runs a command's body: its exit code, or 1 with a one-line error for any failure (130 when the user
    /// interrupted it).</summary>
    public static async Task<int> RunAsync(Func<Task<int>> body)
    {
        try
        {
            return await body().ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
            await Console.Error.WriteLineAsync("folio: interrupted").ConfigureAwait(false);
            return 130;
        }
        catch (Exception e) when (e is ToolException or FolioException or IOException or ArgumentException
            or UnauthorizedAccessException or System.Text.Json.JsonException)
        {
            // An argument's name is the API's, not the command line's: the message says what is wrong without it.
            string message = e is ArgumentException { ParamName: { } name }
                ? e.Message.Replace($" (Parameter '{name}')", "", StringComparison.Ordinal)
                : e.Message;
            await Console.Error.WriteLineAsync($"folio: {OneLine(message)}").ConfigureAwait(false);
            return Failed;
        }
    }

    private static string OneLine(string message) => message.ReplaceLineEndings(" ");
}
