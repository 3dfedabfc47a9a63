namespace Folio.Tests.Infrastructure;

/// <summary>Store options for tests whose subject is not the segment size.</summary>
internal static class TestStoreOptions
{
    /// <summary>
    /// 1 MiB segments (documents up to 64 KiB). Every open zero-fills its active segment and the next one: with the
    /// default 64 MiB the suite wrote 13.5 GB to the disk, and the disk it saturated slowed the tests running beside
    /// (a held fsync took over 10 s to reach on a CI runner). Small segments also rotate within a test.
    /// </summary>
    public static DocumentStoreOptions SmallSegments()
        => new()
        {
            SegmentSize = 1 << 20, MaxDocumentSize = 64 * 1024, MaxGroupBytes = 512 * 1024,
            MinFillPiece = 16 * 1024, MaxFillPiece = 128 * 1024,
        };

    /// <summary><see cref="SmallSegments"/> with no checkpoint but where the test asks (no interval, a threshold out of
    /// reach), and the clean close's.</summary>
    public static DocumentStoreOptions ManualCheckpoints()
    {
        DocumentStoreOptions options = SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 1L << 40;
        return options;
    }

    /// <summary><paramref name="options"/> with no checkpoint but where the test asks (no interval, a threshold out of
    /// reach), not even at a clean close: a closed store keeps every commit since its last checkpoint in its journal
    /// alone, as a killed one does. Returns the same options.</summary>
    public static DocumentStoreOptions KeepingJournal(DocumentStoreOptions options)
    {
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        options.CheckpointThreshold = 1L << 40;
        options.CheckpointOnClose = false;
        return options;
    }

    /// <summary>64 KiB segments (documents up to 8 KiB, groups up to 16 KiB): a few thousand small writes rotate
    /// through many segments, for tests whose subject is rotation, purging or damage to a segment.</summary>
    public static DocumentStoreOptions TinySegments()
        => new()
        {
            SegmentSize = 64 * 1024, MaxDocumentSize = 8 * 1024, MaxGroupBytes = 16 * 1024,
            MinFillPiece = 4 * 1024, MaxFillPiece = 16 * 1024,
        };
}
