using System.CommandLine;

namespace Folio.Tool;

/// <summary><c>folio export &lt;store&gt;</c>: every document as NDJSON on standard output, in collection and id order
/// (<see cref="NdjsonLine"/>), each collection from one snapshot.</summary>
internal static class ExportCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var command = new Command("export", "Write every document as NDJSON to standard output.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!);
            await using var output = new NdjsonOutput();
            foreach (string collection in opened.GetCollections())
            {
                foreach (StoredDocument document in opened.Scan(collection))
                {
                    cancellationToken.ThrowIfCancellationRequested();
                    NdjsonLine.WriteDocument(output.Json, document);
                    output.EndLine();
                }
            }

            return 0;
        }));
        return command;
    }
}
