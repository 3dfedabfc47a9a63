namespace Folio;

/// <summary>Settings of a backup taken from a store's files
/// (<see cref="DocumentStore.BackupFilesAsync(string, string, BackupFilesOptions, CancellationToken)"/>), validated
/// when it starts.</summary>
public sealed class BackupFilesOptions
{
    /// <summary>An incremental backup: the commits from this sequence on (the previous backup's last + 1). Null
    /// (default): a full backup. At least 1.</summary>
    public long? FromSequence { get; set; }

    /// <summary>
    /// The most bytes the backup sends per second, as <see cref="DocumentStoreOptions.BackupBytesPerSecond"/> paces a
    /// store's own backups: at full speed a backup's file fills the page cache faster than the disk takes it, and the
    /// commits' fsyncs of the process that holds the store wait behind that writeback. Default
    /// <see cref="DocumentStoreOptions.DefaultBackupBytesPerSecond"/>; 0 for no limit, else at least 1 MiB.
    /// </summary>
    public long BytesPerSecond { get; set; } = DocumentStoreOptions.DefaultBackupBytesPerSecond;

    /// <summary>Receives the bytes written so far; null (default): none.</summary>
    public IProgress<long>? Progress { get; set; }

    internal void Validate()
    {
        if (FromSequence is < 1)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(FromSequence), FromSequence,
                "FromSequence must be at least 1 (the previous backup's last commit + 1).");
        }

        DocumentStoreOptions.ValidateBackupPace(nameof(BytesPerSecond), BytesPerSecond);
    }
}
