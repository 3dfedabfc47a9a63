using Microsoft.Extensions.Logging;

namespace Folio.Journal;

/// <summary>The journal's log lines (source-generated, allocation-free when the level is off).</summary>
internal static partial class JournalLog
{
    [LoggerMessage(EventId = 1001, Level = LogLevel.Information,
        Message = "Journal '{Directory}' recovered: {Segments} segments, {Records} records, {Entries} entries, " +
        "{Bytes} bytes, next sequence {NextSequence}, in {ElapsedMs} ms")]
    public static partial void Recovered(ILogger logger, string directory, int segments, long records, long entries,
        long bytes, long nextSequence, long elapsedMs);

    [LoggerMessage(EventId = 1002, Level = LogLevel.Warning,
        Message = "Journal segment '{File}' had a torn tail at offset {Offset}: truncated {TruncatedBytes} bytes " +
        "written by an interrupted append")]
    public static partial void TornTailTruncated(ILogger logger, string file, long offset, long truncatedBytes);

    [LoggerMessage(EventId = 1003, Level = LogLevel.Information,
        Message = "Journal rotated to segment '{File}' starting at sequence {FirstSequence}")]
    public static partial void Rotated(ILogger logger, string file, long firstSequence);

    [LoggerMessage(EventId = 1004, Level = LogLevel.Information,
        Message = "Journal purged {Segments} segments; the oldest available sequence is now {FirstSequence}")]
    public static partial void Purged(ILogger logger, int segments, long firstSequence);

    [LoggerMessage(EventId = 1005, Level = LogLevel.Warning,
        Message = "Could not delete purged journal segment '{File}'; recovery will remove it")]
    public static partial void DeleteFailed(ILogger logger, string file, Exception exception);

    [LoggerMessage(EventId = 1006, Level = LogLevel.Error,
        Message = "Journal '{Directory}' is faulted after an I/O failure; writes fail until it is reopened")]
    public static partial void Faulted(ILogger logger, string directory, Exception exception);

    [LoggerMessage(EventId = 1007, Level = LogLevel.Information,
        Message = "Journal removed leftover file '{File}' of an interrupted purge or rotation")]
    public static partial void LeftoverRemoved(ILogger logger, string file);

    [LoggerMessage(EventId = 1008, Level = LogLevel.Warning,
        Message = "Journal '{Directory}' could not write its durable mark; recovery checks only what the segments say")]
    public static partial void MarkFailed(ILogger logger, string directory, Exception exception);

    [LoggerMessage(EventId = 1009, Level = LogLevel.Error,
        Message = "Journal '{Directory}' has no room for its next segment ({SegmentSize} bytes): commits fail with " +
        "StoreFullException until space is freed")]
    public static partial void NoSpaceForSegment(ILogger logger, string directory, long segmentSize,
        Exception exception);

    [LoggerMessage(EventId = 1010, Level = LogLevel.Information,
        Message = "Journal '{Directory}' created its next segment again: commits are accepted")]
    public static partial void SpaceAvailableAgain(ILogger logger, string directory);

    [LoggerMessage(EventId = 1011, Level = LogLevel.Warning,
        Message = "A change-feed reader at sequence {FromSequence} held {HeldBytes} bytes of journal behind the last " +
        "checkpoint (MaxChangeFeedLag {MaxHeldBytes}, disk full: {DiskFull}): its hold is given up, the journal is " +
        "purged, and it fails when it reaches a purged segment")]
    public static partial void RetentionLapsed(ILogger logger, long fromSequence, long heldBytes, long maxHeldBytes,
        bool diskFull);

    [LoggerMessage(EventId = 1012, Level = LogLevel.Warning,
        Message = "Journal '{Directory}' starts at sequence {FirstSequence} and its purge watermark is {Problem}; " +
        "the data file's checkpoint holds every commit through {CoveredThrough}, so nothing before the journal is " +
        "lost: the watermark is written again")]
    public static partial void WatermarkRestored(ILogger logger, string directory, long firstSequence, string problem,
        long coveredThrough);

    [LoggerMessage(EventId = 1013, Level = LogLevel.Debug,
        Message = "Zero-filling journal segment '{File}' ahead of its writer failed; the writer fills what it needs " +
        "itself")]
    public static partial void FillAheadFailed(ILogger logger, string file, Exception exception);

    [LoggerMessage(EventId = 1014, Level = LogLevel.Error,
        Message = "Journal '{Directory}' could not create its next segment file: commits that need a new segment " +
        "fail until it can (tried again at most once a second)")]
    public static partial void SegmentNotCreated(ILogger logger, string directory, Exception exception);
}
