namespace Folio;

/// <summary>
/// Thrown by a restore when the backup it reads is not a complete, intact Folio backup: cut short, a frame that fails
/// its checksum, frames missing or out of order, bytes after its end, or contents that disagree with its own
/// manifest. Nothing is left in the target folder.
/// </summary>
public class BackupCorruptedException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public BackupCorruptedException()
        : base("The backup is damaged.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public BackupCorruptedException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public BackupCorruptedException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }

    /// <summary>Creates an exception naming where in the backup the damage is.</summary>
    /// <param name="offset">The byte offset in the backup stream.</param>
    /// <param name="reason">What was expected there and what was found.</param>
    public BackupCorruptedException(long offset, string reason)
        : base($"The backup is damaged at byte {offset}: {reason}. Nothing was restored.")
    {
        Offset = offset;
    }

    /// <summary>The byte offset in the backup stream where the damage was found.</summary>
    public long Offset { get; }
}
