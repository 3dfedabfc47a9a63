namespace Folio;

/// <summary>
/// Thrown by a read of a session whose snapshot was open longer than <see cref="DocumentStoreOptions.MaxSnapshotAge"/>
/// while other commits needed its old versions pruned, or made the store keep more of the documents written since it
/// opened in memory than <see cref="DocumentStoreOptions.MaxSnapshotRetainedBytes"/> allows: the snapshot no longer
/// holds its versions, so the read is refused rather than answered from a state that is gone. Nothing is wrong with
/// the store; dispose the session and open a new one (documents the session already loaded stay tracked, and its
/// saves are still checked against their loaded versions).
/// </summary>
public sealed class SnapshotExpiredException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public SnapshotExpiredException()
        : base("The session's snapshot expired; open a new session.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public SnapshotExpiredException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public SnapshotExpiredException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }

    internal SnapshotExpiredException(long snapshotSequence, TimeSpan maxAge)
        : base($"The session's snapshot (sequence {snapshotSequence}) was open longer than " +
            $"DocumentStoreOptions.MaxSnapshotAge ({maxAge}) and expired: its old versions were pruned. Dispose the " +
            $"session and open a new one; sessions are meant to be short-lived units of work.")
    {
        SnapshotSequence = snapshotSequence;
    }

    /// <summary>The exception for a snapshot the store expired because what it kept in memory (documents written
    /// since it opened) passed <paramref name="limit"/> bytes.</summary>
    internal static SnapshotExpiredException HeldTooMuch(long snapshotSequence, long limit) =>
        new($"The session's snapshot (sequence {snapshotSequence}) expired: the documents written since it opened " +
            $"made it keep more than {limit} bytes in memory (DocumentStoreOptions.MaxSnapshotRetainedBytes), so its " +
            "old versions were pruned to keep memory bounded. Dispose the session and open a new one; sessions are " +
            "meant to be short-lived units of work.", snapshotSequence);

    private SnapshotExpiredException(string message, long snapshotSequence)
        : base(message)
    {
        SnapshotSequence = snapshotSequence;
    }

    /// <summary>The sequence of the expired snapshot.</summary>
    public long SnapshotSequence { get; }
}
