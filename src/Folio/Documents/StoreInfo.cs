namespace Folio;

/// <summary>What <see cref="DocumentStore.GetInfo"/> found.</summary>
/// <param name="Path">The store's folder.</param>
/// <param name="DataFileVersion">The data file's format version this Folio writes (docs/formats/pages.md).</param>
/// <param name="DataFileBytes">The data file's size in bytes (free extents between chunks included).</param>
/// <param name="DataFileFreeBytes">The bytes of the data file no chunk holds: space left between chunks by
/// checkpoints that superseded them (new chunks reuse it; compaction moves the last chunks into it and truncates the
/// file).</param>
/// <param name="JournalVersion">The journal's format version this Folio writes (docs/formats/journal.md).</param>
/// <param name="JournalBytes">The journal segment files' length in bytes (each has its segment's full size from its
/// creation; the part the journal has not filled yet is a hole that takes no disk space where the file system keeps
/// sparse files, as Linux's do).</param>
/// <param name="JournalFirstSequence">The oldest commit the journal still holds (earlier ones were purged after a
/// checkpoint covered them).</param>
/// <param name="CheckpointGeneration">The newest checkpoint's number (0: none yet).</param>
/// <param name="CheckpointSequence">Every commit up to this one is in the data file.</param>
/// <param name="LastCommittedSequence">The newest commit.</param>
/// <param name="Chunks">Chunks in the data file, live or waiting to be freed.</param>
/// <param name="FillRate">Live pages over all pages of the live chunks (1 when there are none): how much of the data
/// file's chunks still holds current data (the free space between chunks is <paramref name="DataFileFreeBytes"/>, not
/// counted here).</param>
/// <param name="Collections">Every collection with its live documents, in ordinal order.</param>
public sealed record StoreInfo(string Path, int DataFileVersion, long DataFileBytes, long DataFileFreeBytes,
    int JournalVersion,
    long JournalBytes, long JournalFirstSequence, long CheckpointGeneration, long CheckpointSequence,
    long LastCommittedSequence, int Chunks, double FillRate, IReadOnlyList<CollectionInfo> Collections)
{
    /// <summary>Change-feed readers of the store's files (<see cref="DocumentChanges.ReadFilesAsync"/>,
    /// <c>folio tail</c>, usually in other processes) reading now; each keeps the journal from its position from being
    /// purged, within <see cref="DocumentStoreOptions.MaxChangeFeedLag"/>. Streams of
    /// <see cref="DocumentStore.Changes"/> in the store's own process are not counted. 0 when there is none, or when
    /// the readers' folder cannot be read.</summary>
    public int FeedReaders { get; init; }

    /// <summary>The id of the store, which its journal segments, journal mark and checkpoints carry (an open refuses
    /// a file that names another store); <see cref="Guid.Empty"/> when its files were all written before stores had
    /// ids (it takes one at its next open).</summary>
    public Guid StoreId { get; init; }

    /// <summary>The oldest commit those readers have still to read (the journal is kept from there, within
    /// <see cref="DocumentStoreOptions.MaxChangeFeedLag"/>); null when there is none.</summary>
    public long? OldestFeedReaderSequence { get; init; }
}
