using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio compact &lt;store&gt;</c>: rewrites the data file's sparse chunks and gives the free end of the
/// file back (<see cref="DocumentStore.CompactAsync"/>).</summary>
internal static class CompactCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var command = new Command("compact", "Rewrite a store's sparse chunks and give free space back.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!);
            CompactionResult result = await opened.CompactAsync(cancellationToken);
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"compacted: {result.ChunksRewritten} chunks rewritten ({result.PagesRewritten} pages), data file "
                + $"{result.DataFileBytesBefore / 1048576.0:F1} MiB -> {result.DataFileBytesAfter / 1048576.0:F1} MiB, "
                + $"fill rate {result.FillRate:P0}"));
            return 0;
        }));
        return command;
    }
}
