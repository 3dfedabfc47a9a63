namespace Folio.Pages;

/// <summary>A checkpoint's compaction: rewrite the live chunks whose share of live pages is below
/// <paramref name="FillBelow"/>, sparsest first, until their live pages reach <paramref name="MaxBytes"/>; or, with
/// <paramref name="MoveTail"/>, the chunks at the end of the file whose live pages fit in the free extents before them
/// (so the file's end can be given back once they are freed).</summary>
/// <param name="FillBelow">Live pages over all pages, 0 to 1.</param>
/// <param name="MaxBytes">The live bytes one checkpoint copies at most (the rate limit of background compaction, and
/// the bound on the memory a compaction's checkpoint takes); at least one chunk is rewritten.</param>
/// <param name="MoveTail">Move the file's last chunks forward instead.</param>
/// <param name="WithinFreeSpace">Rewrite only what fits in four fifths of the free extents (counted in whole
/// chunks), so the checkpoint's chunks do not grow the file (background compaction); none when even the sparsest
/// chunk does not fit.</param>
internal readonly record struct CompactionRequest(double FillBelow, long MaxBytes, bool MoveTail = false,
    bool WithinFreeSpace = false);
