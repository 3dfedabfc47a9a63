namespace Folio.Pages;

/// <summary>
/// Where a page lives in the data file: the chunk that holds it and its number in that chunk's table of contents.
/// Packed in 64 bits (chunk id in the high 32, page number in the low 32); chunk ids start at 1, so the default
/// (zero) means "not saved yet". The position is final from the moment a checkpoint numbers the page: the byte
/// offset is looked up in the chunk's table of contents, so placing a chunk never changes a reference to a page.
/// </summary>
internal readonly record struct PagePosition(ulong Value)
{
    public PagePosition(uint chunkId, uint pageNumber)
        : this(((ulong)chunkId << 32) | pageNumber)
    {
    }

    /// <summary>The chunk that holds the page (1 and up); 0 for an unsaved page.</summary>
    public uint ChunkId => (uint)(Value >> 32);

    /// <summary>The page's index in its chunk's table of contents.</summary>
    public uint PageNumber => (uint)Value;

    /// <summary>Whether the page has been written by a checkpoint.</summary>
    public bool IsSaved => Value != 0;

    public override string ToString() => IsSaved ? $"chunk {ChunkId} page {PageNumber}" : "unsaved";
}
