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
    public bool Add(string id)
    {
        Node node = _head;
        int height = _height;
        for (int level = height - 1; level >= 0; level--)
        {
            Node? next = node.NextAt(level);
            while (next is not null && string.CompareOrdinal(next.Id, id) < 0)
            {
                node = next;
                next = node.NextAt(level);
            }

            _predecessors[level] = node;
        }

        Node? successor = _predecessors[0].Next;
        if (successor is not null && string.Equals(successor.Id, id, StringComparison.Ordinal))
        {
            return false;
        }

        int levels = RandomLevel();
        if (levels > height)
        {
            for (int level = height; level < levels; level++)
            {
                _predecessors[level] = _head;
            }
        }

        var added = new Node(id, levels);
        for (int level = 0; level < levels; level++)
        {
            added.InitNext(level, _predecessors[level].NextAt(level));
        }

        added.InitPrevious(ReferenceEquals(_predecessors[0], _head) ? null : _predecessors[0]);
        for (int level = 0; level < levels; level++)
        {
            _predecessors[level].Link(level, added);
        }

        if (successor is not null)
        {
            successor.LinkPrevious(added);
        }

        if (levels > height)
        {
            Volatile.Write(ref _height, levels);
        }

        Volatile.Write(ref _count, _count + 1);
        Array.Clear(_predecessors, 0, Math.Max(levels, height));
        return true;
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
