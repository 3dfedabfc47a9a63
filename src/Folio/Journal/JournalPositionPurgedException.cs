namespace Folio;

/// <summary>
/// Thrown when a reader asks for (or moves on to) a sequence number whose segment was removed by
/// <see cref="Journal.WriteAheadJournal.Purge(long)"/>. The reader never returns other data in its place.
/// </summary>
public sealed class JournalPositionPurgedException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public JournalPositionPurgedException()
        : base("The requested journal position was purged.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public JournalPositionPurgedException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public JournalPositionPurgedException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }

    internal JournalPositionPurgedException(long requestedSequence, long firstAvailableSequence)
        : base($"Journal position {requestedSequence} was purged; the oldest available sequence number is " +
            $"{firstAvailableSequence}.")
    {
        RequestedSequence = requestedSequence;
        FirstAvailableSequence = firstAvailableSequence;
    }

    internal JournalPositionPurgedException(long requestedSequence, long firstAvailableSequence, string reason,
        Exception innerException)
        : base($"Journal position {requestedSequence} was purged; the oldest available sequence number is " +
            $"{firstAvailableSequence}. {reason}", innerException)
    {
        RequestedSequence = requestedSequence;
        FirstAvailableSequence = firstAvailableSequence;
    }

    /// <summary>The sequence number that was asked for.</summary>
    public long RequestedSequence { get; }

    /// <summary>The oldest sequence number still in the journal when the exception was thrown.</summary>
    public long FirstAvailableSequence { get; }
}
