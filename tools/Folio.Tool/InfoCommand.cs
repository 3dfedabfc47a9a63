using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio info &lt;store&gt;</c>: format versions, sizes, free space, fill rate, checkpoint and journal
/// positions, the change-feed readers of its files, and every collection with its documents, read from the store's
/// files
/// (<see cref="DocumentStore.ReadInfoAsync"/>), so it works on a store another process has open.</summary>
internal static class InfoCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var command = new Command("info", "Show a store's formats, sizes, positions and collections.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            // Read from the files, so a store a running service holds can be described too.
            StoreInfo info = await DocumentStore.ReadInfoAsync(ToolStore.RequireStore(parse.GetValue(store)!),
                cancellationToken).ConfigureAwait(false);
            TextWriter output = Console.Out;
            CultureInfo c = CultureInfo.InvariantCulture;
            await output.WriteLineAsync(string.Create(c, $"store         {info.Path}")).ConfigureAwait(false);
            await output.WriteLineAsync(info.StoreId == Guid.Empty ? "store id      none (files from before store ids)"
                : string.Create(c, $"store id      {info.StoreId}")).ConfigureAwait(false);
            await output.WriteLineAsync(string.Create(c,
                $"data file     format {info.DataFileVersion}, {Mib(info.DataFileBytes)} "
                + $"({Mib(info.DataFileFreeBytes)} free between chunks), {info.Chunks} chunks, "
                + $"fill rate {info.FillRate:P0}")).ConfigureAwait(false);
            await output.WriteLineAsync(string.Create(c,
                $"journal       format {info.JournalVersion}, {Mib(info.JournalBytes)}, from sequence "
                + $"{info.JournalFirstSequence}")).ConfigureAwait(false);
            await output.WriteLineAsync(string.Create(c,
                $"checkpoint    generation {info.CheckpointGeneration}, sequence {info.CheckpointSequence}"))
                .ConfigureAwait(false);
            await output.WriteLineAsync(string.Create(c, $"last commit   {info.LastCommittedSequence}"))
                .ConfigureAwait(false);
            string readers = info.OldestFeedReaderSequence is long oldest
                ? string.Create(c, $"feed readers  {info.FeedReaders}, the oldest at sequence {oldest}")
                    + " (the journal is kept from there)"
                : "feed readers  none";
            await output.WriteLineAsync(readers).ConfigureAwait(false);
            await output.WriteLineAsync(string.Create(c, $"collections   {info.Collections.Count}"))
                .ConfigureAwait(false);
            foreach (CollectionInfo collection in info.Collections)
            {
                string line = string.Create(c, $"  {collection.Name}  {collection.Documents:N0} documents");
                await output.WriteLineAsync(line).ConfigureAwait(false);
            }

            return 0;
        }));
        return command;
    }

    private static string Mib(long bytes) => string.Create(CultureInfo.InvariantCulture, $"{bytes / 1048576.0:F1} MiB");
}
