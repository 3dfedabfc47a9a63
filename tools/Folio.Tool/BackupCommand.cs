using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio backup &lt;store&gt; &lt;backup-file&gt;</c>: a consistent backup into a new file, read from the
/// store's files (<see cref="DocumentStore.BackupFilesAsync(string, Stream, CancellationToken)"/>): it never writes to
/// the store, and backs up a store a service holds. The file appears under its name only once it is whole.</summary>
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
            BackupResult result;
            if (File.Exists(path))
            {
                throw new ToolException($"the backup file '{path}' already exists");
            }

            // Written under a partial name and renamed once whole and fsynced: a killed backup leaves the partial
            // file, never a file under the backup's name that is not a whole backup.
            string partial = $"{path}.partial-{Guid.NewGuid().ToString("N")[..8]}";
            var output = new FileStream(partial, FileMode.CreateNew, FileAccess.Write, FileShare.None, 0,
                FileOptions.Asynchronous);
            try
            {
                await using (output.ConfigureAwait(false))
                {
                    var counting = new CountingStream(output, display);
                    result = parse.GetValue(from) is long first
                        ? await DocumentStore.BackupFilesAsync(folder, counting, first, cancellationToken)
                            .ConfigureAwait(false)
                        : await DocumentStore.BackupFilesAsync(folder, counting, cancellationToken)
                            .ConfigureAwait(false);
                    output.Flush(flushToDisk: true);
                }

                File.Move(partial, path, overwrite: false);
            }
            catch
            {
                File.Delete(partial);
                throw;
            }

            display.Complete();
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"backed up to {path}: sequence {result.Sequence} (checkpoint {result.CheckpointSequence}, "
                + $"{result.Chunks} chunks, {result.Entries} journal entries), {result.Bytes} bytes"))
                .ConfigureAwait(false);
            return 0;
        }));
        return command;
    }

    /// <summary>Passes writes to a stream and reports the bytes written so far.</summary>
    private sealed class CountingStream(Stream inner, IProgress<long> progress) : Stream
    {
        private long _written;

        public override bool CanRead => false;

        public override bool CanSeek => false;

        public override bool CanWrite => true;

        public override long Length => throw new NotSupportedException();

        public override long Position
        {
            get => throw new NotSupportedException();
            set => throw new NotSupportedException();
        }

        public override void Flush() => inner.Flush();

        public override Task FlushAsync(CancellationToken cancellationToken) => inner.FlushAsync(cancellationToken);

        public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException();

        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

        public override void SetLength(long value) => throw new NotSupportedException();

        public override void Write(byte[] buffer, int offset, int count)
        {
            inner.Write(buffer, offset, count);
            Count(count);
        }

        public override async ValueTask WriteAsync(ReadOnlyMemory<byte> buffer,
            CancellationToken cancellationToken = default)
        {
            await inner.WriteAsync(buffer, cancellationToken).ConfigureAwait(false);
            Count(buffer.Length);
        }

        private void Count(int bytes)
        {
            _written += bytes;
            progress.Report(_written);
        }
    }
}
