namespace Folio.Pages;

/// <summary>
/// Encodes the leaves of one <see cref="BTree.PutSorted"/> into their pages' bytes as soon as no later put of it can
/// reach them, so a checkpoint holds each leaf's ids and values as objects only while it fills that leaf, not until
/// the whole checkpoint is written (<see cref="TreeNode.Encode"/>; the bytes go to a <see cref="LeafArena"/>).
/// <para>
/// Why a leaf is finished. The puts arrive in ascending order of their ids and each id once, and leaves cover
/// disjoint ranges of ids in order. So once a put lands in a leaf, every later put sorts at or after it, past the
/// range of every leaf before that one: those leaves receive no more puts. The leaves this edit touched and did not
/// encode yet are kept in key order (<see cref="Enter"/> adds the leaf a put lands in; <see cref="Split"/> the new
/// right half of a leaf, just after it); a put landing in one of them finishes those before it, and a put landing in
/// a leaf not among them, which then lies after them all, finishes them all. <see cref="FinishAll"/> encodes the rest
/// when the puts are placed. Should a later change of the same edit reach an encoded leaf anyway,
/// <see cref="TreeEdit.Writable"/> decodes it into a new node, so the rule costs speed if wrong, never data.
/// </para>
/// <para>
/// A leaf with a value that goes to an overflow page not written yet stays a node: its page refers to the overflow
/// page's position, which the serializer gives out. Owned by the thread that applies the edit.
/// </para>
/// </summary>
internal sealed class LeafEncoder(LeafArena arena)
{
    private readonly List<TreeNode> _pending = []; // touched, not encoded, in key order

    /// <summary>Leaves encoded so far.</summary>
    public int Encoded { get; private set; }

    /// <summary>A put lands in <paramref name="leaf"/>: the pending leaves before it are finished.</summary>
    public void Enter(TreeNode leaf)
    {
        int at = IndexOf(leaf);
        if (at >= 0)
        {
            FinishFirst(at);
            return;
        }

        FinishFirst(_pending.Count);
        _pending.Add(leaf);
    }

    /// <summary><paramref name="left"/>, a pending leaf, split off <paramref name="right"/>, the range just after
    /// it.</summary>
    public void Split(TreeNode left, TreeNode right)
    {
        int at = IndexOf(left);
        if (at < 0)
        {
            // Not entered (a leaf that split without a put landing in it): it and its half come after every
            // pending leaf, as any leaf of a later put does.
            FinishFirst(_pending.Count);
            _pending.Add(left);
            at = 0;
        }

        _pending.Insert(at + 1, right);
    }

    /// <summary>The puts are placed: encodes every pending leaf.</summary>
    public void FinishAll() => FinishFirst(_pending.Count);

    private int IndexOf(TreeNode leaf)
    {
        // The leaf a put lands in is the last pending one, or the one before it when that is its split-off half.
        for (int i = _pending.Count - 1; i >= 0; i--)
        {
            if (ReferenceEquals(_pending[i], leaf))
            {
                return i;
            }
        }

        return -1;
    }

    private void FinishFirst(int count)
    {
        for (int i = 0; i < count; i++)
        {
            TreeNode leaf = _pending[i];
            if (leaf.CanEncode)
            {
                leaf.Encode(arena);
                Encoded++;
            }
        }

        _pending.RemoveRange(0, count);
    }
}
