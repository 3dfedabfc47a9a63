using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio restore &lt;backup-file&gt; &lt;new-store-folder&gt; [--to-sequence N | --to-time T]</c>: a
/// verified restore, to a point in time if asked.</summary>
internal static class RestoreCommand
{
    public static Command Create()
    {
        var file = new Argument<string>("backup-file") { Description = "A file written by 'folio backup'." };
        var folder = new Argument<string>("new-store-folder")
        {
            Description = "The restored store's folder (must not exist or be empty).",
        };
        var toSequence = new Option<long?>("--to-sequence")
        {
            Description = "Restore the store as it was after this commit.",
        };
        var toTime = new Option<DateTimeOffset?>("--to-time")
        {
            Description = "Restore the store as it was at this time (ISO 8601, for example 2026-11-26T10:00:00Z).",
        };
        var increments = new Option<string[]>("--increment")
        {
            Description = "An incremental backup to apply after the full one (repeat, in the order taken).",
        };
        var command = new Command("restore", "Restore a backup into a new store folder, verified before it is "
            + "moved into place.") { file, folder, toSequence, toTime, increments };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            List<string> sources = [Path.GetFullPath(parse.GetValue(file)!)];
            sources.AddRange((parse.GetValue(increments) ?? []).Select(Path.GetFullPath));
            long total = 0;
            foreach (string source in sources)
            {
                if (!File.Exists(source))
                {
                    throw new ToolException($"no backup file at '{source}'");
                }

                total += new FileInfo(source).Length;
            }

            var display = new ProgressDisplay("restore", total);
            var options = new RestoreOptions
            {
                ToSequence = parse.GetValue(toSequence),
                ToTimestamp = parse.GetValue(toTime),
                Progress = display,
            };
            RestoreResult result = await DocumentStore.RestoreAsync(sources, parse.GetValue(folder)!, options,
                cancellationToken).ConfigureAwait(false);
            display.Complete();
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"restored to {Path.GetFullPath(parse.GetValue(folder)!)}: sequence {result.Sequence}, "
                + $"{result.Documents} documents, verified")).ConfigureAwait(false);
            return 0;
        }));
        return command;
    }
}
