using System.CommandLine;

namespace Folio.Tool;

/// <summary><c>folio tail &lt;store&gt; [--from &lt;sequence&gt;]</c>: the change feed from a commit to the last one,
/// as NDJSON on standard output (<see cref="NdjsonLine"/>).</summary>
internal static class TailCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var from = new Option<long?>("--from")
        {
            Description = "The first commit to show (default: the oldest the journal still holds).",
        };
        var command = new Command("tail", "Write the change feed as NDJSON, from a commit to the last one.")
        {
            store, from,
        };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!);
            long last = opened.LastCommittedSequence;
            long first = parse.GetValue(from) ?? opened.Changes.FirstSequence;
            if (first < 1)
            {
                throw new ToolException($"--from must be 1 or more, not {first}");
            }

            await using var output = new NdjsonOutput();
            await foreach (DocumentChange change in opened.Changes.ReadAsync(first, last, cancellationToken)
                .ConfigureAwait(false))
            {
                NdjsonLine.WriteChange(output.Json, change);
                output.EndLine();
            }

            return 0;
        }));
        return command;
    }
}
