namespace Folio;

/// <summary>
/// The base type of every exception Folio throws for a condition of the store itself (corruption, a conflict,
/// a faulted or locked store, a purged position). Argument validation uses the standard
/// <see cref="ArgumentException"/> family, and use after dispose throws <see cref="ObjectDisposedException"/>.
/// </summary>
public class FolioException : Exception
{
    /// <summary>Creates an exception with a default message.</summary>
    public FolioException()
        : base("A Folio storage operation failed.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public FolioException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public FolioException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }
}
