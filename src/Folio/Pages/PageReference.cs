namespace Folio.Pages;

/// <summary>
/// A branch page's link to a child: the child's position in the data file and, once read or while unsaved, the
/// child node in memory.
/// <para>
/// Protocol. The position is written once, by the checkpoint that saves the child, before any reader can reach the
/// reference (an unsaved node is only reachable from roots that are not published yet). The cached node is set by
/// whoever first reads the child (a compare-exchange: racing readers agree on one node) and may be dropped again
/// (<see cref="DropCached"/>: the buffer pool's eviction, and tests that prove a dropped page reads back from its
/// final position); it is never dropped while the child is unsaved. Readers read it with an acquire load, so a node
/// seen through the reference is fully constructed.
/// </para>
/// </summary>
internal sealed class PageReference
{
    private TreeNode? _node;

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

    /// <summary>The child node, read from the data file when it is not in memory.</summary>
    public TreeNode GetNode(IPageReader reader) => Volatile.Read(ref _node) ?? Load(reader);

    /// <summary>Records the position its checkpoint gave the unsaved child (the checkpoint's writer, before the
    /// roots that reach this reference are published).</summary>
    public void Saved(PagePosition position) => Position = position;

    /// <summary>Drops the cached node of a saved child, so the next read goes to the data file.</summary>
    public void DropCached()
    {
        if (Position.IsSaved)
        {
            Volatile.Write(ref _node, null);
        }
    }

    private TreeNode Load(IPageReader reader)
    {
        TreeNode node = reader.ReadNode(Position);
        return Interlocked.CompareExchange(ref _node, node, null) ?? node;
    }
}
