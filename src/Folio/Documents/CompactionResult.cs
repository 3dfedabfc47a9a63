namespace Folio;

/// <summary>What <see cref="DocumentStore.CompactAsync"/> did.</summary>
/// <param name="ChunksRewritten">Sparse chunks whose live pages were copied into a new chunk.</param>
/// <param name="PagesRewritten">Pages copied (with the branches above them).</param>
/// <param name="DataFileBytesBefore">The data file's size before, in bytes.</param>
/// <param name="DataFileBytesAfter">Its size after, in bytes (smaller when free space at its end was given
/// back).</param>
/// <param name="FillRate">Live pages over all pages of the live chunks afterwards.</param>
public sealed record CompactionResult(int ChunksRewritten, long PagesRewritten, long DataFileBytesBefore,
    long DataFileBytesAfter, double FillRate);
