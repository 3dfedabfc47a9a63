using System.IO.Pipelines;
using Folio.Backups;
using Folio.Journal;
using Folio.Pages;

namespace Folio;

/// <summary>
/// Operations on a whole store while it serves traffic: online backup, restore into a new folder, and a scrub of every
/// checksum.
/// <para>
/// Ownership: each call is one operation, registered in <see cref="_operations"/> under <see cref="_operationsLock"/>
/// (with the check that the store is open, so a close sees every operation that started). A close cancels them
/// (<see cref="_closing"/>) and waits for each to end before it releases the pins and holds they keep on the data file
/// and the journal, and before it closes the files they read. An operation runs the caller's code (a backup's
/// destination, a scrub's progress) inside its own flow, marked by <see cref="_inOperation"/> (an async local, so
/// only code the operation calls or starts sees it); a close from there cannot wait for the operation, so it does
/// not: it is completed by the operation's end (see <see cref="Dispose"/>).
/// </para>
/// </summary>
public sealed partial class DocumentStore
{
    private readonly Lock _operationsLock = new();
    private readonly HashSet<Task> _operations = [];
    private readonly CancellationTokenSource _closing = new();
    private readonly AsyncLocal<Task?> _inOperation = new(); // the operation's completion, unfinished while it runs

    /// <summary>Whether the caller runs inside one of this store's operations that has not ended yet (its callbacks
    /// included; not work they started that outlives the operation).</summary>
    private bool InOwnOperation => _inOperation.Value is { IsCompleted: false };

    /// <summary>How a restore reads a stream: reads of up to 256 KiB (a backup frame); the stream is left
    /// open.</summary>
    private static readonly StreamPipeReaderOptions s_backupReaderOptions =
        new(bufferSize: 256 * 1024, minimumReadSize: 64 * 1024, leaveOpen: true);

    /// <summary>
    /// Writes a consistent backup of the store into <paramref name="destination"/> while commits and reads go on: the
    /// data file's newest checkpoint (its chunks, copied as they lie on disk) and the journal's committed entries after
    /// it, so the backup is the store as of one sequence (<see cref="BackupResult.Sequence"/>). Every frame carries a
    /// checksum and the stream ends with a manifest; <see cref="RestoreAsync(PipeReader, string, RestoreOptions?,
    /// CancellationToken)"/> refuses a backup that is cut short or damaged. The backup honours the pipe's
    /// backpressure: a slow destination slows the backup, never grows the store's memory. While it runs, journal
    /// segments it still has to copy are not purged and the checkpoint it copies stays on disk.
    /// </summary>
    /// <param name="destination">Where the backup goes; not completed by this call (the caller owns it).</param>
    /// <param name="cancellationToken">Cancels the backup (what was written is then not a complete backup).</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="IOException">The destination stopped reading, or a store file could not be read.</exception>
    /// <exception cref="StoreCorruptedException">A chunk the backup copies is damaged.</exception>
    /// <exception cref="ObjectDisposedException">The store is closed, or was closed during the backup.</exception>
    public ValueTask<BackupResult> BackupAsync(PipeWriter destination, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(destination);
        return RunOperationAsync(token => BackupWriter.WriteAsync(_journal, _pages, destination,
            Options.BackupBytesPerSecond, TimeProvider.System, token), cancellationToken);
    }

    /// <summary>
    /// Writes an incremental backup into <paramref name="destination"/>: the journal's committed entries from
    /// <paramref name="fromSequence"/> on (pass the previous backup's <see cref="BackupResult.Sequence"/> + 1). A
    /// restore applies it after that backup (<see cref="RestoreAsync(IReadOnlyList{string}, string, RestoreOptions?,
    /// CancellationToken)"/>: the full backup first, then every increment in order). The journal must still hold
    /// <paramref name="fromSequence"/>: checkpoints purge the segments they cover, so take increments more often than
    /// the journal after a checkpoint fills a segment, or take a full backup.
    /// </summary>
    /// <param name="destination">Where the backup goes; not completed by this call.</param>
    /// <param name="fromSequence">The first commit to include; at most the last commit + 1 (an empty
    /// increment).</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds (<see cref="BackupResult.CheckpointSequence"/>: the sequence it follows
    /// on from).</returns>
    /// <exception cref="JournalPositionPurgedException">The journal no longer holds
    /// <paramref name="fromSequence"/>: take a full backup.</exception>
    public ValueTask<BackupResult> BackupAsync(PipeWriter destination, long fromSequence,
        CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(destination);
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        return RunOperationAsync(token => BackupWriter.WriteIncrementAsync(_journal, fromSequence, destination,
            Options.BackupBytesPerSecond, TimeProvider.System, token), cancellationToken);
    }

    /// <summary>Writes an incremental backup into a new file (fsynced, and renamed from a partial name once whole, as
    /// <see cref="BackupAsync(string, CancellationToken)"/>); see
    /// <see cref="BackupAsync(PipeWriter, long, CancellationToken)"/>.</summary>
    /// <param name="backupFile">The file to create; it must not exist (a missing folder is created).</param>
    /// <param name="fromSequence">The first commit to include.</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    public ValueTask<BackupResult> BackupAsync(string backupFile, long fromSequence,
        CancellationToken cancellationToken = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        return BackupToFileAsync(backupFile, fromSequence, cancellationToken);
    }

    /// <summary>
    /// Writes a full backup of the store in <paramref name="folder"/> into <paramref name="destination"/> (left open),
    /// read from the store's files without opening it: no lock on the store is taken and none of its files is written,
    /// so it backs up a store another process has open and keeps committing (what <c>folio backup</c> uses). The
    /// backup has the format of <see cref="BackupAsync(PipeWriter, CancellationToken)"/>: the data file's newest
    /// checkpoint and the journal's complete, durable commits after it, as they are when the backup starts. While it
    /// runs, a pin file in the store's <c>readers</c> folder keeps the writing process from freeing the chunks it
    /// copies (see <see cref="ScanFilesAsync"/>), and the journal's entries are first copied into a temporary file
    /// (in <see cref="Path.GetTempPath"/>, deleted at the end), since the writer may purge them meanwhile.
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="Open"/>).</param>
    /// <param name="destination">A writable stream.</param>
    /// <param name="cancellationToken">Cancels the backup (what was written is then not a complete backup).</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    /// <exception cref="StoreCorruptedException">A chunk the backup copies is damaged.</exception>
    /// <exception cref="JournalCorruptedException">A journal record the backup copies is damaged.</exception>
    /// <exception cref="IOException">The destination stopped reading, or a store file could not be read.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, Stream destination,
        CancellationToken cancellationToken = default) =>
        BackupFilesToStreamAsync(folder, destination, new BackupFilesOptions(), cancellationToken);

    /// <summary>Writes an incremental backup of the store in <paramref name="folder"/> from its files (see
    /// <see cref="BackupFilesAsync(string, Stream, CancellationToken)"/>): the journal's complete, durable commits from
    /// <paramref name="fromSequence"/> on, as <see cref="BackupAsync(PipeWriter, long, CancellationToken)"/>
    /// writes them.</summary>
    /// <param name="folder">The store's folder.</param>
    /// <param name="destination">A writable stream.</param>
    /// <param name="fromSequence">The first commit to include (the previous backup's last + 1).</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="JournalPositionPurgedException">The journal no longer holds
    /// <paramref name="fromSequence"/>: take a full backup.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, Stream destination, long fromSequence,
        CancellationToken cancellationToken = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        return BackupFilesToStreamAsync(folder, destination, new BackupFilesOptions { FromSequence = fromSequence },
            cancellationToken);
    }

    /// <summary>Writes a backup of the store in <paramref name="folder"/> from its files (see
    /// <see cref="BackupFilesAsync(string, Stream, CancellationToken)"/>), full or incremental and at the pace
    /// <paramref name="options"/> give.</summary>
    /// <param name="folder">The store's folder.</param>
    /// <param name="destination">A writable stream.</param>
    /// <param name="options">Incremental or not, pace, progress (bytes written so far).</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="JournalPositionPurgedException">The journal no longer holds
    /// <see cref="BackupFilesOptions.FromSequence"/>: take a full backup.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, Stream destination,
        BackupFilesOptions options, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        ArgumentNullException.ThrowIfNull(destination);
        return BackupFilesToStreamAsync(folder,
            options.Progress is null ? destination : new Backups.ProgressStream(destination, options.Progress),
            options, cancellationToken);
    }

    /// <summary>
    /// Writes a full backup of the store in <paramref name="folder"/>, read from its files (see
    /// <see cref="BackupFilesAsync(string, Stream, CancellationToken)"/>: no lock taken, nothing of the store written),
    /// into a new file made durable before the call returns, as <see cref="BackupAsync(string, CancellationToken)"/>
    /// writes one: under <c>&lt;backupFile&gt;.partial-&lt;random&gt;</c>, fsynced, renamed once whole, and the folder
    /// fsynced, so a failed backup leaves no file and a killed one only that partial file. What <c>folio backup</c>
    /// uses.
    /// </summary>
    /// <param name="folder">The store's folder.</param>
    /// <param name="backupFile">The file to create; it must not exist (a missing folder is created).</param>
    /// <param name="progress">Receives the bytes written so far; null: none.</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    /// <exception cref="IOException">The file exists, or writing it failed (a full disk, for one).</exception>
    /// <exception cref="StoreCorruptedException">A chunk the backup copies is damaged (its metadata or a page fails
    /// its checks); no file is left.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, string backupFile,
        IProgress<long>? progress = null, CancellationToken cancellationToken = default) =>
        BackupFilesAsync(folder, backupFile, new BackupFilesOptions { Progress = progress }, cancellationToken);

    /// <summary>Writes an incremental backup of the store in <paramref name="folder"/> from its files into a new file
    /// (see <see cref="BackupFilesAsync(string, string, IProgress{long}, CancellationToken)"/>): the journal's
    /// complete, durable commits from <paramref name="fromSequence"/> on.</summary>
    /// <param name="folder">The store's folder.</param>
    /// <param name="backupFile">The file to create; it must not exist (a missing folder is created).</param>
    /// <param name="fromSequence">The first commit to include (the previous backup's last + 1).</param>
    /// <param name="progress">Receives the bytes written so far; null: none.</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="JournalPositionPurgedException">The journal no longer holds
    /// <paramref name="fromSequence"/>: take a full backup.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, string backupFile, long fromSequence,
        IProgress<long>? progress = null, CancellationToken cancellationToken = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        return BackupFilesAsync(folder, backupFile,
            new BackupFilesOptions { FromSequence = fromSequence, Progress = progress }, cancellationToken);
    }

    /// <summary>Writes a backup of the store in <paramref name="folder"/> from its files into a new file (see
    /// <see cref="BackupFilesAsync(string, string, IProgress{long}, CancellationToken)"/>), full or incremental and at
    /// the pace <paramref name="options"/> give. What <c>folio backup</c> uses.</summary>
    /// <param name="folder">The store's folder.</param>
    /// <param name="backupFile">The file to create; it must not exist (a missing folder is created).</param>
    /// <param name="options">Incremental or not, pace, progress (bytes written so far).</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="JournalPositionPurgedException">The journal no longer holds
    /// <see cref="BackupFilesOptions.FromSequence"/>: take a full backup.</exception>
    public static ValueTask<BackupResult> BackupFilesAsync(string folder, string backupFile,
        BackupFilesOptions options, CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        return WriteBackupFileAsync(backupFile, Storage.PhysicalFileSystem.Instance, options.Progress,
            stream => BackupFilesToStreamAsync(folder, stream, options, cancellationToken));
    }

    private static async ValueTask<BackupResult> BackupFilesToStreamAsync(string folder, Stream destination,
        BackupFilesOptions options, CancellationToken cancellationToken)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        ArgumentNullException.ThrowIfNull(destination);
        PipeWriter writer = PipeWriter.Create(destination, new StreamPipeWriterOptions(leaveOpen: true));
        try
        {
            BackupResult result = await BackupWriter.WriteFromFilesAsync(folder, writer, options.FromSequence,
                options.BytesPerSecond, TimeProvider.System, cancellationToken).ConfigureAwait(false);
            await writer.CompleteAsync().ConfigureAwait(false);
            return result;
        }
        catch (Exception e)
        {
            await writer.CompleteAsync(e).ConfigureAwait(false);
            throw;
        }
    }

    /// <summary>Writes a backup into <paramref name="destination"/> (left open); see
    /// <see cref="BackupAsync(PipeWriter, CancellationToken)"/>.</summary>
    /// <param name="destination">A writable stream.</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    public ValueTask<BackupResult> BackupAsync(Stream destination, CancellationToken cancellationToken = default) =>
        BackupToStreamAsync(destination, null, cancellationToken);

    /// <summary>Writes an incremental backup into <paramref name="destination"/> (left open); see
    /// <see cref="BackupAsync(PipeWriter, long, CancellationToken)"/>.</summary>
    /// <param name="destination">A writable stream.</param>
    /// <param name="fromSequence">The first commit to include.</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    public ValueTask<BackupResult> BackupAsync(Stream destination, long fromSequence,
        CancellationToken cancellationToken = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        return BackupToStreamAsync(destination, fromSequence, cancellationToken);
    }

    private async ValueTask<BackupResult> BackupToStreamAsync(Stream destination, long? fromSequence,
        CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(destination);
        PipeWriter writer = PipeWriter.Create(destination, new StreamPipeWriterOptions(leaveOpen: true));
        try
        {
            BackupResult result = fromSequence is long from
                ? await BackupAsync(writer, from, cancellationToken).ConfigureAwait(false)
                : await BackupAsync(writer, cancellationToken).ConfigureAwait(false);
            await writer.CompleteAsync().ConfigureAwait(false);
            return result;
        }
        catch (Exception e)
        {
            await writer.CompleteAsync(e).ConfigureAwait(false);
            throw;
        }
    }

    /// <summary>Writes a backup into a new file, made durable (fsync) before the call returns. The file is written as
    /// <c>&lt;backupFile&gt;.partial-&lt;random&gt;</c> and renamed once whole, so a failed backup leaves no file and
    /// a killed one only that partial file. See <see cref="BackupAsync(PipeWriter, CancellationToken)"/>.</summary>
    /// <param name="backupFile">The file to create; it must not exist (a missing folder is created).</param>
    /// <param name="cancellationToken">Cancels the backup.</param>
    /// <returns>What the backup holds.</returns>
    /// <exception cref="IOException">The file exists, or writing it failed (a full disk, for one).</exception>
    public ValueTask<BackupResult> BackupAsync(string backupFile, CancellationToken cancellationToken = default) =>
        BackupToFileAsync(backupFile, null, cancellationToken);

    private ValueTask<BackupResult> BackupToFileAsync(string backupFile, long? fromSequence,
        CancellationToken cancellationToken) =>
        WriteBackupFileAsync(backupFile, Options.FileSystem, progress: null,
            stream => BackupToStreamAsync(stream, fromSequence, cancellationToken));

    /// <summary>What a backup file's partial name adds to it, before a random part.</summary>
    internal const string PartialBackupInfix = ".partial-";

    /// <summary>
    /// Deletes the partial files that killed backups into <paramref name="path"/> left. A backup holds its partial
    /// file open with <see cref="FileShare.None"/> while it runs (an exclusive lock: <c>flock</c> on Unix, a sharing
    /// mode on Windows), so a partial file that can be opened the same way belongs to no running backup, in this
    /// process or another.
    /// </summary>
    private static void DeleteAbandonedPartialFiles(string folder, string path)
    {
        foreach (string partial in Directory.EnumerateFiles(folder,
            System.IO.Path.GetFileName(path) + PartialBackupInfix + "*"))
        {
            try
            {
                using (new FileStream(partial, FileMode.Open, FileAccess.ReadWrite, FileShare.None))
                {
                }

                File.Delete(partial);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // Held by a backup still running, gone already, or not ours to delete: left alone.
            }
        }
    }

    /// <summary>Writes a backup (<paramref name="write"/>) into <c>&lt;file&gt;.partial-&lt;random&gt;</c> (its folder
    /// created when missing), fsyncs it, and only then renames it to <paramref name="backupFile"/> and fsyncs the
    /// folder: a backup that fails deletes its partial file, and one whose process is killed leaves that partial file
    /// (the next backup into the same file deletes it), never a file under the backup's name that is not a whole
    /// backup, and a backup that returned keeps its name through a power cut.</summary>
    private static async ValueTask<BackupResult> WriteBackupFileAsync(string backupFile,
        Storage.IFileSystem fileSystem, IProgress<long>? progress, Func<Stream, ValueTask<BackupResult>> write)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(backupFile);
        string path = System.IO.Path.GetFullPath(backupFile);
        if (File.Exists(path))
        {
            throw new IOException($"The backup file '{path}' already exists.");
        }

        string folder = System.IO.Path.GetDirectoryName(path)!;
        if (!Directory.Exists(folder))
        {
            // A new folder for the backups, as a restore makes its target's: its entry made durable with the file's.
            fileSystem.CreateDirectory(folder);
            if (System.IO.Path.GetDirectoryName(folder) is { } parent)
            {
                fileSystem.SyncDirectory(parent);
            }
        }

        DeleteAbandonedPartialFiles(folder, path);
        string partial = $"{path}{PartialBackupInfix}{Guid.NewGuid().ToString("N")[..8]}";
        var file = new FileStream(partial, FileMode.CreateNew, FileAccess.Write, FileShare.None, bufferSize: 0,
            FileOptions.Asynchronous);
        try
        {
            BackupResult result;
            await using (file.ConfigureAwait(false))
            {
                result = await write(progress is null ? file : new Backups.ProgressStream(file, progress))
                    .ConfigureAwait(false);
                file.Flush(flushToDisk: true);
            }

            File.Move(partial, path, overwrite: false);
            fileSystem.SyncDirectory(System.IO.Path.GetDirectoryName(path)!);
            return result;
        }
        catch
        {
            File.Delete(partial);
            throw;
        }
    }

    /// <summary>
    /// Restores a backup written by <see cref="BackupAsync(PipeWriter, CancellationToken)"/> into a new store in
    /// <paramref name="folder"/>, reading it from <paramref name="source"/> as it arrives. Every frame's checksum, the
    /// frames' order and the manifest are checked, the store is built beside the target, opened and verified (every
    /// page and journal record read back from disk) and only then moved into place: a restore leaves a verified store
    /// or nothing. With <see cref="RestoreOptions.ToSequence"/> or <see cref="RestoreOptions.ToTimestamp"/> it
    /// restores the store as it was at that point. The store is closed when this returns; open it with
    /// <see cref="Open"/>.
    /// </summary>
    /// <param name="source">The backup's bytes; read to its end, not completed by this call.</param>
    /// <param name="folder">The new store's folder: it must not exist or must be empty.</param>
    /// <param name="options">Point in time and progress; null: everything, no progress.</param>
    /// <param name="cancellationToken">Cancels the restore (nothing is left in the folder).</param>
    /// <returns>What was restored.</returns>
    /// <exception cref="BackupCorruptedException">The backup is cut short, damaged, or not a Folio backup.</exception>
    /// <exception cref="ArgumentOutOfRangeException">The point in time is outside what the backup holds.</exception>
    /// <exception cref="IOException">The folder is not new or empty, or writing the store failed.</exception>
    public static ValueTask<RestoreResult> RestoreAsync(PipeReader source, string folder,
        RestoreOptions? options = null, CancellationToken cancellationToken = default) =>
        RestoreAsync([source], folder, options, new DocumentStoreOptions(), cancellationToken);

    /// <summary>Restores a full backup and the incremental backups taken after it, read in order from
    /// <paramref name="sources"/> (the full one first); see
    /// <see cref="RestoreAsync(PipeReader, string, RestoreOptions?, CancellationToken)"/>. A point in time may lie
    /// anywhere from the full backup's checkpoint to the last increment's end.</summary>
    /// <param name="sources">The full backup, then each increment in the order taken.</param>
    /// <param name="folder">The new store's folder: it must not exist or must be empty.</param>
    /// <param name="options">Point in time and progress; null: everything, no progress.</param>
    /// <param name="cancellationToken">Cancels the restore.</param>
    /// <returns>What was restored.</returns>
    /// <exception cref="ArgumentException">The backups do not follow on from one another.</exception>
    public static ValueTask<RestoreResult> RestoreAsync(IReadOnlyList<PipeReader> sources, string folder,
        RestoreOptions? options = null, CancellationToken cancellationToken = default) =>
        RestoreAsync(sources, folder, options, new DocumentStoreOptions(), cancellationToken);

    /// <summary>Restores a full backup file and the incremental backup files taken after it, in order; see
    /// <see cref="RestoreAsync(IReadOnlyList{PipeReader}, string, RestoreOptions?, CancellationToken)"/>.</summary>
    /// <param name="backupFiles">The full backup's file, then each increment's in the order taken.</param>
    /// <param name="folder">The new store's folder: it must not exist or must be empty.</param>
    /// <param name="options">Point in time and progress; null: everything, no progress.</param>
    /// <param name="cancellationToken">Cancels the restore.</param>
    /// <returns>What was restored.</returns>
    public static async ValueTask<RestoreResult> RestoreAsync(IReadOnlyList<string> backupFiles, string folder,
        RestoreOptions? options = null, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(backupFiles);
        var files = new List<FileStream>();
        var readers = new List<PipeReader>();
        try
        {
            foreach (string backupFile in backupFiles)
            {
                ArgumentException.ThrowIfNullOrWhiteSpace(backupFile);
                var file = new FileStream(backupFile, FileMode.Open, FileAccess.Read, FileShare.Read, bufferSize: 0,
                    FileOptions.Asynchronous | FileOptions.SequentialScan);
                files.Add(file);
                readers.Add(PipeReader.Create(file, s_backupReaderOptions));
            }

            return await RestoreAsync(readers, folder, options, cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            foreach (PipeReader reader in readers)
            {
                await reader.CompleteAsync().ConfigureAwait(false);
            }

            foreach (FileStream file in files)
            {
                await file.DisposeAsync().ConfigureAwait(false);
            }
        }
    }

    /// <summary>Restores a backup read from <paramref name="source"/> (left open); see
    /// <see cref="RestoreAsync(PipeReader, string, RestoreOptions?, CancellationToken)"/>.</summary>
    /// <param name="source">A readable stream holding the backup.</param>
    /// <param name="folder">The new store's folder: it must not exist or must be empty.</param>
    /// <param name="options">Point in time and progress; null: everything, no progress.</param>
    /// <param name="cancellationToken">Cancels the restore.</param>
    /// <returns>What was restored.</returns>
    public static async ValueTask<RestoreResult> RestoreAsync(Stream source, string folder,
        RestoreOptions? options = null, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(source);
        PipeReader reader = PipeReader.Create(source, s_backupReaderOptions);
        try
        {
            return await RestoreAsync(reader, folder, options, cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            await reader.CompleteAsync().ConfigureAwait(false);
        }
    }

    /// <summary>Restores the backup in <paramref name="backupFile"/>; see
    /// <see cref="RestoreAsync(PipeReader, string, RestoreOptions?, CancellationToken)"/>.</summary>
    /// <param name="backupFile">A file written by <see cref="BackupAsync(string, CancellationToken)"/>.</param>
    /// <param name="folder">The new store's folder: it must not exist or must be empty.</param>
    /// <param name="options">Point in time and progress; null: everything, no progress.</param>
    /// <param name="cancellationToken">Cancels the restore.</param>
    /// <returns>What was restored.</returns>
    public static ValueTask<RestoreResult> RestoreAsync(string backupFile, string folder,
        RestoreOptions? options = null, CancellationToken cancellationToken = default) =>
        RestoreAsync([backupFile], folder, options, cancellationToken);

    /// <summary>Restores with the given store options (tests put a fault-injecting file system there).</summary>
    internal static async ValueTask<RestoreResult> RestoreAsync(IReadOnlyList<PipeReader> sources, string folder,
        RestoreOptions? options, DocumentStoreOptions storeOptions, CancellationToken cancellationToken)
    {
        ArgumentNullException.ThrowIfNull(sources);
        foreach (PipeReader source in sources)
        {
            ArgumentNullException.ThrowIfNull(source, nameof(sources));
        }

        ArgumentException.ThrowIfNullOrWhiteSpace(folder);
        options ??= new RestoreOptions();
        options.Validate();
        storeOptions.Validate();
        return await StoreRestorer.RestoreAsync(sources, folder, options, storeOptions, cancellationToken)
            .ConfigureAwait(false);
    }

    /// <summary>
    /// Compacts the data file now, while commits and reads go on: the commits made so far are checkpointed, then
    /// checkpoints rewrite the live pages of every chunk whose share of live pages is below
    /// <see cref="DocumentStoreOptions.CompactionFillRate"/> (or
    /// <see cref="DocumentStoreOptions.DefaultCompactionFillRate"/> when background compaction is off) into new
    /// chunks, each followed by one that frees the chunks it emptied, and the file's last chunks move into the free
    /// space before them so its free tail is given back. Each rewrite takes at most a quarter of the memory a
    /// checkpoint may use (see <see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/>), so a store far
    /// larger than memory compacts in many passes. A chunk an open reader's checkpoint still reaches (a long scan, a
    /// backup in progress) is freed by a later checkpoint.
    /// </summary>
    /// <param name="cancellationToken">Cancels while the call waits for a checkpoint already running.</param>
    /// <returns>What compaction did.</returns>
    /// <exception cref="IOException">A write or fsync of the data file failed; the previous checkpoint stays
    /// current.</exception>
    public async ValueTask<CompactionResult> CompactAsync(CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        double fill = Options.CompactionFillRate > 0 ? Options.CompactionFillRate
            : DocumentStoreOptions.DefaultCompactionFillRate;
        return await _checkpointer.CompactAsync(fill, cancellationToken).ConfigureAwait(false);
    }

    /// <summary>
    /// Scrubs the store in <paramref name="folder"/> from its files, without opening it: no lock is taken and nothing
    /// is written, so it checks a store another process has open and keeps writing (what <c>folio verify</c> uses).
    /// Reads every page of the data file's newest checkpoint and every complete record of the journal's segments from
    /// disk and checks every checksum and structure, as <see cref="VerifyAsync"/> does; a chunk or segment the writer
    /// frees or purges meanwhile is skipped, not reported. Problems are reported, not thrown.
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="Open"/>).</param>
    /// <param name="progress">Receives the bytes checked so far; null: none.</param>
    /// <param name="cancellationToken">Cancels the scrub.</param>
    /// <returns>What was checked and what failed.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    public static Task<VerifyResult> VerifyFilesAsync(string folder, IProgress<VerifyProgress>? progress = null,
        CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        return Task.Run(() => Folio.Backups.StoreFileVerifier.Verify(folder, progress, cancellationToken),
            cancellationToken);
    }

    /// <summary>
    /// Scrubs the store while it serves traffic: reads every page of the data file's current checkpoint and every
    /// committed journal record from disk (not from the cache) and checks every checksum and structure. Problems are
    /// reported, not thrown, so one damaged chunk or segment does not hide another. The data file's chunks are checked
    /// by one thread per core (<see cref="Environment.ProcessorCount"/>, at most four), the journal by one.
    /// </summary>
    /// <param name="progress">Receives the bytes checked so far; null: none.</param>
    /// <param name="cancellationToken">Cancels the scrub.</param>
    /// <returns>What was checked and what failed.</returns>
    /// <exception cref="ObjectDisposedException">The store is closed, or was closed during the scrub.</exception>
    public ValueTask<VerifyResult> VerifyAsync(IProgress<VerifyProgress>? progress = null,
        CancellationToken cancellationToken = default) =>
        RunOperationAsync(token => new ValueTask<VerifyResult>(Task.Run(() => Verify(progress, token), token)),
            cancellationToken);

    private VerifyResult Verify(IProgress<VerifyProgress>? progress, CancellationToken cancellationToken)
    {
        var problems = new List<string>();
        PageCheckpoint checkpoint = _pages.Pin();
        try
        {
            List<ChunkInfo> chunks;
            try
            {
                chunks = _pages.ReadChunkTable(checkpoint);
            }
            catch (StoreCorruptedException e)
            {
                problems.Add(e.Message);
                chunks = [];
            }

            long total = _journal.CommittedBytes();
            foreach (ChunkInfo chunk in chunks)
            {
                total += chunk.Length;
            }

            (long pages, long done) = ChunkScrub.Run(_pages, chunks, problems, static _ => true,
                bytes => progress?.Report(new VerifyProgress(bytes, total)), cancellationToken);
            long reported = done;
            (int segments, long records) = _journal.Verify(bytes =>
            {
                done += bytes;
                if (done - reported >= 1 << 20)
                {
                    reported = done;
                    progress?.Report(new VerifyProgress(done, total));
                }
            }, problems, cancellationToken);
            progress?.Report(new VerifyProgress(done, total));
            if (problems.Count > 0)
            {
                _index.NoteDamage(); // writes read the versions they replace themselves from now on
            }

            return new VerifyResult(chunks.Count, pages, segments, records, done, problems);
        }
        finally
        {
            PageStore.Unpin(checkpoint);
        }
    }

    /// <summary>Runs one operation registered with the store, so a close cancels it and waits for it.</summary>
    private async ValueTask<T> RunOperationAsync<T>(Func<CancellationToken, ValueTask<T>> operation,
        CancellationToken cancellationToken)
    {
        var done = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        lock (_operationsLock)
        {
            ThrowIfDisposed();
            _operations.Add(done.Task);
        }

        try
        {
            using var linked = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken, _closing.Token);
            _inOperation.Value = done.Task; // this async method's own flow: restored for the caller when it returns
            return await operation(linked.Token).ConfigureAwait(false);
        }
        catch (OperationCanceledException e) when (_closing.IsCancellationRequested
            && !cancellationToken.IsCancellationRequested)
        {
            throw new ObjectDisposedException($"The store '{Path}' was closed while the operation ran.", e);
        }
        finally
        {
            lock (_operationsLock)
            {
                _operations.Remove(done.Task);
            }

            done.SetResult();
        }
    }

    /// <summary>Cancels the operations in flight and returns a task that completes when they all ended (a close
    /// calls it after marking the store disposed, so no new one starts).</summary>
    private Task StopOperationsAsync()
    {
        Task[] running;
        lock (_operationsLock)
        {
            running = [.. _operations];
        }

        if (running.Length == 0)
        {
            return Task.CompletedTask;
        }

        _closing.Cancel();
        return Task.WhenAll(running);
    }
}
