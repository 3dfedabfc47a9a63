namespace Folio;

/// <summary>
/// Thrown by writes once the store (or its journal) is faulted: a journal write or fsync failed, so the state of the
/// file past the last durable point is unknown and nothing more can be acknowledged. Reads of committed data keep
/// working; reopen the folder to recover (recovery truncates whatever was not made durable).
/// </summary>
public sealed class StoreFaultedException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public StoreFaultedException()
        : base("The store is faulted after an I/O failure; reopen it to recover.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public StoreFaultedException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause (the original I/O failure).</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public StoreFaultedException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }
}
