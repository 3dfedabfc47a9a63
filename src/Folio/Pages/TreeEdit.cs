namespace Folio.Pages;

/// <summary>
/// One checkpoint's changes to the trees, on the checkpoint's thread: the epoch that owns the nodes it creates
/// (changed in place from then on, never published before the checkpoint is durable), the reader that decodes saved
/// pages for it (copies it keeps only while it edits them), and the saved pages its copies and removals supersede
/// (their chunks lose a live page when the checkpoint commits; a discarded edit supersedes nothing).
/// </summary>
internal sealed class TreeEdit(int epoch, IPageReader reader)
{
    private readonly List<PagePosition> _superseded = [];

    public int Epoch { get; } = epoch;

    public IPageReader Reader { get; } = reader;

    /// <summary>Saved pages (tree pages and overflow values) the edit no longer reaches.</summary>
    public List<PagePosition> Superseded => _superseded;

    /// <summary>The node behind <paramref name="reference"/> in a form this edit may change: the node itself when
    /// the edit created it and did not encode it, else a copy (and the saved original is superseded; an encoded leaf
    /// is decoded into the copy).</summary>
    public TreeNode Writable(PageReference reference, out PageReference writableReference)
    {
        TreeNode node = reference.GetNode(Reader);
        if (node.Epoch == Epoch && !node.Position.IsSaved && !node.IsEncoded)
        {
            writableReference = reference;
            return node;
        }

        Supersede(node.Position);
        TreeNode copy = node.CopyFor(Epoch);
        writableReference = new PageReference(copy);
        return copy;
    }

    /// <summary>Records that a saved page is no longer reachable from the edited trees.</summary>
    public void Supersede(PagePosition position)
    {
        if (position.IsSaved)
        {
            _superseded.Add(position);
        }
    }
}
