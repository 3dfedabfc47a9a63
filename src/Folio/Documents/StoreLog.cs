using Microsoft.Extensions.Logging;

namespace Folio.Documents;

/// <summary>The document store's log lines (source-generated).</summary>
internal static partial class StoreLog
{
    [LoggerMessage(EventId = 3001, Level = LogLevel.Information,
        Message = "Document store '{Path}' opened: replayed {Batches} commits ({Bytes} bytes) into {Documents} live " +
        "documents in {ElapsedMs} ms")]
    public static partial void Opened(ILogger logger, string path, long batches, long bytes, long documents,
        long elapsedMs);

    [LoggerMessage(EventId = 3002, Level = LogLevel.Information,
        Message = "Document store '{Path}' closed; journal durable up to sequence {Sequence}")]
    public static partial void Closed(ILogger logger, string path, long sequence);
}
