using System.CommandLine;
using System.Text.Json;

namespace Folio.Tool;

/// <summary><c>folio export &lt;store&gt;</c>: every document as NDJSON on standard output, in collection and id order
/// (<see cref="NdjsonLine"/>), each collection from one snapshot.</summary>
internal static class ExportCommand
{
    public static Command Create()
    {
        var store = new Argument<string>("store") { Description = "The store's folder." };
        var command = new Command("export", "Write every document as NDJSON to standard output.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!);
            Stream output = Console.OpenStandardOutput();
            await using (output.ConfigureAwait(false))
            {
                var buffered = new BufferedStream(output, 1 << 16);
                await using (buffered.ConfigureAwait(false))
                {
                    await using var writer = new Utf8JsonWriter(buffered);
                    foreach (string collection in opened.GetCollections())
                    {
                        foreach (StoredDocument document in opened.Scan(collection))
                        {
                            cancellationToken.ThrowIfCancellationRequested();
                            NdjsonLine.WriteDocument(writer, document);
                            await writer.FlushAsync(cancellationToken).ConfigureAwait(false);
                            writer.Reset();
                            buffered.WriteByte((byte)'\n');
                        }
                    }
                }
            }

            return 0;
        }));
        return command;
    }
}
