using Microsoft.Extensions.Logging;

namespace Folio.Transactions;

/// <summary>The transaction merger's log lines (source-generated).</summary>
internal static partial class TransactionLog
{
    [LoggerMessage(EventId = 2001, Level = LogLevel.Warning,
        Message = "Journal fsync took {ElapsedMs} ms (threshold {ThresholdMs} ms) for a group of {Batches} batches")]
    public static partial void SlowSync(ILogger logger, double elapsedMs, double thresholdMs, int batches);

    [LoggerMessage(EventId = 2002, Level = LogLevel.Critical,
        Message = "The store is faulted: a journal write or fsync failed; {Failed} pending commits failed and later " +
        "commits fail until the store is reopened")]
    public static partial void Faulted(ILogger logger, int failed, Exception exception);
}
