using System.Buffers;

namespace Folio.Pages;

/// <summary>
/// Serializes the unsaved pages of one tree into a buffer of its own, so trees serialize in parallel (seed 004's
/// phase 1b). Page numbers come from a base handed out sequentially beforehand (<see cref="CountUnsaved"/> for
/// each tree), so every page's position (<see cref="ChunkFormat.PositionOf"/>), and the checksum that covers it, is
/// final while it is written; placing the pages into their chunks only offsets their table-of-contents entries. An
/// overflow page's body is its value, which the tree's leaf already holds in memory: for a value larger than
/// <see cref="CopiedBodyLimit"/> the buffer gets only the page's header, and the value is written from where it lies
/// (<see cref="BodyOf"/>), so a checkpoint of large documents does not hold a second copy of them; smaller ones are
/// copied, so a chunk of them is still written in a few large writes rather than two per page. A leaf the edit
/// encoded already (<see cref="TreeNode.IsEncoded"/>) is sealed where it lies and written from there as a body (the
/// leaves encoded one after another lie back to back, so the chunk writes them as one run), then dropped from its
/// reference.
/// <para>
/// Owned by one worker thread for the duration of <see cref="Serialize"/>; it changes the tree's unsaved nodes
/// (their positions, and overflow values' positions), which belong to the checkpoint's edit and are not published.
/// </para>
/// </summary>
internal sealed class TreeSerializer : IDisposable
{
    private const int PooledLimit = 1024 * 1024;

    /// <summary>The largest overflow value copied into the buffer: 64 KiB (larger ones are written from where they
    /// lie).</summary>
    internal const int CopiedBodyLimit = 64 * 1024;

    private readonly uint _firstChunkId;
    private readonly int _pagesPerChunk;
    private readonly uint _pageBase;
    private byte[] _buffer;
    private int _length;
    private readonly List<long> _toc = [];
    private readonly List<ReadOnlyMemory<byte>> _bodies = []; // per page: its body when not in the buffer

    /// <param name="firstChunkId">The checkpoint's first chunk id (<see cref="ChunkFormat.PositionOf"/>).</param>
    /// <param name="pagesPerChunk">The pages each of the checkpoint's chunks holds (the last fewer).</param>
    /// <param name="pageBase">The checkpoint's number of this tree's first page.</param>
    /// <param name="expectedBytes">The tree's unsaved bytes (<see cref="CountUnsaved"/>).</param>
    public TreeSerializer(uint firstChunkId, int pagesPerChunk, uint pageBase, int expectedBytes)
    {
        _firstChunkId = firstChunkId;
        _pagesPerChunk = pagesPerChunk;
        _pageBase = pageBase;
        _buffer = Rent(Math.Max(4096, expectedBytes));
    }

    /// <summary>The serialized pages, back to back, in page-number order; an overflow page only by its header (its
    /// body is <see cref="BodyOf"/>).</summary>
    public ReadOnlySpan<byte> Bytes => _buffer.AsSpan(0, _length);

    /// <summary>Per page: offset in <see cref="Bytes"/> (high 32 bits) and the page's length (low 32), of which the
    /// last <see cref="BodyOf"/> bytes are not in <see cref="Bytes"/>.</summary>
    public List<long> Toc => _toc;

    /// <summary>The body of page <paramref name="index"/> (of <see cref="Toc"/>) that lies outside
    /// <see cref="Bytes"/>: an overflow page's value; empty for a page wholly in the buffer.</summary>
    public ReadOnlyMemory<byte> BodyOf(int index) => _bodies[index];

    public int PageCount => _toc.Count;

    /// <summary>The pages <see cref="Serialize"/> will write for the tree at <paramref name="root"/>: its unsaved
    /// nodes and the unsaved overflow values in its unsaved leaves; <paramref name="bytes"/> gets the size they take in
    /// the buffer (an overflow page's header only, an encoded leaf nothing).</summary>
    public static int CountUnsaved(PageReference? root, out long bytes)
    {
        bytes = 0;
        return root?.Cached is { } node && !node.Position.IsSaved ? Count(node, ref bytes) : 0;
    }

    /// <summary>Writes every unsaved page of the tree, children before parents; returns the root's
    /// position.</summary>
    public PagePosition Serialize(PageReference root)
    {
        TreeNode node = root.Cached!;
        PagePosition position = node.Position.IsSaved ? node.Position : Write(node);
        root.Saved(position);
        DropEncoded(root, node);
        return position;
    }

    public void Dispose()
    {
        Return(_buffer);
        _buffer = [];
    }

    /// <summary>Buffers up to 1 MiB come from the shared pool; larger ones (a checkpoint of many megabytes) are
    /// allocated and left to the garbage collector, because the shared pool keeps what it is given back, and a
    /// store would then hold its largest checkpoint's size in memory for good.</summary>
    private static byte[] Rent(int length) =>
        length <= PooledLimit ? ArrayPool<byte>.Shared.Rent(length) : GC.AllocateUninitializedArray<byte>(length);

    private static void Return(byte[] buffer)
    {
        if (buffer.Length <= PooledLimit)
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private static int Count(TreeNode node, ref long bytes)
    {
        if (node.IsEncoded)
        {
            return 1; // written from its own bytes; its overflow values are saved (TreeNode.CanEncode)
        }

        int pages = 1;
        bytes += node.ByteSize;
        if (node.IsLeaf)
        {
            foreach (StoredValue value in node.Values)
            {
                if (value.IsOverflow && !value.Overflow.IsSaved)
                {
                    pages++;
                    bytes += value.Length > CopiedBodyLimit ? PageFormat.PageHeaderSize
                        : PageFormat.OverflowPageSize(value.Length);
                }
            }

            return pages;
        }

        foreach (PageReference child in node.Children)
        {
            if (child.Cached is { } childNode && !childNode.Position.IsSaved)
            {
                pages += Count(childNode, ref bytes);
            }
        }

        return pages;
    }

    private PagePosition Write(TreeNode node)
    {
        if (node.IsEncoded)
        {
            return WriteEncoded(node);
        }

        if (node.IsLeaf)
        {
            for (int i = 0; i < node.Count; i++)
            {
                StoredValue value = node.ValueAt(i);
                if (value.IsOverflow && !value.Overflow.IsSaved)
                {
                    PagePosition overflow = NextPosition();
                    if (value.Length > CopiedBodyLimit)
                    {
                        Span<byte> header = Reserve(PageFormat.PageHeaderSize, value.Inline);
                        PageFormat.WriteOverflowHeader(header, value.Inline.Span, overflow);
                    }
                    else
                    {
                        Span<byte> copied = Reserve(PageFormat.OverflowPageSize(value.Length));
                        PageFormat.WriteOverflowHeader(copied, value.Inline.Span, overflow);
                        value.Inline.Span.CopyTo(copied[PageFormat.PageHeaderSize..]);
                    }

                    node.SetValue(i, value.WithOverflow(overflow));
                }
            }
        }
        else
        {
            for (int i = 0; i < node.Count; i++)
            {
                PageReference child = node.ChildAt(i);
                if (child.Cached is { } childNode && !childNode.Position.IsSaved)
                {
                    child.Saved(Write(childNode));
                    DropEncoded(child, childNode);
                }
            }
        }

        // The node's own page, after every page it refers to has its position.
        PagePosition position = NextPosition();
        Span<byte> page = Reserve(node.ByteSize);
        CheckSize(node.IsLeaf ? PageFormat.WriteLeaf(page, node) : PageFormat.WriteBranch(page, node), node);
        PageFormat.Seal(page, position);
        node.Saved(position);
        return position;
    }

    /// <summary>An encoded leaf's page: sealed where the edit encoded it and written from there (a body wholly
    /// outside the buffer).</summary>
    private PagePosition WriteEncoded(TreeNode leaf)
    {
        PagePosition position = NextPosition();
        PageFormat.Seal(leaf.Encoded.Span, position);
        Reserve(0, leaf.Encoded);
        leaf.Saved(position);
        return position;
    }

    /// <summary>Drops an encoded leaf, now saved, from its reference: the chunk is written from its bytes, and a
    /// reader of the tree once it is published reads the page from the data file (no reader can reach the tree before
    /// the checkpoint has written it), so none ever meets an encoded leaf.</summary>
    private static void DropEncoded(PageReference reference, TreeNode node)
    {
        if (node.IsEncoded)
        {
            reference.DropCached();
        }
    }

    private static void CheckSize(int written, TreeNode node)
    {
        if (written != node.ByteSize)
        {
            ThrowHelper.ThrowInvalidOperation($"A page encoded to {written} bytes but was sized {node.ByteSize}.");
        }
    }

    private PagePosition NextPosition() =>
        ChunkFormat.PositionOf(_firstChunkId, checked(_pageBase + (uint)_toc.Count), _pagesPerChunk);

    /// <summary>Reserves <paramref name="length"/> bytes of the buffer for the next page, whose bytes go on with
    /// <paramref name="body"/>.</summary>
    private Span<byte> Reserve(int length, ReadOnlyMemory<byte> body = default)
    {
        if (_length + length > _buffer.Length)
        {
            byte[] larger = Rent(Math.Max(_buffer.Length * 2, _length + length));
            _buffer.AsSpan(0, _length).CopyTo(larger);
            Return(_buffer);
            _buffer = larger;
        }

        _toc.Add(((long)_length << 32) | (uint)checked(length + body.Length));
        _bodies.Add(body);
        Span<byte> page = _buffer.AsSpan(_length, length);
        _length += length;
        return page;
    }
}
