using System.CommandLine;
using System.Globalization;
using System.Text;

namespace Folio.Tool;

/// <summary><c>folio import &lt;store&gt; &lt;file&gt;</c>: puts every document of an NDJSON file (the export's
/// lines; <c>-</c> reads standard input), 1,000 a commit, into a store it creates if the folder holds none.
/// Documents get new versions. A bad line stops the import; the commits before it stay.</summary>
internal static class ImportCommand
{
    private const int DocumentsPerCommit = 1_000;

    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var file = new Argument<string>("file") { Description = "An NDJSON file ('-' for standard input)." };
        var command = new Command("import", "Put every document of an NDJSON file into a store.") { store, file };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string name = parse.GetValue(file)!;
            if (name != "-" && !File.Exists(name))
            {
                throw new ToolException($"no file at '{Path.GetFullPath(name)}'");
            }

            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!, create: true);
            Stream input = name == "-" ? Console.OpenStandardInput()
                : new FileStream(name, FileMode.Open, FileAccess.Read, FileShare.Read, 1 << 16,
                    FileOptions.SequentialScan);
            ProgressDisplay? display = name == "-" ? null : new ProgressDisplay("import", input.Length);
            long imported = 0;
            long lineNumber = 0;
            var batch = new CommitBatch();
            using (var reader = new StreamReader(input, Encoding.UTF8))
            {
                while (await reader.ReadLineAsync(cancellationToken).ConfigureAwait(false) is { } line)
                {
                    lineNumber++;
                    if (line.Length == 0)
                    {
                        continue;
                    }

                    (string collection, string id, byte[] document) =
                        NdjsonLine.ReadDocument(Encoding.UTF8.GetBytes(line), lineNumber);
                    batch.Put(collection, id, document);
                    if (batch.Count == DocumentsPerCommit)
                    {
                        imported += await CommitAsync(opened, batch, lineNumber, cancellationToken)
                            .ConfigureAwait(false);
                        batch = new CommitBatch();
                        display?.Report(input.Position);
                    }
                }
            }

            if (batch.Count > 0)
            {
                imported += await CommitAsync(opened, batch, lineNumber, cancellationToken).ConfigureAwait(false);
            }

            display?.Complete();
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"imported {imported} documents, last commit {opened.LastCommittedSequence}")).ConfigureAwait(false);
            return 0;
        }));
        return command;
    }

    private static async Task<int> CommitAsync(DocumentStore store, CommitBatch batch, long lineNumber,
        CancellationToken cancellationToken)
    {
        try
        {
            await store.WriteAsync(batch, cancellationToken).ConfigureAwait(false);
            return batch.Count;
        }
        catch (ArgumentException e)
        {
            throw new ToolException($"the documents up to line {lineNumber} were refused: {e.Message}");
        }
    }
}
