using System.Collections.Concurrent;
using System.Collections.Immutable;
using Folio.Transactions;

namespace Folio.Documents;

/// <summary>
/// The in-memory, multi-versioned index of the latest documents: every key keeps its versions tagged with their
/// commit sequence, and a reader at snapshot S sees, for every key, the newest version at or below S.
/// <para>
/// Protocol. One writer: the transaction merger's committer calls <see cref="Apply(CommitBatch, long, long)"/> batch by batch in commit order.
/// For each command it prepends a <see cref="DocumentVersion"/> to the key's chain (the new head replaces the old
/// in a concurrent dictionary: an atomic write of the value; the old head hangs off it), adds a new key to its collection's sorted key set (an immutable set, replaced with a release write),
/// and after the whole batch publishes <see cref="VisibleSequence"/> = the batch's sequence (release). Readers take a
/// snapshot S = <see cref="VisibleSequence"/> (acquire) through <see cref="SnapshotRegistry"/>, then read chains and
/// key sets without locks: every version at or below S was written before S was published, and versions above S
/// are skipped. Readers never wait for the writer.
/// </para>
/// <para>
/// Pruning. Before applying a batch the writer computes the oldest open snapshot (or the visible sequence when none
/// is older); on each chain it touches, it cuts the versions older than the one visible at that snapshot, since no
/// open or future snapshot can reach them. Memory of chains that are never written again is kept until their next
/// write; deleted keys stay in the sorted key set as tombstones (readers skip them).
/// </para>
/// </summary>
internal sealed class VersionedIndex : ICommitState
{
    // The newest version of each key; older ones hang off DocumentVersion.Older. Replacing the value publishes the new
    // head: ConcurrentDictionary writes reference values atomically, and .NET's memory model makes a new object's
    // initializing stores visible before a reference to it; the writer publishes VisibleSequence (release) after.
    // Per collection: the newest version of each id (a dictionary keyed by the id alone: one string hash and compare
    // per lookup) and the sorted ids. The outer dictionary is small and stays in cache.
    private readonly ConcurrentDictionary<string, SortedKeys> _collections = new(StringComparer.Ordinal);
    private readonly SnapshotRegistry _snapshots = new();
    private long _visible;
    private Dictionary<SortedKeys, List<string>>? _bulkLoad;

    /// <summary>The newest committed sequence whose effects are visible to new snapshots.</summary>
    public long VisibleSequence => Volatile.Read(ref _visible);

    /// <summary>Snapshots currently open (tests and diagnostics).</summary>
    public int OpenSnapshots => _snapshots.OpenCount;

    /// <summary>Opens a snapshot of everything committed so far; dispose it to let old versions go.</summary>
    public IndexSnapshot OpenSnapshot()
    {
        (int slot, long sequence) = _snapshots.Open(ref _visible);
        return new IndexSnapshot(this, slot, sequence);
    }

    /// <summary>The version of <paramref name="key"/> visible at <paramref name="snapshot"/>, or null when absent or deleted.</summary>
    public DocumentVersion? Get(in DocumentKey key, long snapshot)
    {
        DocumentVersion? version = _collections.TryGetValue(key.Collection, out SortedKeys? keys) && keys.Heads.TryGetValue(key.Id, out DocumentVersion? head)
            ? At(head, snapshot)
            : null;
        return version is { IsDeleted: false } ? version : null;
    }

    /// <summary>
    /// The live documents of <paramref name="collection"/> at <paramref name="snapshot"/> whose ids are in
    /// [<paramref name="fromInclusive"/>, <paramref name="toExclusive"/>) (null: unbounded), in ordinal order.
    /// </summary>
    public IEnumerable<(string Id, DocumentVersion Version)> Range(string collection, string? fromInclusive, string? toExclusive, bool descending, long snapshot)
    {
        if (fromInclusive is not null && toExclusive is not null && string.CompareOrdinal(fromInclusive, toExclusive) > 0)
        {
            ThrowHelper.ThrowArgument(nameof(fromInclusive), $"The range is inverted: '{fromInclusive}' is after '{toExclusive}'.");
        }

        return RangeIterator(collection, fromInclusive, toExclusive, descending, snapshot);
    }

    /// <summary>The live documents of <paramref name="collection"/> at <paramref name="snapshot"/> whose ids start with <paramref name="prefix"/>.</summary>
    public IEnumerable<(string Id, DocumentVersion Version)> Prefix(string collection, string prefix, bool descending, long snapshot)
    {
        ArgumentNullException.ThrowIfNull(prefix);
        if (!_collections.TryGetValue(collection, out SortedKeys? keys))
        {
            return [];
        }

        ImmutableSortedSet<string> set = keys.Current;
        int start = LowerBound(set, prefix);
        int end = start;
        while (end < set.Count && set[end].StartsWith(prefix, StringComparison.Ordinal))
        {
            end++;
        }

        return Iterate(collection, set, start, end, descending, snapshot);
    }

    /// <summary>The number of live documents of <paramref name="collection"/> at <paramref name="snapshot"/>.</summary>
    public int Count(string collection, long snapshot)
    {
        int count = 0;
        foreach (var _ in RangeIterator(collection, null, null, descending: false, snapshot))
        {
            count++;
        }

        return count;
    }

    /// <inheritdoc/>
    public long GetVersion(in DocumentKey key) => Get(key, VisibleSequence)?.Sequence ?? 0;

    /// <inheritdoc/>
    public void Validate(CommitBatch batch)
    {
    }

    /// <inheritdoc/>
    public void Apply(CommitBatch batch, long sequence, long timestampTicks) => Apply(batch.Commands, sequence, timestampTicks);

    /// <summary>Applies the commands of committed batch <paramref name="sequence"/> (also used by recovery replay).</summary>
    public void Apply(IReadOnlyList<BatchCommand> commands, long sequence, long timestampTicks)
    {
        long oldest = _snapshots.Oldest(VisibleSequence);
        for (int i = 0; i < commands.Count; i++)
        {
            BatchCommand command = commands[i];
            SortedKeys keys = _collections.GetOrAdd(command.Key.Collection, static _ => new SortedKeys());
            keys.Heads.TryGetValue(command.Key.Id, out DocumentVersion? head);
            if (head is null)
            {
                if (_bulkLoad is not null)
                {
                    // Replay: collect, sort once at the end instead of one persistent-tree insert per key.
                    if (!_bulkLoad.TryGetValue(keys, out List<string>? pending))
                    {
                        _bulkLoad[keys] = pending = [];
                    }

                    pending.Add(command.Key.Id);
                }
                else
                {
                    keys.Add(command.Key.Id);
                }
            }
            else
            {
                // Cut what no snapshot can reach: everything older than the version visible at the oldest snapshot.
                DocumentVersion? visibleToOldest = head;
                while (visibleToOldest is not null && visibleToOldest.Sequence > oldest)
                {
                    visibleToOldest = visibleToOldest.Older;
                }

                visibleToOldest?.Prune();
            }

            bool isDelete = command.Kind == CommandKind.Delete;
            keys.Heads[command.Key.Id] = new DocumentVersion(sequence, timestampTicks, isDelete ? ReadOnlyMemory<byte>.Empty : command.Value, isDelete, head);
        }

        Volatile.Write(ref _visible, sequence);
    }

    internal void CloseSnapshot(int slot) => _snapshots.Close(slot);

    /// <summary>The newest version at or below <paramref name="snapshot"/> in the chain starting at <paramref name="head"/>.</summary>
    private static DocumentVersion? At(DocumentVersion? head, long snapshot)
    {
        while (head is not null && head.Sequence > snapshot)
        {
            head = head.Older;
        }

        return head;
    }

    /// <summary>Starts a bulk load (recovery replay, before any reader exists): new ids are sorted once at the end.</summary>
    internal void BeginBulkLoad() => _bulkLoad = [];

    /// <summary>Ends a bulk load: builds each collection's sorted id set from the collected ids.</summary>
    internal void EndBulkLoad()
    {
        if (_bulkLoad is null)
        {
            return;
        }

        foreach ((SortedKeys keys, List<string> ids) in _bulkLoad)
        {
            keys.AddRange(ids);
        }

        _bulkLoad = null;
    }

    /// <summary>Live documents across all collections at the visible sequence (diagnostics; walks every chain).</summary>
    internal long LiveDocuments()
    {
        long snapshot = VisibleSequence;
        long count = 0;
        foreach (SortedKeys keys in _collections.Values)
        {
            foreach (KeyValuePair<string, DocumentVersion> pair in keys.Heads)
            {
                count += At(pair.Value, snapshot) is { IsDeleted: false } ? 1 : 0;
            }
        }

        return count;
    }

    /// <summary>How many versions of <paramref name="key"/> are still reachable (tests and diagnostics).</summary>
    internal int ChainLength(in DocumentKey key)
    {
        int length = 0;
        DocumentVersion? head = null;
        _ = _collections.TryGetValue(key.Collection, out SortedKeys? keys) && keys.Heads.TryGetValue(key.Id, out head);
        for (DocumentVersion? version = head; version is not null; version = version.Older)
        {
            length++;
        }

        return length;
    }

    private IEnumerable<(string Id, DocumentVersion Version)> RangeIterator(string collection, string? fromInclusive, string? toExclusive, bool descending, long snapshot)
    {
        if (!_collections.TryGetValue(collection, out SortedKeys? keys))
        {
            return [];
        }

        ImmutableSortedSet<string> set = keys.Current;
        int start = fromInclusive is null ? 0 : LowerBound(set, fromInclusive);
        int end = toExclusive is null ? set.Count : LowerBound(set, toExclusive);
        return Iterate(collection, set, start, end, descending, snapshot);
    }

    /// <summary>Yields the ids at positions [start, end) of the key set that have a live version at the snapshot.</summary>
    private IEnumerable<(string Id, DocumentVersion Version)> Iterate(string collection, ImmutableSortedSet<string> set, int start, int end, bool descending, long snapshot)
    {
        for (int n = 0; n < end - start; n++)
        {
            string id = set[descending ? end - 1 - n : start + n];
            DocumentVersion? version = Get(new DocumentKey(collection, id), snapshot);
            if (version is not null)
            {
                yield return (id, version);
            }
        }
    }

    /// <summary>The position of the first id at or after <paramref name="key"/>.</summary>
    private static int LowerBound(ImmutableSortedSet<string> set, string key)
    {
        int index = set.IndexOf(key);
        return index >= 0 ? index : ~index;
    }

    /// <summary>
    /// A collection: the newest version per id, and the ids sorted ordinally (an immutable set replaced as a whole by
    /// the writer with a release write, read by readers with an acquire read).
    /// </summary>
    private sealed class SortedKeys
    {
        public ConcurrentDictionary<string, DocumentVersion> Heads { get; } = new(StringComparer.Ordinal);

        private ImmutableSortedSet<string> _set = ImmutableSortedSet.Create<string>(StringComparer.Ordinal);

        public ImmutableSortedSet<string> Current => Volatile.Read(ref _set);

        public void Add(string id) => Volatile.Write(ref _set, _set.Add(id));

        public void AddRange(List<string> ids)
        {
            if (_set.IsEmpty)
            {
                // Replay into an empty collection: sort once and build the balanced tree from the sorted list.
                Volatile.Write(ref _set, ImmutableSortedSet.CreateRange(StringComparer.Ordinal, ids));
                return;
            }

            ImmutableSortedSet<string>.Builder builder = _set.ToBuilder();
            foreach (string id in ids)
            {
                builder.Add(id);
            }

            Volatile.Write(ref _set, builder.ToImmutable());
        }
    }
}

/// <summary>A registered read snapshot of the <see cref="VersionedIndex"/>; dispose it when the reads are done.</summary>
internal sealed class IndexSnapshot(VersionedIndex index, int slot, long sequence) : IDisposable
{
    private int _disposed;

    /// <summary>The snapshot's sequence: it sees every commit at or below it.</summary>
    public long Sequence { get; } = sequence;

    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) == 0)
        {
            index.CloseSnapshot(slot);
        }
    }
}
