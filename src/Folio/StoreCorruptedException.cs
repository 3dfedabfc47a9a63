namespace Folio;

/// <summary>
/// Thrown when a store's files hold bytes that fail their checks: a page or chunk of the data file whose checksum
/// fails, a header that points past the end of the file, a journal that ends before the last checkpoint, or (as
/// <see cref="JournalCorruptedException"/>) damage in the journal that a torn tail cannot explain. Folio never
/// answers from such data and never opens a silently smaller store; restore the folder from a backup.
/// </summary>
public class StoreCorruptedException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public StoreCorruptedException()
        : base("The store is corrupted.")
    {
        FilePath = string.Empty;
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public StoreCorruptedException(string message)
        : base(message)
    {
        FilePath = string.Empty;
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public StoreCorruptedException(string message, Exception? innerException)
        : base(message, innerException)
    {
        FilePath = string.Empty;
    }

    /// <summary>Creates an exception naming the damaged file and offset.</summary>
    /// <param name="filePath">The file that holds the damage.</param>
    /// <param name="offset">The byte offset in the file where the damage starts.</param>
    /// <param name="reason">What was expected there and what was found.</param>
    public StoreCorruptedException(string filePath, long offset, string reason)
        : base($"Store corrupted in '{filePath}' at offset {offset}: {reason}")
    {
        FilePath = filePath;
        Offset = offset;
    }

    /// <summary>A failure found before, thrown again with its message as it was.</summary>
    internal StoreCorruptedException(string message, string filePath, long offset)
        : base(message)
    {
        FilePath = filePath;
        Offset = offset;
    }

    /// <summary>The file that holds the damage (empty when not known).</summary>
    public string FilePath { get; }

    /// <summary>The byte offset in <see cref="FilePath"/> where the damage starts.</summary>
    public long Offset { get; }
}
