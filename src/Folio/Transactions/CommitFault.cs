using Microsoft.Extensions.Logging;

namespace Folio.Transactions;

/// <summary>
/// Whether the merger is faulted, and why.
/// <para>
/// Owners. Set once (a CAS from null) by whichever thread first meets a journal failure or an unexpected exception: a
/// committer, a thread completing a group, the buffered-sync timer. Read (acquire) by every submitter, committer,
/// completing thread and the timer. It never clears: commits fail until the store is reopened, and nothing is
/// acknowledged that is not durable (a failed fsync is never retried as if it had succeeded).
/// </para>
/// </summary>
internal sealed class CommitFault(ILogger logger, Func<long> pendingBatches)
{
    private Exception? _cause;

    /// <summary>The failure that faulted the merger, or null.</summary>
    public Exception? Cause => Volatile.Read(ref _cause);

    public bool IsFaulted => Volatile.Read(ref _cause) is not null;

    /// <summary>Faults the merger with <paramref name="cause"/> unless it is faulted already (the first cause wins,
    /// and is logged once). Throws nothing.</summary>
    public void Set(Exception cause)
    {
        if (Interlocked.CompareExchange(ref _cause, cause, null) is null)
        {
            long pending = pendingBatches();
            ObserverGuard.Run(static state => TransactionLog.Faulted(state.Logger, (int)state.Pending, state.Cause),
                (Logger: logger, Pending: pending, Cause: cause));
        }
    }

    /// <summary>Throws <see cref="StoreFaultedException"/> (its inner exception the cause) when faulted.</summary>
    public void ThrowIfFaulted()
    {
        if (Volatile.Read(ref _cause) is { } cause)
        {
            Throw(cause);
        }
    }

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void Throw(Exception cause) =>
        throw new StoreFaultedException(
            "The store is faulted (the inner exception is the cause); commits fail until it is reopened.", cause);

    /// <summary>The I/O failure behind a journal exception: the journal wraps it in a
    /// <see cref="StoreFaultedException"/>.</summary>
    public static Exception JournalFailureCause(Exception e) =>
        e is StoreFaultedException { InnerException: { } inner } ? inner : e;

    /// <summary>What a commit that a journal write or fsync failed on is told (a full disk says so).</summary>
    public static StoreFaultedException NotDurable(Exception cause)
    {
        bool diskFull = Storage.DiskFullError.Matches(cause);
        string message = diskFull
            ? "The disk is full: the journal could not be written, so this commit is not durable. The store is " +
                "faulted; free space and reopen it."
            : "A journal write or fsync failed, so this commit is not durable. The store is faulted; reopen it to " +
                "recover.";
        return new StoreFaultedException(message, cause);
    }
}
