namespace Folio;

/// <summary>Settings of a restore, validated when it starts.</summary>
public sealed class RestoreOptions
{
    /// <summary>
    /// Restore the store as it was after this commit (a point in time by sequence). Null (default): everything the
    /// backup holds. Must lie between the backup's checkpoint (<see cref="BackupResult.CheckpointSequence"/>) and its
    /// last commit; set at most one of this and <see cref="ToTimestamp"/>.
    /// </summary>
    public long? ToSequence { get; set; }

    /// <summary>
    /// Restore the store as it was at this time: every commit stamped at or before it, none after. Null (default):
    /// everything the backup holds. The backup's checkpoint may hold commits of any time before its first journal
    /// entry, so a time before that entry (or, with no entries, before the backup was taken) is refused.
    /// </summary>
    public DateTimeOffset? ToTimestamp { get; set; }

    /// <summary>Receives the bytes read so far while the restore runs. Default: none.</summary>
    public IProgress<long>? Progress { get; set; }

    internal void Validate()
    {
        if (ToSequence is long sequence && sequence < 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(ToSequence), sequence,
                "RestoreOptions.ToSequence must not be negative.");
        }

        if (ToSequence is not null && ToTimestamp is not null)
        {
            ThrowHelper.ThrowArgument(nameof(ToTimestamp),
                "Set at most one of RestoreOptions.ToSequence and RestoreOptions.ToTimestamp.");
        }
    }
}
