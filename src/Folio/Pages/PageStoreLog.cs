using Microsoft.Extensions.Logging;

namespace Folio.Pages;

/// <summary>The page store's log lines (source-generated, allocation-free when the level is off).</summary>
internal static partial class PageStoreLog
{
    [LoggerMessage(EventId = 5001, Level = LogLevel.Information,
        Message = "Data file '{File}' mounted checkpoint {Generation} (sequence {Sequence}): {Chunks} chunks, " +
        "{Collections} collections")]
    public static partial void Mounted(ILogger logger, string file, long generation, long sequence, int chunks,
        int collections);

    [LoggerMessage(EventId = 5002, Level = LogLevel.Information,
        Message = "Checkpoint {Generation} (sequence {Sequence}) wrote chunk {ChunkId}: {Pages} pages, {Bytes} bytes " +
        "in {ElapsedMs} ms (apply {ApplyMs}, serialize {SerializeMs}, write {WriteMs}); {Chunks} chunks, fill rate " +
        "{FillRate:P0}, {FreedChunks} chunks freed")]
    public static partial void Checkpointed(ILogger logger, long generation, long sequence, uint chunkId, int pages,
        long bytes, double elapsedMs, double applyMs, double serializeMs, double writeMs, int chunks, double fillRate,
        int freedChunks);

    [LoggerMessage(EventId = 5003, Level = LogLevel.Warning,
        Message = "Checkpoint to sequence {Sequence} failed; checkpoint {Generation} stays current")]
    public static partial void CheckpointFailed(ILogger logger, Exception exception, long sequence, long generation);

    [LoggerMessage(EventId = 5004, Level = LogLevel.Warning,
        Message = "Truncating data file '{Path}' to its used {Length} bytes failed; the next checkpoint tries again")]
    public static partial void TruncateFailed(ILogger logger, Exception exception, string path, long length);

    [LoggerMessage(EventId = 5005, Level = LogLevel.Warning,
        Message = "The readers' pins in '{Folder}' could not be read; the checkpoint frees no chunk this time")]
    public static partial void ReaderPinsUnreadable(ILogger logger, Exception exception, string folder);

    [LoggerMessage(EventId = 5006, Level = LogLevel.Information,
        Message = "{Chunks} chunks ({Bytes} bytes) no checkpoint needs stay in the data file: readers of the store's " +
        "files pinned them ('{Folder}'); they are reused once those readers end")]
    public static partial void KeptForReaders(ILogger logger, int chunks, long bytes, string folder);

    [LoggerMessage(EventId = 5007, Level = LogLevel.Information,
        Message = "Data file '{File}' ({Length} bytes) is now read {Mode} the operating system's page cache")]
    public static partial void ReadModeChanged(ILogger logger, string file, long length, string mode);
}
