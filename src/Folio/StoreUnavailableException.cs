namespace Folio;

/// <summary>
/// Thrown by a commit that the store could not take for a cause outside it: nothing of the commit was written, no
/// other commit is affected, and unlike <see cref="StoreFaultedException"/> the store stays open (reads, snapshots and
/// the change feed keep working). Commits succeed again once the cause is gone, without a reopen. The causes: the
/// journal could not create its next segment file because the disk is full (<see cref="StoreFullException"/>), the
/// process has no file descriptor or thread to spare, or the folder no longer lets it create files. The journal tries
/// to create the file again at most once a second while it fails. Catch this type to retry a commit later. An open
/// throws it too when the process cannot create the store's checkpoint thread (out of threads, memory or file
/// descriptors); the folder is left to a later open.
/// </summary>
public class StoreUnavailableException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public StoreUnavailableException()
        : base("The store could not take this commit now: it was not written. The store stays open; retry later.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public StoreUnavailableException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause (the file system's or runtime's error).</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public StoreUnavailableException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }
}
