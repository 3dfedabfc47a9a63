using System.Diagnostics;
using System.Numerics;
using System.Runtime.CompilerServices;

namespace Folio.Documents;

/// <summary>
/// The ids of one collection added since the open, in ordinal order: a skip list with one writer at a time and
/// lock-free readers. An insert allocates one node (and, for one node in 64, a small array of its higher links), not a
/// copy of a search path as an immutable tree does.
/// <para>
/// Protocol. One writer at a time calls <see cref="Add"/> (<see cref="AddedIds"/> merges under its lock, which orders
/// successive writers); readers search and walk at the same time, without locks. Nodes are never unlinked (a deleted
/// document's id stays, as a tombstone readers skip, until the next open). The writer fills a new node completely (its
/// id, its forward links at every level, its backward link) before linking it, then links it into level 0 first and the
/// upper levels after, each with a release store (<see cref="Volatile.Write{T}(ref T, T)"/>) into the predecessor's
/// link, and last makes its successor's backward link point at it (release). Readers load every link with an acquire
/// (<see cref="Volatile.Read{T}(ref readonly T)"/>), so a node a reader reaches is fully initialized. A reader racing
/// an insert either sees the new node or not, at each level independently; a search that skips it at an upper level
/// still finds its place at level 0, so every search and walk sees every node linked before it started, in order.
/// <see cref="AddedIds"/> merges every id appended before a reader asks, so a reader whose snapshot includes a commit
/// sees every id that commit added, forward and backward; ids it may miss belong to commits its snapshot does not
/// see, which the index skips anyway.
/// </para>
/// </summary>
internal sealed class IdSkipList
{
    /// <summary>Levels at most: 4^16 ids before searches lengthen.</summary>
    private const int MaxLevel = 16;

    /// <summary>The sentinel before the first id: its id is null, its tower has every level.</summary>
    private readonly Node _head = new(null!, MaxLevel);

    /// <summary>Writer-only scratch: the last node before the insert point at each level.</summary>
    private readonly Node[] _predecessors = new Node[MaxLevel];

    /// <summary>How many levels are in use; written by the writer (release), read by searches (acquire).</summary>
    private int _height = 1;

    private uint _random = 0x9E3779B9u;
    private int _count;

    /// <summary>The ids added (the writer's count; readers get a value at most one insert stale).</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>Adds <paramref name="id"/> at its place in the order; false when it is present. Writer only.</summary>
    public bool Add(string id) => AddSorted(new ReadOnlySpan<string>(in id)) == 1;

    /// <summary>
    /// Adds ids given in ascending ordinal order (duplicates allowed, of each other or of ids present), each at its
    /// place; returns how many were new. Writer only. Each insert starts from the previous one's predecessors (a
    /// finger) rather than from the head: it climbs while the next node at a level is still before the id, then
    /// searches down from there, so ids that land close together cost a few nodes each instead of a search from the
    /// top. The predecessors at the levels it does not climb to stay right: no node of those levels lies between the
    /// previous id and this one.
    /// </summary>
    public int AddSorted(ReadOnlySpan<string> ids)
    {
        Node[] predecessors = _predecessors;
        predecessors.AsSpan().Fill(_head);
        int height = _height;
        int added = 0;
        string? previous = null;
        foreach (string id in ids)
        {
            Debug.Assert(previous is null || string.CompareOrdinal(previous, id) <= 0, "ids must be sorted");
            if (previous is not null && string.Equals(previous, id, StringComparison.Ordinal))
            {
                continue; // the predecessors may already be its own node
            }

            previous = id;
            int top = 0;
            while (top < height - 1 && IsBefore(predecessors[top].NextAt(top), id))
            {
                top++;
            }

            Node node = predecessors[top];
            for (int level = top; level >= 0; level--)
            {
                Node start = predecessors[level];
                if (!ReferenceEquals(start, node) && IsAfter(node, start))
                {
                    start = node;
                }

                Node? next = start.NextAt(level);
                while (IsBefore(next, id))
                {
                    start = next!;
                    next = start.NextAt(level);
                }

                predecessors[level] = start;
                node = start;
            }

            Node? successor = predecessors[0].Next;
            if (successor is not null && string.Equals(successor.Id, id, StringComparison.Ordinal))
            {
                continue;
            }

            int levels = RandomLevel(); // levels above the height keep the head as their predecessor (filled above)
            Node inserted = Link(id, levels, predecessors, successor);
            for (int level = 0; level < levels; level++)
            {
                predecessors[level] = inserted; // the predecessor of every later id at the levels it has
            }

            if (levels > height)
            {
                height = levels;
                Volatile.Write(ref _height, levels);
            }

            added++;
            Volatile.Write(ref _count, _count + 1);
        }

        Array.Clear(predecessors);
        return added;
    }

    /// <summary>Whether <paramref name="node"/> is a node (not the end) whose id sorts before
    /// <paramref name="id"/>.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private static bool IsBefore(Node? node, string id) => node is not null && string.CompareOrdinal(node.Id, id) < 0;

    /// <summary>Whether <paramref name="node"/> sorts after <paramref name="other"/> (the head sorts first).</summary>
    private bool IsAfter(Node node, Node other) => !ReferenceEquals(node, _head)
        && (ReferenceEquals(other, _head) || string.CompareOrdinal(node.Id, other.Id) > 0);

    /// <summary>
    /// Links a new node for <paramref name="id"/> after <paramref name="predecessors"/> (one per level it gets) and
    /// before <paramref name="successor"/>: filled completely first, then published at level 0, the upper levels, and
    /// last as its successor's backward link, each with a release store (the protocol).
    /// </summary>
    private Node Link(string id, int levels, Node[] predecessors, Node? successor)
    {
        var added = new Node(id, levels);
        for (int level = 0; level < levels; level++)
        {
            added.InitNext(level, predecessors[level].NextAt(level));
        }

        added.InitPrevious(ReferenceEquals(predecessors[0], _head) ? null : predecessors[0]);
        for (int level = 0; level < levels; level++)
        {
            predecessors[level].Link(level, added);
        }

        if (successor is not null)
        {
            successor.LinkPrevious(added);
        }

        return added;
    }

    /// <summary>The first node whose id is at or after <paramref name="fromInclusive"/> (null: the first node), or
    /// null.</summary>
    public Node? First(string? fromInclusive) =>
        fromInclusive is null ? _head.Next : LastBefore(fromInclusive) is { } before ? before.Next : _head.Next;

    /// <summary>The last node whose id is before <paramref name="toExclusive"/> (null: the last node), or
    /// null.</summary>
    public Node? Last(string? toExclusive) => LastBefore(toExclusive);

    /// <summary>The last node whose id is before <paramref name="key"/> (null: after every id), or null when none
    /// is.</summary>
    private Node? LastBefore(string? key)
    {
        Node node = _head;
        for (int level = Volatile.Read(ref _height) - 1; level >= 0; level--)
        {
            Node? next = node.NextAt(level);
            while (next is not null && (key is null || string.CompareOrdinal(next.Id, key) < 0))
            {
                node = next;
                next = node.NextAt(level);
            }
        }

        return ReferenceEquals(node, _head) ? null : node;
    }

    /// <summary>
    /// Whether every level is in strictly ascending order and level 0 holds <see cref="Count"/> nodes (tests: a search
    /// repairs a wrong upper link by walking on at level 0, so results alone do not show one). Not safe against a
    /// concurrent writer.
    /// </summary>
    internal bool LevelsAreOrdered()
    {
        for (int level = 0; level < MaxLevel; level++)
        {
            int nodes = 0;
            string? last = null;
            for (Node? node = _head.NextAt(level); node is not null; node = node.NextAt(level))
            {
                if (last is not null && string.CompareOrdinal(last, node.Id) >= 0)
                {
                    return false;
                }

                last = node.Id;
                nodes++;
            }

            if (level == 0 && nodes != _count)
            {
                return false;
            }
        }

        return true;
    }

    /// <summary>Levels 1 to <see cref="MaxLevel"/>, each next one with probability 1/4 (writer only:
    /// xorshift32).</summary>
    private int RandomLevel()
    {
        uint x = _random;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        _random = x;

        // Two bits per level: a level is added while both are zero (at most 1 + 31 / 2 = 16 levels).
        return 1 + (BitOperations.TrailingZeroCount(x | 0x8000_0000u) / 2);
    }

    /// <summary>An id in the list. Links are read with acquire loads (see the protocol).</summary>
    internal sealed class Node
    {
        // The links of levels 0 to 2 are fields, so a search reads them from the node it is on; one node in 64 has
        // higher levels, in an array.
        private Node? _next;
        private Node? _next1;
        private Node? _next2;
        private readonly Node?[]? _higher;
        private Node? _previous;

        public Node(string id, int levels)
        {
            Id = id;
            _higher = levels > 3 ? new Node?[levels - 3] : null;
        }

        public string Id { get; }

        /// <summary>The next node at level 0 (acquire), or null after the last.</summary>
        public Node? Next => Volatile.Read(ref _next);

        /// <summary>The node before this one at level 0 (acquire), or null before the first.</summary>
        public Node? Previous => Volatile.Read(ref _previous);

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public Node? NextAt(int level) => Volatile.Read(ref LinkAt(level));

        /// <summary>Sets a link of a node no reader can reach yet (writer only).</summary>
        public void InitNext(int level, Node? next) => LinkAt(level) = next;

        /// <summary>Sets the backward link of a node no reader can reach yet (writer only).</summary>
        public void InitPrevious(Node? previous) => _previous = previous;

        /// <summary>Publishes <paramref name="previous"/> as the backward link (release; writer only).</summary>
        public void LinkPrevious(Node previous) => Volatile.Write(ref _previous, previous);

        /// <summary>Publishes <paramref name="next"/> as the link at <paramref name="level"/> (release; writer
        /// only).</summary>
        public void Link(int level, Node next) => Volatile.Write(ref LinkAt(level), next);

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private ref Node? LinkAt(int level)
        {
            switch (level)
            {
                case 0:
                    return ref _next;
                case 1:
                    return ref _next1;
                case 2:
                    return ref _next2;
                default:
                    return ref _higher![level - 3];
            }
        }
    }
}
