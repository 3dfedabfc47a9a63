using Microsoft.Extensions.Logging;

namespace Folio.Documents;

/// <summary>The document store's log lines (source-generated).</summary>
internal static partial class StoreLog
{
    [LoggerMessage(EventId = 3001, Level = LogLevel.Information,
        Message = "Document store '{Path}' opened: checkpoint at sequence {CheckpointSequence} ({Documents} " +
        "documents) mounted, {Batches} later commits ({Bytes} bytes) replayed, in {ElapsedMs} ms")]
    public static partial void Opened(ILogger logger, string path, long checkpointSequence, long documents,
        long batches, long bytes, long elapsedMs);

    [LoggerMessage(EventId = 3002, Level = LogLevel.Information,
        Message = "Document store '{Path}' closed; journal durable up to sequence {Sequence}")]
    public static partial void Closed(ILogger logger, string path, long sequence);

    [LoggerMessage(EventId = 3003, Level = LogLevel.Warning,
        Message = "A checkpoint failed; the journal keeps every commit and the next checkpoint retries")]
    public static partial void CheckpointFailed(ILogger logger, Exception exception);

    [LoggerMessage(EventId = 3004, Level = LogLevel.Warning,
        Message = "Checkpoints fell behind: {Bytes} bytes of journal after the last checkpoint (commits wait past " +
        "{Limit}), an estimated {PageBytes} bytes of pages for the next checkpoint (commits wait past {PageLimit}); " +
        "new commits wait for the checkpoint ({Episodes} waits since the last such line, this one included)")]
    public static partial void BackpressureStarted(ILogger logger, long bytes, long limit, long pageBytes,
        long pageLimit, long episodes);

    [LoggerMessage(EventId = 3005, Level = LogLevel.Information,
        Message = "Checkpoints caught up ({Bytes} bytes of journal after the last checkpoint); commits resume after " +
        "waiting {WaitedMs} ms")]
    public static partial void BackpressureEnded(ILogger logger, long bytes, long waitedMs);

    [LoggerMessage(EventId = 3006, Level = LogLevel.Warning,
        Message = "Could not read the change-feed readers' pins in '{Folder}': this checkpoint's purge keeps no " +
        "journal for readers in other processes")]
    public static partial void FeedPinsUnreadable(ILogger logger, Exception exception, string folder);

    [LoggerMessage(EventId = 3007, Level = LogLevel.Error,
        Message = "Closing the document store '{Path}' failed after the backup or scrub that asked for the close " +
        "ended")]
    public static partial void DeferredCloseFailed(ILogger logger, Exception exception, string path);

    [LoggerMessage(EventId = 3008, Level = LogLevel.Information,
        Message = "Document store '{Path}' sized to {AvailableBytes} bytes of memory the process may use: a cache of " +
        "{CacheBytes} bytes, commits wait past {BackpressureBytes} bytes of journal or {CheckpointBytes} bytes of " +
        "a checkpoint's pages, held snapshots keep at most {RetainedBytes} bytes")]
    public static partial void MemorySized(ILogger logger, string path, long availableBytes, long cacheBytes,
        long backpressureBytes, long checkpointBytes, long retainedBytes);

    [LoggerMessage(EventId = 3009, Level = LogLevel.Information,
        Message = "The journal '{Journal}' held {Commands} documents after the data file's checkpoint, more than a " +
        "checkpoint may hold: the open checkpointed {Taken} of them in {Checkpoints} pieces, up to sequence " +
        "{Sequence}, in {ElapsedMs} ms")]
    public static partial void BacklogCheckpointed(ILogger logger, string journal, long taken, long commands,
        int checkpoints, long sequence, long elapsedMs);

    [LoggerMessage(EventId = 3010, Level = LogLevel.Warning,
        Message = "The id filters of the store's collections could not be built; writes of new ids and reads of " +
        "missing ones search the trees instead")]
    public static partial void IdFiltersFailed(ILogger logger, Exception error);

    [LoggerMessage(EventId = 3011, Level = LogLevel.Information,
        Message = "Built the id filters of {Collections} collections from a data file of {DataFileBytes} bytes in " +
        "{ElapsedMs} ms")]
    public static partial void IdFiltersBuilt(ILogger logger, int collections, long dataFileBytes, long elapsedMs);
}
