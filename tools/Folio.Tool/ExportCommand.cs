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
        var skipDamaged = new Option<bool>("--skip-damaged")
        {
            Description = "Salvage a damaged store: skip the documents its data file cannot give back, name each "
                + "range on standard error, and exit with the damaged code (import the rest into a new store).",
        };
        var command = new Command("export", "Write every document as NDJSON to standard output.")
        {
            store, skipDamaged,
        };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string path = ToolStore.RequireStore(parse.GetValue(store)!);
            bool salvage = parse.GetValue(skipDamaged);
            long total = 0;
            try
            {
                StoreInfo info = await DocumentStore.ReadInfoAsync(path, cancellationToken).ConfigureAwait(false);
                foreach (CollectionInfo collection in info.Collections)
                {
                    total += collection.Documents;
                }
            }
            catch (StoreCorruptedException) when (salvage)
            {
                // The counts need the journal whole; a salvage reads past its damage, without a total to show.
            }

            // The total is the store's a moment before the export's own commit: close enough for a progress bar.
            var display = new ProgressDisplay("export", total, "documents");
            long exported = 0;
            long skipped = 0;
            IAsyncEnumerable<StoredDocument> documents = salvage
                ? DocumentStore.SalvageFilesAsync(path, damage =>
                {
                    skipped++;
                    Console.Error.WriteLine($"folio: skipped {Describe(damage)}");
                }, cancellationToken)
                : DocumentStore.ScanFilesAsync(path, cancellationToken);
            await using (var output = new NdjsonOutput())
            {
                await foreach (StoredDocument document in documents.ConfigureAwait(false))
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
            if (skipped > 0)
            {
                await Console.Error.WriteLineAsync(
                    $"folio: exported {exported} documents; skipped {skipped} damaged ranges").ConfigureAwait(false);
                return ToolStore.Damaged;
            }

            return 0;
        }));
        return command;
    }

    /// <summary>One line naming the documents a damaged page held, or the commits a damaged journal record held, and
    /// where the damage lies.</summary>
    private static string Describe(DamagedRange damage)
    {
        string error = damage.Error.Message.ReplaceLineEndings(" ");
        if (damage.Collection is null)
        {
            string last = damage.ToSequence == long.MaxValue ? "the journal's end" : $"{damage.ToSequence}";
            return $"commits {damage.FromSequence} to {last} (the documents they wrote may be missing, older, or still "
                + $"there though deleted): {error}";
        }

        string range = damage.ToId == damage.FromId + "\0" ? $"document '{damage.FromId}'"
            : $"documents from {(damage.FromId is null ? "the first" : $"'{damage.FromId}'")} to before "
            + (damage.ToId is null ? "the end" : $"'{damage.ToId}'");
        return $"{range} of collection '{damage.Collection}': {error}";
    }
}
