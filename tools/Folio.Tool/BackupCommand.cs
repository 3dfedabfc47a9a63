using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio backup &lt;store&gt; &lt;backup-file&gt;</c>: a consistent backup into a new file, read from the
/// store's files (<see cref="DocumentStore.BackupFilesAsync(string, string, IProgress{long}, CancellationToken)"/>): it
/// never writes to the store, and backs up a store a service holds. The file appears under its name only once it is
/// whole and durable.</summary>
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
        var command = new Command("backup", "Back up a store into a new file.") { store, file, from };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string folder = ToolStore.RequireStore(parse.GetValue(store)!);
            string path = Path.GetFullPath(parse.GetValue(file)!);
            var display = new ProgressDisplay("backup", ToolStore.FileBytes(folder));

            // Written under a partial name, fsynced, renamed once whole and the folder fsynced (by the library, which
            // also refuses a file that exists): a killed backup leaves the partial file, never a file under the
            // backup's name that is not a whole backup.
            BackupResult result = parse.GetValue(from) is long first
                ? await DocumentStore.BackupFilesAsync(folder, path, first, display, cancellationToken)
                    .ConfigureAwait(false)
                : await DocumentStore.BackupFilesAsync(folder, path, display, cancellationToken).ConfigureAwait(false);
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
