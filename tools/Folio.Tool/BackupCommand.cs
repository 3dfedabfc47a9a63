using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio backup &lt;store&gt; &lt;backup-file&gt; [--from N] [--max-rate MiB]</c>: a consistent backup into
/// a new file, read from the store's files
/// (<see cref="DocumentStore.BackupFilesAsync(string, string, BackupFilesOptions, CancellationToken)"/>): it never
/// writes to the store, and backs up a store a service holds, at the pace given (the store's default pace unless
/// told). The file appears under its name only once it is whole and durable.</summary>
internal static class BackupCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var file = new Argument<string>("backup-file") { Description = "The backup file to create (must not exist)." };
        var from = new Option<long?>("--from")
        {
            Description = "An incremental backup: the commits from this sequence on (the previous backup's last + 1).",
        };
        var maxRate = new Option<long>("--max-rate")
        {
            Description = "The most MiB the backup writes per second, so a service committing to the store keeps its "
                + "disk (0: no limit).",
            DefaultValueFactory = _ => DocumentStoreOptions.DefaultBackupBytesPerSecond >> 20,
        };
        var command = new Command("backup", "Back up a store into a new file.") { store, file, from, maxRate };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string folder = ToolStore.RequireStore(parse.GetValue(store)!);
            string path = Path.GetFullPath(parse.GetValue(file)!);
            var display = new ProgressDisplay("backup", ToolStore.FileBytes(folder));

            // Written under a partial name, fsynced, renamed once whole and the folder fsynced (by the library, which
            // also refuses a file that exists): a killed backup leaves the partial file, never a file under the
            // backup's name that is not a whole backup.
            long rate = parse.GetValue(maxRate);
            if (rate < 0 || rate > long.MaxValue >> 20)
            {
                throw new ToolException($"--max-rate must be 0 (no limit) or a number of MiB per second, not {rate}.");
            }

            var options = new BackupFilesOptions
            {
                FromSequence = parse.GetValue(from),
                BytesPerSecond = rate << 20,
                Progress = display,
            };
            BackupResult result = await DocumentStore.BackupFilesAsync(folder, path, options, cancellationToken)
                .ConfigureAwait(false);
            display.Complete();
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"backed up to {path}: sequence {result.Sequence} (checkpoint {result.CheckpointSequence}, "
                + $"{result.Chunks} chunks, {result.Entries} journal entries), {result.Bytes} bytes"))
                .ConfigureAwait(false);
            return 0;
        }));
        return command;
    }
}
