using System.CommandLine;

namespace Folio.Tool;

/// <summary><c>folio export &lt;store&gt;</c>: every document as NDJSON on standard output, in collection and id order
/// (<see cref="NdjsonLine"/>), as of one commit, read from the store's files
/// (<see cref="DocumentStore.ScanFilesAsync"/>): it never writes to the store, and works while a service holds it.
/// </summary>
internal static class ExportCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var command = new Command("export", "Write every document as NDJSON to standard output.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string path = ToolStore.RequireStore(parse.GetValue(store)!);
            StoreInfo info = await DocumentStore.ReadInfoAsync(path, cancellationToken).ConfigureAwait(false);
            long total = 0;
            foreach (CollectionInfo collection in info.Collections)
            {
                total += collection.Documents;
            }

            // The total is the store's a moment before the export's own commit: close enough for a progress bar.
            var display = new ProgressDisplay("export", total, "documents");
            long exported = 0;
            await using (var output = new NdjsonOutput())
            {
                await foreach (StoredDocument document in DocumentStore.ScanFilesAsync(path, cancellationToken)
                    .ConfigureAwait(false))
                {
                    NdjsonLine.WriteDocument(output.Json, document);
                    output.EndLine();
                    if ((++exported & 1023) == 0)
                    {
                        display.Report(exported);
                    }
                }
            }

            display.Complete(exported);
            return 0;
        }));
        return command;
    }
}
