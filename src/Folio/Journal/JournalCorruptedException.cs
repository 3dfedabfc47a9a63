namespace Folio;

/// <summary>
/// Thrown when the journal holds bytes that fail their checks where a torn tail cannot explain them: a bad
/// record followed by a good one, a gap in sequence numbers, a damaged segment header, or a checksum mismatch
/// found by a reader. Folio never skips such data silently; restore the folder from a backup or remove the damaged
/// segment by hand after inspection.
/// </summary>
public sealed class JournalCorruptedException : StoreCorruptedException
{
    /// <summary>Creates an exception with a default message.</summary>
    public JournalCorruptedException()
        : base("The journal is corrupted.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public JournalCorruptedException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public JournalCorruptedException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }

    internal JournalCorruptedException(string filePath, long offset, string reason)
        : base(filePath, offset, $"(journal) {reason}")
    {
    }
}
