namespace Folio;

/// <summary>
/// Thrown by a commit when the disk has no room for the journal's next segment file: the commit was not written, and
/// no other commit is affected. Unlike <see cref="StoreFaultedException"/> the store stays open: reads, snapshots and
/// the change feed keep working, and commits succeed again once space is freed (the journal tries to create the
/// segment again at most once a second while it fails). A checkpoint, when it can write, lets the journal drop
/// segments it no longer needs. One of the causes of <see cref="StoreUnavailableException"/>.
/// </summary>
public sealed class StoreFullException : StoreUnavailableException
{
    /// <summary>Creates an exception with a default message.</summary>
    public StoreFullException()
        : base("The disk is full: this commit was not written. The store stays open; free space and retry.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public StoreFullException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause (the file system's error).</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public StoreFullException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }
}
