namespace Folio.Pages;

/// <summary>
/// A branch page's link to a child: the child's position in the data file and, while unsaved or while it is a
/// resident branch (<see cref="BTree.ResidentLevels"/>), the child node in memory.
/// <para>
/// Protocol. The position is written once, by the checkpoint that saves the child, before any reader can reach the
/// reference (an unsaved node is only reachable from roots that are not published yet). The node is set by whoever
/// first decodes a resident branch (<see cref="Cache"/>, a compare-exchange: racing readers agree on one node) and
/// dropped (<see cref="DropCached"/>) by the checkpoint that saved it when it is not resident (an encoded leaf as soon
/// as the serializer gave it its position, before the tree is written and published), and by tests that
/// prove a dropped page reads back from its final position; it is never dropped while the child is unsaved.
/// Readers read it with an acquire load, so a node seen through the reference is fully constructed; a reader that
/// finds none reads the page through the buffer pool.
/// </para>
/// </summary>
internal sealed class PageReference
{
    private TreeNode? _node;
    private int _leafDepth;
    private int _entriesPerLeaf;
    private int _frameHint = -1;

    /// <summary>A reference to a node in memory (unsaved, or saved at <see cref="TreeNode.Position"/>).</summary>
    public PageReference(TreeNode node)
    {
        _node = node;
        Position = node.Position;
    }

    /// <summary>A reference to a saved page not read yet.</summary>
    public PageReference(PagePosition position) => Position = position;

    /// <summary>Where the child is saved; unsaved until a checkpoint writes it.</summary>
    public PagePosition Position { get; private set; }

    /// <summary>The child node if it is in memory, else null.</summary>
    public TreeNode? Cached => Volatile.Read(ref _node);

    /// <summary>The child node: the one in memory, else the page decoded for the caller alone (not kept).</summary>
    public TreeNode GetNode(IPageReader reader) => Volatile.Read(ref _node) ?? reader.ReadNode(Position);

    /// <summary>Keeps <paramref name="node"/>, the saved child decoded, unless a racing reader kept one first;
    /// returns the node kept.</summary>
    public TreeNode Cache(TreeNode node) => Interlocked.CompareExchange(ref _node, node, null) ?? node;

    /// <summary>Records the position its checkpoint gave the unsaved child (the checkpoint's writer, before the
    /// roots that reach this reference are published).</summary>
    public void Saved(PagePosition position) => Position = position;

    /// <summary>On a tree's root: the depth of its leaves that the last range walk found (0: none yet). A hint for
    /// prefetch, written and read without ordering (a stale value only asks for the wrong pages).</summary>
    public int LeafDepthHint => _leafDepth;

    /// <summary>On a tree's root: the entries of the first leaf the last range walk read (0: none yet); a hint, like
    /// <see cref="LeafDepthHint"/>.</summary>
    public int EntriesPerLeafHint => _entriesPerLeaf;

    /// <summary>A range walk from this root reached a leaf of <paramref name="entries"/> entries at
    /// <paramref name="depth"/> (any thread; plain stores, skipped when nothing changed).</summary>
    public void Learned(int depth, int entries)
    {
        if (_leafDepth != depth)
        {
            _leafDepth = depth;
        }

        if (_entriesPerLeaf != entries)
        {
            _entriesPerLeaf = entries;
        }
    }

    /// <summary>The buffer pool frame the child's page was last pinned in (-1: none yet): a hint that spares the next
    /// pin its page-table lookup. Written and read without ordering by any reader; the pool checks that the frame
    /// still holds the page before it pins it there, so a stale hint only costs the lookup it was to spare.</summary>
    public ref int FrameHint => ref _frameHint;

    /// <summary>Drops the cached node of a saved child, so the next read goes to the data file.</summary>
    public void DropCached()
    {
        if (Position.IsSaved)
        {
            Volatile.Write(ref _node, null);
        }
    }
}
