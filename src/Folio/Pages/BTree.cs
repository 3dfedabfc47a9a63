namespace Folio.Pages;

/// <summary>
/// The algorithms of the copy-on-write B+tree: lookups (any thread, from a published root) and changes (the
/// checkpoint's <see cref="TreeEdit"/>, which copies each saved node on the path it changes, and changes its own
/// nodes in place). A tree is a <see cref="PageReference"/> to its root, null when empty. Pages split when they
/// outgrow <see cref="PageFormat.TargetPageSize"/> or their entry limit, a page emptied by removals leaves its
/// parent, and a page that falls below a quarter of the target merges with a sibling when the two fit in one.
/// </summary>
internal static class BTree
{
    /// <summary>
    /// How many levels from the root stay decoded in memory once read (branches only: the root and its children,
    /// at most 1 + <see cref="PageFormat.MaxChildren"/> nodes a tree, whatever its size). Every read passes through
    /// them, so they are searched with their hints and pinned by no one; every page below them, and every leaf, is
    /// read in place in the buffer pool.
    /// </summary>
    public const int ResidentLevels = 2;

    /// <summary>
    /// The value of <paramref name="key"/>, if present; inline bytes are copied out of the page, so the value outlives
    /// every pin. Below the resident levels the descent pins one page at a time: pages are immutable, so a child's
    /// position read from its parent stays valid after the parent's unpin.
    /// </summary>
    public static bool TryGet(PageReference? root, string key, IPageReader reader, out StoredValue value)
        => Find(root, key, reader, copyValue: true, out value);

    /// <summary>Whether the tree holds <paramref name="key"/> (a lookup that copies no value).</summary>
    public static bool Contains(PageReference? root, string key, IPageReader reader)
        => Find(root, key, reader, copyValue: false, out _);

    private static bool Find(PageReference? root, string key, IPageReader reader, bool copyValue,
        out StoredValue value)
    {
        value = default;
        PageReference? reference = root;
        PagePosition position = default;
        int depth = 0;
        while (true)
        {
            if (reference is not null)
            {
                if (reference.Cached is { } node)
                {
                    if (node.IsLeaf)
                    {
                        return TryGetFrom(node, key, copyValue, out value);
                    }

                    reference = node.ChildAt(node.ChildIndex(key));
                    depth++;
                    continue;
                }

                position = reference.Position;
            }
            else if (depth == 0)
            {
                return false; // an empty tree
            }

            using PinnedPage pinned = reference is not null
                ? reader.Pin(position, ref reference.FrameHint)
                : reader.Pin(position);
            var page = new TreePage(pinned.Bytes);
            if (!page.HasSlots || (!page.IsLeaf && depth < ResidentLevels))
            {
                // A resident branch (decoded once, kept by its reference), or a page written before slots existed
                // (decoded for this read only).
                TreeNode decoded = PageFormat.DecodeChecked(pinned.Bytes.ToArray(), position);
                if (decoded.IsLeaf)
                {
                    return TryGetFrom(decoded, key, copyValue, out value);
                }

                if (depth < ResidentLevels && reference is not null)
                {
                    decoded = reference.Cache(decoded);
                }

                reference = decoded.ChildAt(decoded.ChildIndex(key));
                depth++;
                continue;
            }

            if (page.IsLeaf)
            {
                int index = page.Find(key);
                if (index < 0)
                {
                    return false;
                }

                value = copyValue ? page.ValueAt(index) : default;
                return true;
            }

            position = page.ChildAt(page.ChildIndex(key));
            reference = null;
            depth++;
        }
    }

    private static bool TryGetFrom(TreeNode leaf, string key, bool copyValue, out StoredValue value)
    {
        int index = leaf.Search(key);
        value = index >= 0 && copyValue ? leaf.ValueAt(index) : default;
        return index >= 0;
    }

    /// <summary>
    /// Calls <paramref name="sink"/> with every key of the tree at <paramref name="root"/> (leaves left to right),
    /// reading saved leaves in place through <paramref name="reader"/>: no page decoded (but those written before
    /// slots existed), no value read, no string made, one page pinned at a time (but under such an old page). Stops,
    /// and returns false, when the sink does. <paramref name="cancellationToken"/> is checked before each page read.
    /// </summary>
    public static bool VisitKeys(PageReference? root, IPageReader reader, KeySink sink,
        CancellationToken cancellationToken = default)
        => root is null || VisitReference(root, reader, sink, cancellationToken);

    private static bool VisitReference(PageReference reference, IPageReader reader, KeySink sink,
        CancellationToken cancellationToken)
        => reference.Cached is { } node
            ? VisitNode(node, reader, sink, cancellationToken)
            : VisitPage(reference.Position, reader, sink, cancellationToken);

    private static bool VisitNode(TreeNode node, IPageReader reader, KeySink sink,
        CancellationToken cancellationToken)
    {
        if (node.IsLeaf)
        {
            for (int i = 0; i < node.Count; i++)
            {
                if (!sink(node.KeyAt(i)))
                {
                    return false;
                }
            }

            return true;
        }

        foreach (PageReference child in node.Children)
        {
            if (!VisitReference(child, reader, sink, cancellationToken))
            {
                return false;
            }
        }

        return true;
    }

    private static bool VisitPage(PagePosition position, IPageReader reader, KeySink sink,
        CancellationToken cancellationToken)
    {
        cancellationToken.ThrowIfCancellationRequested();
        PagePosition[] children;
        using (PinnedPage pinned = reader.Pin(position))
        {
            var page = new TreePage(pinned.Bytes);
            if (!page.HasSlots)
            {
                // A page written before slots existed: decoded (its subtree is read with this page still pinned).
                return VisitNode(PageFormat.DecodeChecked(pinned.Bytes.ToArray(), position), reader, sink,
                    cancellationToken);
            }

            if (page.IsLeaf)
            {
                for (int i = 0; i < page.Count; i++)
                {
                    if (!sink(page.KeyAt(i)))
                    {
                        return false;
                    }
                }

                return true;
            }

            // The children's positions, copied so that no page stays pinned while its subtree is read.
            children = new PagePosition[page.Count];
            for (int i = 0; i < children.Length; i++)
            {
                children[i] = page.ChildAt(i);
            }
        }

        foreach (PagePosition child in children)
        {
            if (!VisitPage(child, reader, sink, cancellationToken))
            {
                return false;
            }
        }

        return true;
    }

    /// <summary>The highest id of the tree at <paramref name="root"/>: the last of its rightmost leaf; null for an
    /// empty tree, or when that leaf holds none (then the highest id is not known from it).</summary>
    public static string? HighestKey(PageReference? root, IPageReader reader)
    {
        PageReference? reference = root;
        for (int depth = 0; reference is not null; depth++)
        {
            TreeNode node = NodeAt(reference, depth, reader);
            if (node.IsLeaf)
            {
                return node.Count == 0 ? null : node.KeyAt(node.Count - 1);
            }

            reference = node.Count == 0 ? null : node.ChildAt(node.Count - 1);
        }

        return null;
    }

    /// <summary>The node behind <paramref name="reference"/> at <paramref name="depth"/> for a walk that needs it
    /// decoded (range reads): the node in memory, else the page decoded, and kept when it is a resident
    /// branch.</summary>
    private static TreeNode NodeAt(PageReference reference, int depth, IPageReader reader)
    {
        if (reference.Cached is { } node)
        {
            return node;
        }

        TreeNode read = reader.ReadNode(reference.Position);
        return depth < ResidentLevels && !read.IsLeaf ? reference.Cache(read) : read;
    }

    /// <summary>Drops the decoded nodes of a tree a checkpoint just saved, except its resident branches: what is
    /// below them is read back through the buffer pool. The checkpoint's thread, once the tree is saved.</summary>
    public static void ReleaseSaved(PageReference? root)
    {
        if (root is not null)
        {
            Release(root, 0);
        }

        static void Release(PageReference reference, int depth)
        {
            if (reference.Cached is not { } node)
            {
                return;
            }

            if (node.IsLeaf || depth >= ResidentLevels)
            {
                reference.DropCached();
                return;
            }

            foreach (PageReference child in node.Children)
            {
                Release(child, depth + 1);
            }
        }
    }

    /// <summary>Puts <paramref name="key"/>; returns true when it was added, false when it replaced a value.</summary>
    public static bool Put(TreeEdit edit, ref PageReference? root, string key, StoredValue value)
    {
        if (root is null)
        {
            TreeNode leaf = TreeNode.NewLeaf(edit.Epoch);
            leaf.InsertEntry(0, key, value);
            root = new PageReference(leaf);
            return true;
        }

        TreeNode node = edit.Writable(root, out root);
        bool added = PutInto(edit, node, key, value, out bool atEnd);
        if (node.IsOverfull)
        {
            TreeNode right = node.SplitUpperHalf(out string separator, atEnd);
            root = new PageReference(TreeNode.NewBranch(edit.Epoch, root, separator, new PageReference(right)));
        }

        return added;
    }

    /// <summary>
    /// Puts every change of <paramref name="puts"/> (puts only, ids in ascending ordinal order, each once); returns how
    /// many ids were added. Each page on the way is visited once per run of ids it holds instead of once per id: a
    /// branch routes a run to a child with one search for its first id and one for the child's bound, and a leaf
    /// places a run's ids from left to right. A run stops at the put that leaves its page overfull, and the page splits
    /// as under single puts, except where the run goes on right after the id just put (the next id sorts before the
    /// page's next one): then the page keeps everything up to that id and the run fills it again, and a branch whose
    /// last child split keeps all but its last child, as single puts keep at the tree's end. So a range of new ids
    /// fills its pages instead of leaving each half empty. With an <paramref name="encoder"/>, each leaf is encoded
    /// into its page's bytes as soon as the puts have moved past it (<see cref="LeafEncoder"/>).
    /// </summary>
    public static long PutSorted(TreeEdit edit, ref PageReference? root, ReadOnlySpan<TreeChange> puts,
        LeafEncoder? encoder = null)
    {
        if (puts.IsEmpty)
        {
            return 0;
        }

        root ??= new PageReference(TreeNode.NewLeaf(edit.Epoch));
        long added = 0;
        int done = 0;
        while (done < puts.Length)
        {
            TreeNode node = edit.Writable(root, out root);
            done += PutRun(edit, node, puts[done..], rightmost: true, encoder, ref added, out bool atEnd,
                out int keep);
            if (node.IsOverfull)
            {
                TreeNode right = keep > 0
                    ? node.SplitLeafAfter(keep, out string separator)
                    : node.SplitUpperHalf(out separator, atEnd);
                if (node.IsLeaf)
                {
                    encoder?.Split(node, right);
                }

                root = new PageReference(TreeNode.NewBranch(edit.Epoch, root, separator, new PageReference(right)));
            }
        }

        encoder?.FinishAll();
        return added;
    }

    /// <summary>Puts a leading run of <paramref name="puts"/> (all within <paramref name="node"/>'s range) into the
    /// subtree of <paramref name="node"/> (<paramref name="rightmost"/>: the tree's last), stopping after the put that
    /// leaves <paramref name="node"/> overfull; returns how many it put (at least one). <paramref name="atEnd"/>: the
    /// last of them went to the subtree's end. <paramref name="keep"/>: for an overfull leaf that the run goes on
    /// filling right after its last put, the entries to keep when it splits (else 0).</summary>
    private static int PutRun(TreeEdit edit, TreeNode node, ReadOnlySpan<TreeChange> puts, bool rightmost,
        LeafEncoder? encoder, ref long added, out bool atEnd, out int keep)
    {
        atEnd = false;
        keep = 0;
        int used = 0;
        if (node.IsLeaf)
        {
            encoder?.Enter(node);
            int from = 0; // every id before this index sorts below the next put's
            while (used < puts.Length)
            {
                ref readonly TreeChange put = ref puts[used++];
                int index = node.SearchFrom(put, from);
                if (index >= 0)
                {
                    atEnd = false;
                    SupersedeValue(edit, node.ValueAt(index));
                    node.SetValue(index, put.Value);
                    from = index + 1;
                }
                else
                {
                    atEnd = ~index == node.Count;
                    node.InsertEntry(~index, put.Id, put.Value);
                    added++;
                    from = ~index + 1;
                }

                if (node.IsOverfull)
                {
                    bool follows = used < puts.Length
                        && (from == node.Count || puts[used].CompareTo(node.KeyAt(from)) < 0);
                    keep = follows && from < node.Count && node.LeafPrefixFits(from) ? from : 0;
                    break;
                }
            }

            return used;
        }

        while (used < puts.Length && !node.IsOverfull)
        {
            ReadOnlySpan<TreeChange> rest = puts[used..];
            int child = node.ChildIndex(rest[0]);
            bool last = child == node.Count - 1;
            int run = last ? rest.Length : CountBelow(rest, node.KeyAt(child));
            TreeNode childNode = edit.Writable(node.ChildAt(child), out PageReference childReference);
            node.SetChild(child, childReference);
            int put = PutRun(edit, childNode, rest[..run], rightmost && last, encoder, ref added,
                out bool childAtEnd, out int childKeep);
            used += put;
            atEnd = childAtEnd && last;
            if (childNode.IsOverfull)
            {
                // Keep the child full when the ids after its new last one go after it too: the rest of its run, or,
                // at the tree's end, the ids commits add next.
                TreeNode right = childKeep > 0
                    ? childNode.SplitLeafAfter(childKeep, out string separator)
                    : childNode.SplitUpperHalf(out separator, childAtEnd && (put < run || (rightmost && last)));
                if (childNode.IsLeaf)
                {
                    encoder?.Split(childNode, right);
                }

                node.InsertChild(child, separator, new PageReference(right));
            }
        }

        return used;
    }

    /// <summary>How many of the ascending <paramref name="puts"/> sort below <paramref name="bound"/>.</summary>
    private static int CountBelow(ReadOnlySpan<TreeChange> puts, string bound)
    {
        int low = 0;
        int high = puts.Length - 1;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            if (puts[middle].CompareTo(bound) < 0)
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return low;
    }

    /// <summary>The levels below <paramref name="root"/> down to its leaves (reads the leftmost path).</summary>
    public static int LeafDepth(PageReference root, IPageReader reader)
    {
        int depth = 0;
        for (TreeNode node = root.GetNode(reader); !node.IsLeaf; node = node.ChildAt(0).GetNode(reader))
        {
            depth++;
        }

        return depth;
    }

    /// <summary>The position of the leaf whose range holds <paramref name="key"/>, read from the branches above it
    /// (<paramref name="depth"/>: <see cref="LeafDepth"/>), without reading the leaf.</summary>
    public static PagePosition LeafOf(PageReference root, string key, int depth, IPageReader reader)
    {
        PageReference reference = root;
        for (int level = 0; level < depth; level++)
        {
            TreeNode node = reference.GetNode(reader);
            reference = node.ChildAt(node.ChildIndex(key));
        }

        return reference.Position;
    }

    /// <summary>
    /// Compaction: copies into <paramref name="edit"/> every saved page of the tree that lies in one of
    /// <paramref name="chunks"/>, with the branches above it, so the checkpoint writes them into its own chunk and
    /// those chunks lose them; a rewritten leaf's overflow values in those chunks are read and written anew too. Only
    /// branches and the pages being moved are read: a leaf outside the chunks is known from its parent's child
    /// position and left alone (an overflow value in one of the chunks under such a leaf stays where it is). Returns
    /// the pages copied.
    /// </summary>
    public static int RewriteChunks(TreeEdit edit, ref PageReference? root, IReadOnlySet<uint> chunks)
    {
        if (root is null || chunks.Count == 0)
        {
            return 0;
        }

        int depth = LeafDepth(root, edit.Reader);
        int rewritten = 0;
        if (Rewrite(edit, root, depth, chunks, ref rewritten) is { } changed)
        {
            root = changed;
        }

        return rewritten;
    }

    /// <summary>Rewrites the subtree of <paramref name="reference"/> (<paramref name="depth"/> levels above its
    /// leaves); returns its new reference, or null when nothing under it moved.</summary>
    private static PageReference? Rewrite(TreeEdit edit, PageReference reference, int depth,
        IReadOnlySet<uint> chunks, ref int rewritten)
    {
        bool moves = reference.Position.IsSaved && chunks.Contains(reference.Position.ChunkId);
        if (depth == 0)
        {
            if (!moves)
            {
                return null;
            }

            TreeNode leaf = edit.Writable(reference, out PageReference leafReference);
            rewritten++;
            for (int i = 0; i < leaf.Count; i++)
            {
                StoredValue value = leaf.ValueAt(i);
                if (value.IsOverflow && value.Overflow.IsSaved && chunks.Contains(value.Overflow.ChunkId))
                {
                    ReadOnlyMemory<byte> bytes = value.Read(edit.Reader);
                    edit.Supersede(value.Overflow);
                    leaf.SetValue(i, new StoredValue(value.Sequence, value.TimestampTicks, bytes));
                }
            }

            return leafReference;
        }

        TreeNode node = reference.GetNode(edit.Reader);
        TreeNode? writable = null;
        PageReference? result = null;
        if (moves)
        {
            writable = edit.Writable(reference, out PageReference copied);
            result = copied;
            rewritten++;
        }

        for (int i = 0; i < node.Count; i++)
        {
            PageReference child = (writable ?? node).ChildAt(i);
            if (Rewrite(edit, child, depth - 1, chunks, ref rewritten) is { } changed)
            {
                if (writable is null)
                {
                    writable = edit.Writable(reference, out PageReference copied);
                    result = copied;
                }

                writable.SetChild(i, changed);
            }
        }

        return result;
    }

    /// <summary>Removes <paramref name="key"/>; returns false when it was absent (the tree is left as it
    /// was).</summary>
    public static bool Remove(TreeEdit edit, ref PageReference? root, string key)
    {
        if (!TryGet(root, key, edit.Reader, out _))
        {
            return false;
        }

        TreeNode node = edit.Writable(root!, out root);
        RemoveFrom(edit, node, key);
        while (true)
        {
            if (node.Count == 0)
            {
                root = null;
                return true;
            }

            if (node.IsLeaf || node.Count > 1)
            {
                return true;
            }

            // A branch left with one child: the child becomes the root (the branch was this edit's copy).
            root = node.ChildAt(0);
            node = root.GetNode(edit.Reader);
        }
    }

    /// <summary>Puts into the subtree of <paramref name="node"/>; <paramref name="atEnd"/> says the key went after
    /// every other key of the subtree (a split then leaves the lower page full).</summary>
    private static bool PutInto(TreeEdit edit, TreeNode node, string key, StoredValue value, out bool atEnd)
    {
        if (node.IsLeaf)
        {
            int index = node.Search(key);
            if (index >= 0)
            {
                atEnd = false;
                SupersedeValue(edit, node.ValueAt(index));
                node.SetValue(index, value);
                return false;
            }

            atEnd = ~index == node.Count;
            node.InsertEntry(~index, key, value);
            return true;
        }

        int child = node.ChildIndex(key);
        TreeNode childNode = edit.Writable(node.ChildAt(child), out PageReference childReference);
        node.SetChild(child, childReference);
        bool added = PutInto(edit, childNode, key, value, out bool childAtEnd);
        atEnd = childAtEnd && child == node.Count - 1;
        if (childNode.IsOverfull)
        {
            TreeNode right = childNode.SplitUpperHalf(out string separator, childAtEnd);
            node.InsertChild(child, separator, new PageReference(right));
        }

        return added;
    }

    private static void RemoveFrom(TreeEdit edit, TreeNode node, string key)
    {
        if (node.IsLeaf)
        {
            int index = node.Search(key);
            SupersedeValue(edit, node.ValueAt(index));
            node.RemoveEntry(index);
            return;
        }

        int child = node.ChildIndex(key);
        TreeNode childNode = edit.Writable(node.ChildAt(child), out PageReference childReference);
        node.SetChild(child, childReference);
        RemoveFrom(edit, childNode, key);
        if (childNode.Count == 0)
        {
            node.RemoveChild(child);
        }
        else if (childNode.ByteSize < PageFormat.TargetPageSize / 4 && node.Count > 1)
        {
            MergeWithSibling(edit, node, child);
        }
    }

    /// <summary>Merges child <paramref name="child"/> of <paramref name="parent"/> with a neighbour when both fit in
    /// one page.</summary>
    private static void MergeWithSibling(TreeEdit edit, TreeNode parent, int child)
    {
        int left = child > 0 ? child - 1 : child;
        int right = left + 1;
        TreeNode leftNode = parent.ChildAt(left).GetNode(edit.Reader);
        TreeNode rightNode = parent.ChildAt(right).GetNode(edit.Reader);
        string separator = parent.KeyAt(left);
        int size = leftNode.ByteSize + rightNode.ByteSize - PageFormat.PageHeaderSize
            + (leftNode.IsLeaf ? 0 : PageFormat.KeySize(separator));
        int limit = leftNode.IsLeaf ? PageFormat.MaxLeafEntries : PageFormat.MaxChildren;
        if (size > PageFormat.TargetPageSize || leftNode.Count + rightNode.Count > limit)
        {
            return;
        }

        TreeNode merged = edit.Writable(parent.ChildAt(left), out PageReference mergedReference);
        if (rightNode.Epoch != edit.Epoch || rightNode.Position.IsSaved)
        {
            edit.Supersede(rightNode.Position);
        }

        merged.Append(rightNode, separator);
        parent.SetChild(left, mergedReference);
        parent.RemoveChild(right);
    }

    private static void SupersedeValue(TreeEdit edit, in StoredValue value)
    {
        if (value.IsOverflow)
        {
            edit.Supersede(value.Overflow);
        }
    }

    /// <summary>The most leaves one prefetch request of a range cursor names.</summary>
    public const int PrefetchWindow = 8;

    /// <summary>The fewest leaves worth a prefetch request: below it, the cursor reads them itself.</summary>
    public const int PrefetchMinimum = 2;

    /// <summary>
    /// The entries with ids in [<paramref name="fromInclusive"/>, <paramref name="toExclusive"/>) (null: unbounded),
    /// in ascending or descending ordinal order, read lazily from a published (immutable) root.
    /// <paramref name="expectedEntries"/> is how many entries the caller expects to take at most (a hint for
    /// prefetch; <see cref="int.MaxValue"/>: no idea).
    /// <para>
    /// Prefetch (seed 004's bounded cursor prefetch): when the walk enters a leaf, it asks
    /// <paramref name="reader"/> to read ahead the leaves it will visit next under the same parent: at most
    /// <see cref="PrefetchWindow"/>, only those the parent's separators put before the range's far bound (or that the
    /// expected entries still need, at this leaf's entry count), none when there are fewer than
    /// <see cref="PrefetchMinimum"/>, when the scan has neither bound nor expectation (an unbounded scan reads
    /// sequentially enough on its own), or when the first of them is cached (a hot range). Only leaves are asked
    /// for: the top <see cref="ResidentLevels"/> levels are never read from disk, and the branches between them and
    /// the leaves are few enough to stay cached. A parent already asked for is asked again only when the walk gets
    /// within half a window of the last leaf asked for. The root's reference remembers the depth of the leaves and the
    /// entries of a leaf that the last walk found (<see cref="PageReference.Learned"/>), so a later walk asks for the
    /// leaves after its first one as soon as it reaches their parent, before it reads that first leaf: their reads
    /// overlap its read instead of following it.
    /// </para>
    /// <para>
    /// Runs: when the leaf the walk is about to read (its first, or one it reaches that the worker has not loaded) is
    /// not cached, it is read together with the leaves the walk needs after it under the same parent that lie next to
    /// it in the file (<see cref="IPageReader.ReadRun"/>: a checkpoint writes a tree's leaves in key order, back to
    /// back), in one read that costs about what reading that leaf alone would; only the leaves the run did not cover
    /// go to the worker. And a walk never reads a leaf its parent's separators put wholly past the far bound.
    /// </para>
    /// </summary>
    public static IEnumerable<KeyValuePair<string, StoredValue>> Range(PageReference? root, string? fromInclusive,
        string? toExclusive, bool descending, IPageReader reader, int expectedEntries = int.MaxValue)
    {
        if (root is null)
        {
            yield break;
        }

        var path = new Stack<(TreeNode Node, int Index)>();
        TreeNode node = NodeAt(root, 0, reader);
        string? start = descending ? toExclusive : fromInclusive;
        string? farBound = descending ? fromInclusive : toExclusive;
        bool prefetch = reader.PrefetchEnabled && (farBound is not null || expectedEntries != int.MaxValue);
        var asked = new PrefetchProgress();
        long yielded = 0;
        bool learned = false;
        while (true)
        {
            // Descend to the leaf holding the start, then walk leaves, climbing when one is done.
            while (!node.IsLeaf)
            {
                int index = start is null ? (descending ? node.Count - 1 : 0) : node.ChildIndex(start);
                path.Push((node, index));
                if (prefetch && path.Count == root.LeafDepthHint)
                {
                    // The children are leaves (as the last walk of this tree found): ask for the ones after the
                    // first before reading it, so their reads overlap its own.
                    int perLeaf = root.EntriesPerLeafHint;
                    long afterFirst = expectedEntries == int.MaxValue ? long.MaxValue
                        : perLeaf == 0 ? 0 : (long)expectedEntries - yielded - Math.Max(1, perLeaf / 2);
                    PrefetchSiblings(reader, node, index, descending, farBound, afterFirst, perLeaf, ref asked,
                        readChild: true);
                }

                node = NodeAt(node.ChildAt(index), path.Count, reader);
            }

            if (!learned && path.Count > 0)
            {
                learned = true;
                root.Learned(path.Count, node.Count);
            }

            int at;
            if (start is null)
            {
                at = descending ? node.Count - 1 : 0;
            }
            else
            {
                int found = node.Search(start);
                at = descending ? (found >= 0 ? found - 1 : ~found - 1) : (found >= 0 ? found : ~found);
            }

            start = null;
            if (prefetch && path.TryPeek(out (TreeNode Node, int Index) leafParent))
            {
                long afterLeaf = (long)expectedEntries - yielded - (descending ? at + 1 : node.Count - at);
                PrefetchSiblings(reader, leafParent.Node, leafParent.Index, descending, farBound,
                    expectedEntries == int.MaxValue ? long.MaxValue : afterLeaf, node.Count, ref asked);
            }

            if (descending)
            {
                for (; at >= 0; at--)
                {
                    string key = node.KeyAt(at);
                    if (fromInclusive is not null && string.CompareOrdinal(key, fromInclusive) < 0)
                    {
                        yield break;
                    }

                    yielded++;
                    yield return new KeyValuePair<string, StoredValue>(key, node.ValueAt(at));
                }
            }
            else
            {
                for (; at < node.Count; at++)
                {
                    string key = node.KeyAt(at);
                    if (toExclusive is not null && string.CompareOrdinal(key, toExclusive) >= 0)
                    {
                        yield break;
                    }

                    yielded++;
                    yield return new KeyValuePair<string, StoredValue>(key, node.ValueAt(at));
                }
            }

            // Climb to the first ancestor with a next child, and descend from there.
            while (true)
            {
                if (!path.TryPop(out (TreeNode Node, int Index) parent))
                {
                    yield break;
                }

                int next = descending ? parent.Index - 1 : parent.Index + 1;
                if (next >= 0 && next < parent.Node.Count)
                {
                    // Child c holds the ids from separator c - 1 up to separator c: one wholly past the far bound,
                    // and all after it, hold nothing the walk returns, so it is not read.
                    if (farBound is not null && (descending
                        ? string.CompareOrdinal(parent.Node.KeyAt(next), farBound) <= 0
                        : string.CompareOrdinal(parent.Node.KeyAt(next - 1), farBound) >= 0))
                    {
                        yield break;
                    }

                    path.Push((parent.Node, next));
                    if (prefetch && path.Count == root.LeafDepthHint && yielded < expectedEntries)
                    {
                        // A leaf the worker has not loaded (it fell behind, or dropped the request): read it with
                        // the leaves after it in one read.
                        PrefetchSiblings(reader, parent.Node, next, descending, farBound,
                            expectedEntries == int.MaxValue ? long.MaxValue
                                : (long)expectedEntries - yielded - root.EntriesPerLeafHint,
                            root.EntriesPerLeafHint, ref asked, readChild: true);
                    }

                    node = NodeAt(parent.Node.ChildAt(next), path.Count, reader);
                    break;
                }
            }
        }
    }

    /// <summary>
    /// Every entry of the tree at <paramref name="root"/> in ascending order, as <see cref="Range"/> without bounds,
    /// except under a page that fails its checks: such a page (and what lies below it, which only it names) is
    /// reported to <paramref name="onDamage"/> with the ids it covers, from the separator before it (inclusive; null:
    /// the tree's first id) to the one after it (exclusive; null: past the last), and the walk goes on with the next
    /// page. For salvaging what a damaged data file still holds; no prefetch, one page decoded at a time per level.
    /// </summary>
    public static IEnumerable<KeyValuePair<string, StoredValue>> RangeSkippingDamage(PageReference? root,
        IPageReader reader, Action<string?, string?, StoreCorruptedException> onDamage) =>
        root is null ? [] : WalkSkippingDamage(root, 0, null, null, reader, onDamage);

    private static IEnumerable<KeyValuePair<string, StoredValue>> WalkSkippingDamage(PageReference reference,
        int depth, string? from, string? to, IPageReader reader,
        Action<string?, string?, StoreCorruptedException> onDamage)
    {
        TreeNode node;
        try
        {
            node = NodeAt(reference, depth, reader);
        }
        catch (StoreCorruptedException damage)
        {
            onDamage(from, to, damage);
            yield break;
        }

        if (node.IsLeaf)
        {
            for (int i = 0; i < node.Count; i++)
            {
                yield return new KeyValuePair<string, StoredValue>(node.KeyAt(i), node.ValueAt(i));
            }

            yield break;
        }

        for (int child = 0; child < node.Count; child++)
        {
            string? low = child == 0 ? from : node.KeyAt(child - 1);
            string? high = child == node.Count - 1 ? to : node.KeyAt(child);
            foreach (KeyValuePair<string, StoredValue> entry in WalkSkippingDamage(node.ChildAt(child), depth + 1,
                low, high, reader, onDamage))
            {
                yield return entry;
            }
        }
    }

    /// <summary>The last prefetch request of a range walk: the parent it named leaves of, and the index of the last
    /// leaf named.</summary>
    private struct PrefetchProgress
    {
        public TreeNode? Parent;
        public int LastIndex;
    }

    /// <summary>
    /// Asks <paramref name="reader"/> for the leaves after child <paramref name="index"/> of
    /// <paramref name="parent"/> (in the walk's direction) that the walk will read (<see cref="Range"/>'s rules):
    /// those before <paramref name="farBound"/>, as many as <paramref name="entriesAfterLeaf"/> entries need at
    /// <paramref name="leafEntries"/> a leaf, at most <see cref="PrefetchWindow"/>. With <paramref name="readChild"/>
    /// (the walk is about to read child <paramref name="index"/>), when that child is not cached it is read at once
    /// with those of the leaves that follow it in the file (<see cref="IPageReader.ReadRun"/>), and only the rest are
    /// asked for.
    /// </summary>
    private static void PrefetchSiblings(IPageReader reader, TreeNode parent, int index, bool descending,
        string? farBound, long entriesAfterLeaf, int leafEntries, ref PrefetchProgress asked, bool readChild = false)
    {
        if (entriesAfterLeaf <= 0)
        {
            return;
        }

        int step = descending ? -1 : 1;
        int perLeaf = Math.Max(1, leafEntries);
        long needed = entriesAfterLeaf == long.MaxValue ? PrefetchWindow : ((entriesAfterLeaf - 1) / perLeaf) + 1;
        Span<PagePosition> chosen = stackalloc PagePosition[PrefetchWindow + 1];
        Span<int> children = stackalloc int[PrefetchWindow + 1];
        PageReference current = parent.ChildAt(index);
        if (readChild && current.Cached is null && current.Position.IsSaved && !reader.IsCached(current.Position))
        {
            // Not read yet, whatever the worker was asked: a run starts at it (the worker, if it reads some of the
            // same leaves meanwhile, finds them cached, or loads them first).
            chosen[0] = current.Position;
            children[0] = index;
            // Up to the far bound when there is one; else one leaf more than the estimate, which may fall one short
            // (a leaf's entries vary, and the walk may start anywhere in the first): in the same read a leaf costs
            // next to nothing, where a read of its own would cost as much as the run.
            int runLimit = farBound is not null ? PrefetchWindow : (int)Math.Min(PrefetchWindow, needed + 1);
            int runCount = 1 + ChooseLeaves(parent, index + step, step, runLimit, farBound, chosen[1..],
                children[1..]);
            int read = runCount > 1 ? reader.ReadRun(chosen[..runCount]) : 0;
            if (read > 0)
            {
                // The run holds the child and the leaves after it up to read - 1; ask for the rest.
                asked.Parent = parent;
                asked.LastIndex = children[read - 1];
                if (runCount - read >= PrefetchMinimum)
                {
                    asked.LastIndex = children[runCount - 1];
                    reader.Prefetch(chosen[read..runCount].ToArray());
                }

                return;
            }
        }

        int first = index + step;
        if (ReferenceEquals(asked.Parent, parent))
        {
            int ahead = (asked.LastIndex - index) * step;
            if (ahead > PrefetchWindow / 2)
            {
                return; // the leaves ahead were asked for already
            }

            first = ahead > 0 ? asked.LastIndex + step : first;
        }

        int skipped = ((first - index) * step) - 1; // leaves ahead asked for by the last request, 0 to a half window
        int limit = (int)Math.Min(PrefetchWindow - skipped, needed - skipped);
        int count = ChooseLeaves(parent, first, step, limit, farBound, chosen, children);
        if (count < PrefetchMinimum || reader.IsCached(chosen[0]))
        {
            return;
        }

        asked.Parent = parent;
        asked.LastIndex = children[count - 1];
        reader.Prefetch(chosen[..count].ToArray());
    }

    /// <summary>Puts in <paramref name="chosen"/> (and their indexes in <paramref name="children"/>) the saved leaves
    /// not in memory among children <paramref name="first"/>, <paramref name="first"/> + <paramref name="step"/>, ...
    /// of <paramref name="parent"/> that lie before <paramref name="farBound"/>, at most <paramref name="limit"/>;
    /// returns how many.</summary>
    private static int ChooseLeaves(TreeNode parent, int first, int step, int limit, string? farBound,
        Span<PagePosition> chosen, Span<int> children)
    {
        int count = 0;
        for (int child = first; child >= 0 && child < parent.Count && count < limit; child += step)
        {
            // Child c holds the ids from separator c - 1 up to separator c.
            if (farBound is not null && (step < 0
                ? string.CompareOrdinal(parent.KeyAt(child), farBound) <= 0
                : string.CompareOrdinal(parent.KeyAt(child - 1), farBound) >= 0))
            {
                break;
            }

            PageReference reference = parent.ChildAt(child);
            if (reference.Cached is null && reference.Position.IsSaved)
            {
                chosen[count] = reference.Position;
                children[count++] = child;
            }
        }

        return count;
    }
}
