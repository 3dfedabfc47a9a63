namespace Folio.Pages;

/// <summary>What one checkpoint did (its log line and metrics; tests). Immutable: published by reference, so a
/// reader never waits for the checkpoint running.</summary>
/// <param name="Generation">The checkpoint's generation.</param>
/// <param name="Sequence">The sequence it covers.</param>
/// <param name="ChunkId">The chunk it wrote (0 when nothing changed and no chunk was written).</param>
/// <param name="Pages">Pages written.</param>
/// <param name="Bytes">Bytes written to the chunk.</param>
/// <param name="Elapsed">From the start of the tree changes to the durable header.</param>
/// <param name="Chunks">Chunks in the data file afterwards (live, or dead and waiting for their pins).</param>
/// <param name="FillRate">Live pages over all pages of the live chunks (1 when the file has none).</param>
/// <param name="FreedChunks">Dead chunks whose extents were freed for reuse.</param>
/// <param name="SupersededPages">Saved pages this checkpoint no longer reaches.</param>
/// <param name="CompactedChunks">Sparse chunks compaction rewrote (their pages now in this checkpoint's chunk).</param>
/// <param name="RewrittenPages">Pages compaction copied out of them.</param>
/// <param name="Phases">How <paramref name="Elapsed"/> divides into the checkpoint's phases.</param>
internal sealed record CheckpointStatistics(long Generation, long Sequence, uint ChunkId, int Pages,
    long Bytes, TimeSpan Elapsed, int Chunks, double FillRate, int FreedChunks, int SupersededPages,
    int CompactedChunks = 0, int RewrittenPages = 0, CheckpointPhases Phases = default);

/// <summary>The time one checkpoint spent in each phase; together they make its
/// <see cref="CheckpointStatistics.Elapsed"/>.</summary>
/// <param name="Apply">Applying the changes to the trees (copy-on-write of the pages they reach).</param>
/// <param name="Serialize">Numbering, serializing and placing the changed pages and the catalog: everything
/// between the trees' changes and the first write.</param>
/// <param name="Write">Writing the chunks, their fdatasync, the header and its fdatasync.</param>
/// <param name="Publish">Publishing the new checkpoint and releasing the saved trees' pages from memory.</param>
internal readonly record struct CheckpointPhases(TimeSpan Apply, TimeSpan Serialize, TimeSpan Write,
    TimeSpan Publish);
