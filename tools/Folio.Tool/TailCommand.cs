using System.CommandLine;

namespace Folio.Tool;

/// <summary><c>folio tail &lt;store&gt; [--from &lt;sequence&gt;] [--follow]</c>: the change feed from a commit to the
/// last one (or, with <c>--follow</c>, on as new commits come), as NDJSON on standard output
/// (<see cref="NdjsonLine"/>). It reads the journal's files (<see cref="DocumentChanges.ReadFilesAsync"/>), so it
/// works while a service has the store open.</summary>
internal static class TailCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var from = new Option<long?>("--from")
        {
            Description = "The first commit to show (default: the oldest the journal still holds).",
        };
        var follow = new Option<bool>("--follow", "-f")
        {
            Description = "Keep waiting for new commits (until interrupted) instead of ending at the last one.",
        };
        var command = new Command("tail",
            "Write the change feed as NDJSON, from a commit to the last one; reads a store another process has open.")
        {
            store, from, follow,
        };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string path = ToolStore.RequireStore(parse.GetValue(store)!);
            long first = parse.GetValue(from) ?? 1;
            if (first < 1)
            {
                throw new ToolException($"--from must be 1 or more, not {first}");
            }

            bool following = parse.GetValue(follow);
            await using var output = new NdjsonOutput();
            using ClosedOutputWatch? watch = following ? new ClosedOutputWatch(cancellationToken) : null;
            while (true)
            {
                try
                {
                    await WriteChangesAsync(path, first, following, output, watch?.Token ?? cancellationToken)
                        .ConfigureAwait(false);
                    break;
                }
                catch (JournalPositionPurgedException e) when (parse.GetValue(from) is null && !output.Written)
                {
                    first = e.FirstAvailableSequence; // purged as tail started: from the oldest segment left
                }
                catch (OperationCanceledException) when (watch is { OutputClosed: true }
                    && !cancellationToken.IsCancellationRequested)
                {
                    throw output.ReaderGone(); // waiting for commits with nobody left to read them
                }
            }

            return 0;
        }));
        return command;
    }

    private static async Task WriteChangesAsync(string path, long first, bool follow, NdjsonOutput output,
        CancellationToken cancellationToken)
    {
        await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(path, first, follow, cancellationToken)
            .ConfigureAwait(false))
        {
            NdjsonLine.WriteChange(output.Json, change);
            output.EndLine();
            if (follow)
            {
                await output.FlushAsync().ConfigureAwait(false);
            }
        }
    }
}
