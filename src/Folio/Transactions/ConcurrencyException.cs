namespace Folio;

/// <summary>
/// Thrown when a batch's precondition fails: a document it expected at some version was changed (or created, or
/// deleted) by another commit first. The batch had no effect; reload and retry.
/// </summary>
public sealed class ConcurrencyException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public ConcurrencyException()
        : base("A concurrent commit changed a document this batch expected unchanged.")
    {
        Conflicts = [];
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public ConcurrencyException(string message)
        : base(message)
    {
        Conflicts = [];
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public ConcurrencyException(string message, Exception? innerException)
        : base(message, innerException)
    {
        Conflicts = [];
    }

    internal ConcurrencyException(IReadOnlyList<DocumentKey> conflicts)
        : base($"Concurrency conflict on {string.Join(", ", conflicts)}: changed by another commit since the version " +
            $"this batch expected.")
    {
        Conflicts = conflicts;
    }

    /// <summary>The documents whose version did not match.</summary>
    public IReadOnlyList<DocumentKey> Conflicts { get; }
}
