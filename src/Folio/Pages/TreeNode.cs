namespace Folio.Pages;

/// <summary>
/// One page of a copy-on-write B+tree in memory: a leaf (sorted ids and their <see cref="StoredValue"/>s) or a
/// branch (children and the separator ids between them: child i holds the ids below separator i, child i + 1 those
/// at or above it).
/// <para>
/// Protocol. A node belongs to the edit that created it (<see cref="Epoch"/>). Only that edit, on the checkpoint's
/// thread, changes it in place, and only before the roots that reach it are published; a node of an older epoch is
/// immutable and is copied to be changed (<see cref="TreeEdit.Writable"/>). So every node a reader can reach is
/// immutable, and readers need no locks: they walk from a published root, reading children through
/// <see cref="PageReference"/>. <see cref="Position"/> is set by the checkpoint that saves the node, also before
/// publication.
/// </para>
/// <para>
/// Encoded leaves. The edit may encode a leaf it finished (<see cref="Encode"/>): the leaf then holds its page's bytes
/// (<see cref="Encoded"/>, sealed by the serializer with the position it gives out) instead of its ids and values,
/// and only <see cref="IsLeaf"/>, <see cref="Count"/>, <see cref="ByteSize"/>, <see cref="Position"/> and
/// <see cref="CopyFor"/> (which decodes the bytes) may be used. The serializer drops it from its reference once it is
/// saved, so no reader ever meets one.
/// </para>
/// </summary>
internal sealed class TreeNode
{
    private string[] _keys;
    private StoredValue[]? _values;
    private PageReference[]? _children;
    private int _count;
    private int _byteSize;
    private SearchHints? _hints; // saved nodes only, built on their first search
    private Memory<byte> _encoded; // an encoded leaf's page (Encode)

    private TreeNode(int epoch, string[] keys, StoredValue[]? values, PageReference[]? children, int count,
        int byteSize, PagePosition position)
    {
        Epoch = epoch;
        _keys = keys;
        _values = values;
        _children = children;
        _count = count;
        _byteSize = byteSize;
        Position = position;
    }

    /// <summary>The edit that created the node; only it may change the node in place.</summary>
    public int Epoch { get; }

    /// <summary>Where the node is saved; unsaved until a checkpoint writes it.</summary>
    public PagePosition Position { get; private set; }

    public bool IsLeaf => _values is not null;

    /// <summary>Whether the leaf holds its page's bytes (<see cref="Encoded"/>) instead of its entries.</summary>
    public bool IsEncoded => !_encoded.IsEmpty;

    /// <summary>An encoded leaf's page: <see cref="ByteSize"/> bytes, its checksum written by the serializer, in place
    /// (the chunk is written from here).</summary>
    public Memory<byte> Encoded => _encoded;

    /// <summary>Whether <see cref="Encode"/> may encode the node: an unsaved leaf, not encoded, whose every overflow
    /// value is saved (an unsaved one gets its position from the serializer).</summary>
    public bool CanEncode
    {
        get
        {
            if (!IsLeaf || IsEncoded || Position.IsSaved)
            {
                return false;
            }

            foreach (StoredValue value in Values)
            {
                if (value.IsOverflow && !value.Overflow.IsSaved)
                {
                    return false;
                }
            }

            return true;
        }
    }

    /// <summary>Entries of a leaf, children of a branch.</summary>
    public int Count => _count;

    /// <summary>The page's encoded size in bytes (header included).</summary>
    public int ByteSize => _byteSize;

    /// <summary>A leaf's ids, or a branch's separators (<see cref="Count"/> - 1 of them).</summary>
    public ReadOnlySpan<string> Keys => _keys.AsSpan(0, IsLeaf ? _count : Math.Max(0, _count - 1));

    public ReadOnlySpan<StoredValue> Values => _values.AsSpan(0, _count);

    public ReadOnlySpan<PageReference> Children => _children.AsSpan(0, _count);

    public string KeyAt(int index) => _keys[index];

    public StoredValue ValueAt(int index) => _values![index];

    public PageReference ChildAt(int index) => _children![index];

    /// <summary>An empty leaf of <paramref name="epoch"/>.</summary>
    public static TreeNode NewLeaf(int epoch) =>
        new(epoch, new string[8], new StoredValue[8], null, 0, PageFormat.PageHeaderSize, default);

    /// <summary>A branch of <paramref name="epoch"/> over two children split at <paramref name="separator"/>.</summary>
    public static TreeNode NewBranch(int epoch, PageReference left, string separator, PageReference right)
    {
        var keys = new string[8];
        var children = new PageReference[8];
        children[0] = left;
        children[1] = right;
        keys[0] = separator;
        int size = PageFormat.PageHeaderSize + (2 * PageFormat.ChildReferenceSize) + PageFormat.KeySize(separator);
        return new TreeNode(epoch, keys, null, children, 2, size, default);
    }

    /// <summary>A saved leaf decoded from its page (arrays exactly sized).</summary>
    public static TreeNode SavedLeaf(PagePosition position, string[] keys, StoredValue[] values, int byteSize) =>
        new(0, keys, values, null, keys.Length, byteSize, position);

    /// <summary>A saved branch decoded from its page.</summary>
    public static TreeNode SavedBranch(PagePosition position, string[] separators, PageReference[] children,
        int byteSize) => new(0, separators, null, children, children.Length, byteSize, position);

    /// <summary>A copy of this node owned by <paramref name="epoch"/>, with room to grow.</summary>
    public TreeNode CopyFor(int epoch)
    {
        if (IsEncoded)
        {
            return PageFormat.DecodeChecked(_encoded, default).CopyFor(epoch);
        }

        int capacity = Math.Max(8, _count + 4);
        var keys = new string[capacity];
        _keys.AsSpan(0, IsLeaf ? _count : Math.Max(0, _count - 1)).CopyTo(keys);
        if (IsLeaf)
        {
            var values = new StoredValue[capacity];
            _values.AsSpan(0, _count).CopyTo(values);
            return new TreeNode(epoch, keys, values, null, _count, _byteSize, default);
        }

        var children = new PageReference[capacity];
        _children.AsSpan(0, _count).CopyTo(children);
        return new TreeNode(epoch, keys, null, children, _count, _byteSize, default);
    }

    /// <summary>The index of <paramref name="key"/> in a leaf, or the complement of where it would go.</summary>
    public int Search(string key)
    {
        int outside = PrepareSearch(key, _count, out ulong[]? packedKeys, out ulong packed);
        if (outside != 0)
        {
            return outside < 0 ? ~0 : ~_count;
        }

        int low = 0;
        int high = _count - 1;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            int comparison = CompareAt(middle, key, packedKeys, packed);
            if (comparison == 0)
            {
                return middle;
            }

            if (comparison < 0)
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return ~low;
    }

    /// <summary>Like <see cref="Search"/>, for the id of <paramref name="change"/>, known to sort after every id
    /// before index <paramref name="from"/> (ids placed in ascending order); compares code units, as an unsaved node
    /// has no hints (and the change's id may be bytes).</summary>
    public int SearchFrom(in TreeChange change, int from)
    {
        int low = from;
        int high = _count - 1;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            int comparison = change.CompareTo(_keys[middle]);
            if (comparison == 0)
            {
                return middle;
            }

            if (comparison > 0)
            {
                low = middle + 1;
            }
            else
            {
                high = middle - 1;
            }
        }

        return ~low;
    }

    /// <summary>The child of a branch whose range holds <paramref name="key"/>.</summary>
    public int ChildIndex(string key)
    {
        // The number of separators at or below the key.
        int separators = _count - 1;
        int outside = PrepareSearch(key, separators, out ulong[]? packedKeys, out ulong packed);
        if (outside != 0)
        {
            return outside < 0 ? 0 : separators;
        }

        int low = 0;
        int high = separators - 1;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            if (CompareAt(middle, key, packedKeys, packed) <= 0)
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

    /// <summary>Like <see cref="ChildIndex(string)"/>, for the id of <paramref name="change"/> (a string or bytes),
    /// without the hints: a checkpoint routes each run of its puts through a branch once.</summary>
    public int ChildIndex(in TreeChange change)
    {
        int low = 0;
        int high = _count - 2;
        while (low <= high)
        {
            int middle = (low + high) >>> 1;
            if (change.CompareTo(_keys[middle]) >= 0)
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

    /// <summary>
    /// Prepares a search of the first <paramref name="keyCount"/> keys: with hints (a saved node), the packed keys and
    /// the search key packed the same way, and the sign of the search key against the keys' shared prefix (nonzero:
    /// it sorts before or after every key, no search needed); without, null and zero.
    /// </summary>
    private int PrepareSearch(string key, int keyCount, out ulong[]? packedKeys, out ulong packed)
    {
        packedKeys = null;
        packed = 0;
        if (HintsFor(keyCount) is not { } hints)
        {
            return 0;
        }

        int outside = Outside(hints, key);
        if (outside == 0)
        {
            packedKeys = hints.Values;
            packed = SearchHints.Pack(key, hints.Prefix.Length);
        }

        return outside;
    }

    /// <summary>The ordinal order of key <paramref name="index"/> against <paramref name="key"/>, from the packed
    /// values when they differ, else from the strings.</summary>
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.AggressiveInlining)]
    private int CompareAt(int index, string key, ulong[]? packedKeys, ulong packed)
    {
        if (packedKeys is null || packedKeys[index] == packed)
        {
            return string.CompareOrdinal(_keys[index], key);
        }

        return packedKeys[index] < packed ? -1 : 1;
    }

    /// <summary>The search hints of a saved node with at least 8 keys (<paramref name="keyCount"/>), built on first
    /// use; null for an unsaved node, whose keys may still change.</summary>
    private SearchHints? HintsFor(int keyCount)
    {
        if (keyCount < 8 || !Position.IsSaved)
        {
            return null;
        }

        return Volatile.Read(ref _hints) ?? BuildHints(keyCount);
    }

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private SearchHints BuildHints(int keyCount)
    {
        SearchHints hints = SearchHints.Build(_keys.AsSpan(0, keyCount));
        return Interlocked.CompareExchange(ref _hints, hints, null) ?? hints;
    }

    /// <summary>Negative when <paramref name="key"/> sorts before every key sharing the hints' prefix, positive when
    /// after, zero when it shares the prefix.</summary>
    private static int Outside(SearchHints hints, string key) =>
        string.CompareOrdinal(key, 0, hints.Prefix, 0, hints.Prefix.Length);

    /// <summary>Records the position the checkpoint gave this node (its writer, before publication).</summary>
    public void Saved(PagePosition position) => Position = position;

    // ---- In-place changes: the owning edit only (Epoch == edit's epoch), before publication. ----

    /// <summary>Encodes this leaf (<see cref="CanEncode"/>) into bytes from <paramref name="arena"/> and lets go of
    /// its ids and values: from now on it is its page (see the protocol).</summary>
    public void Encode(LeafArena arena)
    {
        System.Diagnostics.Debug.Assert(CanEncode);
        Memory<byte> page = arena.Allocate(_byteSize);
        int written = PageFormat.WriteLeaf(page.Span, this);
        if (written != _byteSize)
        {
            ThrowHelper.ThrowInvalidOperation($"A leaf encoded to {written} bytes but was sized {_byteSize}.");
        }

        _encoded = page;
        _keys = [];
        _values = [];
    }

    public void InsertEntry(int index, string key, StoredValue value)
    {
        EnsureCapacity(_count + 1);
        Array.Copy(_keys, index, _keys, index + 1, _count - index);
        Array.Copy(_values!, index, _values!, index + 1, _count - index);
        _keys[index] = key;
        _values![index] = value;
        _count++;
        _byteSize += PageFormat.EntrySize(key, value);
    }

    public void SetValue(int index, StoredValue value)
    {
        _byteSize += PageFormat.ValueSize(value) - PageFormat.ValueSize(_values![index]);
        _values[index] = value;
    }

    public void RemoveEntry(int index)
    {
        _byteSize -= PageFormat.EntrySize(_keys[index], _values![index]);
        Array.Copy(_keys, index + 1, _keys, index, _count - index - 1);
        Array.Copy(_values, index + 1, _values, index, _count - index - 1);
        _count--;
        _keys[_count] = null!;
        _values[_count] = default;
    }

    public void SetChild(int index, PageReference child) => _children![index] = child;

    /// <summary>Inserts <paramref name="right"/> after child <paramref name="index"/>, separated by
    /// <paramref name="separator"/>.</summary>
    public void InsertChild(int index, string separator, PageReference right)
    {
        EnsureCapacity(_count + 1);
        Array.Copy(_children!, index + 1, _children!, index + 2, _count - index - 1);
        Array.Copy(_keys, index, _keys, index + 1, _count - 1 - index);
        _children![index + 1] = right;
        _keys[index] = separator;
        _count++;
        _byteSize += PageFormat.ChildReferenceSize + PageFormat.KeySize(separator);
    }

    /// <summary>Removes child <paramref name="index"/> and the separator next to it.</summary>
    public void RemoveChild(int index)
    {
        int separator = index == 0 ? 0 : index - 1;
        if (_count > 1)
        {
            _byteSize -= PageFormat.ChildReferenceSize + PageFormat.KeySize(_keys[separator]);
            Array.Copy(_keys, separator + 1, _keys, separator, _count - 2 - separator);
            _keys[_count - 2] = null!;
        }
        else
        {
            _byteSize -= PageFormat.ChildReferenceSize;
        }

        Array.Copy(_children!, index + 1, _children!, index, _count - index - 1);
        _count--;
        _children![_count] = null!;
    }

    /// <summary>Moves the upper half of this node (only its last entry or child when <paramref name="atEnd"/>: ids
    /// arriving in ascending order then leave full pages behind) into a new node of the same epoch; returns it and
    /// the separator (the first id of the new leaf, or the separator lifted out of a branch).</summary>
    public TreeNode SplitUpperHalf(out string separator, bool atEnd = false) =>
        SplitAfter(atEnd ? _count - 1 : BalancedSplit(), out separator);

    /// <summary>Like <see cref="SplitUpperHalf"/>, keeping the first <paramref name="keep"/> entries of a leaf (at
    /// least one, fewer than all): a leaf that ids arriving in ascending order enter in the middle keeps those before
    /// the next id, so the ids after it fill it instead of splitting it again and again. Only when those entries fit
    /// one page (<see cref="LeafPrefixFits"/>); the entries moved are a tail of the page before its last put, so they
    /// fit too.</summary>
    public TreeNode SplitLeafAfter(int keep, out string separator)
    {
        System.Diagnostics.Debug.Assert(IsLeaf && keep > 0 && keep < _count && LeafPrefixFits(keep));
        return SplitAfter(keep, out separator);
    }

    /// <summary>Whether the first <paramref name="keep"/> entries of this leaf fit one page.</summary>
    public bool LeafPrefixFits(int keep)
    {
        if (keep > PageFormat.MaxLeafEntries)
        {
            return false;
        }

        int size = PageFormat.PageHeaderSize;
        for (int i = 0; i < keep; i++)
        {
            size += PageFormat.EntrySize(_keys[i], _values![i]);
        }

        return size <= PageFormat.TargetPageSize;
    }

    private TreeNode SplitAfter(int keep, out string separator)
    {
        int move = _count - keep;
        var keys = new string[Math.Max(move + 4, _keys.Length)]; // the upper half fills up as this node did
        if (IsLeaf)
        {
            var values = new StoredValue[keys.Length];
            Array.Copy(_keys, keep, keys, 0, move);
            Array.Copy(_values!, keep, values, 0, move);
            Array.Clear(_keys, keep, move);
            Array.Clear(_values!, keep, move);
            _count = keep;
            var right = new TreeNode(Epoch, keys, values, null, move, 0, default);
            right.RecomputeSize();
            RecomputeSize();
            separator = keys[0];
            return right;
        }

        // Branch: children [keep, count) move; separator keep - 1 is lifted to the parent.
        var children = new PageReference[keys.Length];
        Array.Copy(_children!, keep, children, 0, move);
        Array.Copy(_keys, keep, keys, 0, move - 1);
        separator = _keys[keep - 1];
        Array.Clear(_children!, keep, move);
        Array.Clear(_keys, keep - 1, move);
        _count = keep;
        var branch = new TreeNode(Epoch, keys, null, children, move, 0, default);
        branch.RecomputeSize();
        RecomputeSize();
        return branch;
    }

    /// <summary>
    /// How many entries (children) stay when the node splits in two of about equal bytes: the split that makes the
    /// larger half smallest. A node passes the target by at most one entry, so both halves then fit the target (and
    /// a buffer pool frame) even when entries differ widely in size, which a split by count does not promise.
    /// </summary>
    private int BalancedSplit()
    {
        int total = _byteSize - PageFormat.PageHeaderSize;
        int best = _count / 2;
        int bestLarger = int.MaxValue;
        int left = 0;
        for (int keep = 1; keep < _count; keep++)
        {
            int right;
            if (IsLeaf)
            {
                left += PageFormat.EntrySize(_keys[keep - 1], _values![keep - 1]);
                right = total - left;
            }
            else
            {
                // Children [0, keep) and separators [0, keep - 1) stay; separator keep - 1 goes up to the parent.
                int lifted = PageFormat.KeySize(_keys[keep - 1]);
                left += PageFormat.ChildReferenceSize + (keep > 1 ? PageFormat.KeySize(_keys[keep - 2]) : 0);
                right = total - left - lifted;
            }

            int larger = Math.Max(left, right);
            if (larger < bestLarger)
            {
                bestLarger = larger;
                best = keep;
            }
        }

        return best;
    }

    /// <summary>Appends every entry (or child) of <paramref name="right"/>, the next sibling, to this node; a branch
    /// takes <paramref name="separator"/> (the parent's key between the two) between its children and the
    /// right's.</summary>
    public void Append(TreeNode right, string separator)
    {
        EnsureCapacity(_count + right._count);
        if (IsLeaf)
        {
            Array.Copy(right._keys, 0, _keys, _count, right._count);
            Array.Copy(right._values!, 0, _values!, _count, right._count);
        }
        else
        {
            _keys[_count - 1] = separator;
            Array.Copy(right._keys, 0, _keys, _count, right._count - 1);
            Array.Copy(right._children!, 0, _children!, _count, right._count);
        }

        _count += right._count;
        RecomputeSize();
    }

    /// <summary>Whether the node has outgrown a page and must split.</summary>
    public bool IsOverfull => _count > 2
        && (_byteSize > PageFormat.TargetPageSize
            || _count > MaxCount);

    private void RecomputeSize()
    {
        int size = PageFormat.PageHeaderSize;
        if (IsLeaf)
        {
            for (int i = 0; i < _count; i++)
            {
                size += PageFormat.EntrySize(_keys[i], _values![i]);
            }
        }
        else
        {
            size += _count * PageFormat.ChildReferenceSize;
            for (int i = 0; i < _count - 1; i++)
            {
                size += PageFormat.KeySize(_keys[i]);
            }
        }

        _byteSize = size;
    }

    /// <summary>The most entries (leaf) or children (branch) a node holds before it splits.</summary>
    private int MaxCount => IsLeaf ? PageFormat.MaxLeafEntries : PageFormat.MaxChildren;

    /// <summary>The entries the node will hold when it passes <see cref="PageFormat.TargetPageSize"/>, were its
    /// entries to come as large as its average so far (at most <see cref="MaxCount"/> + 1).</summary>
    private int FullCount()
    {
        long perEntry = Math.Max(1, (_byteSize - PageFormat.PageHeaderSize) / Math.Max(1, _count));
        return (int)Math.Min(MaxCount + 1, ((PageFormat.TargetPageSize - PageFormat.PageHeaderSize) / perEntry) + 2);
    }

    private void EnsureCapacity(int count)
    {
        if (count <= _keys.Length)
        {
            return;
        }

        // Grow once to the entries the node holds when it splits (from its average entry so far), not by doubling
        // three times on the way: a node's arrays are its checkpoint's garbage, and two threads that allocate them
        // share the workstation collector's heap.
        int full = FullCount();
        int capacity = Math.Max(count, Math.Min(full >= count ? full : _keys.Length * 2, MaxCount + 1));
        Array.Resize(ref _keys, capacity);
        if (_values is not null)
        {
            Array.Resize(ref _values, capacity);
        }
        else
        {
            Array.Resize(ref _children, capacity);
        }
    }
}
