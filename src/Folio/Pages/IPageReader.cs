namespace Folio.Pages;

/// <summary>
/// The one way pages come back from the data file. Today <see cref="DataFile"/> reads them with positional reads
/// and checks each page's CRC-32C; the buffer pool will sit behind this interface. Safe to call from any thread.
/// </summary>
internal interface IPageReader
{
    /// <summary>Reads and decodes the tree page at <paramref name="position"/>; throws
    /// <see cref="StoreCorruptedException"/> when it fails its checks.</summary>
    TreeNode ReadNode(PagePosition position);

    /// <summary>Reads the value of <paramref name="length"/> bytes held by the overflow page at
    /// <paramref name="position"/>.</summary>
    ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length);
}
