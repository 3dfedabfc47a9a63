using System.Collections.Concurrent;
using System.Collections.Immutable;
using Folio.Journal;
using Folio.Transactions;

namespace Folio.Documents;

/// <summary>
/// The in-memory, multi-versioned index of the latest documents: every key keeps its versions tagged with their
/// commit sequence, and a reader at snapshot S sees, for every key, the newest version at or below S.
/// <para>
/// Protocol. One writer: the transaction merger's committer calls <see cref="Apply(CommitBatch, long, long)"/> batch by batch in commit order.
/// For each command it prepends a <see cref="DocumentVersion"/> to the key's chain (the new head replaces the old
/// in a concurrent dictionary: an atomic write of the value; the old head hangs off it), adds a new key to its collection's sorted key list (an immutable list kept in ordinal order, replaced with a release write),
/// and after the whole batch publishes <see cref="VisibleSequence"/> = the batch's sequence (release). Readers take a
/// snapshot S = <see cref="VisibleSequence"/> (acquire) through <see cref="SnapshotRegistry"/>, then read chains and
/// key sets without locks: every version at or below S was written before S was published, and versions above S
/// are skipped. Readers never wait for the writer.
/// </para>
/// <para>
/// Pruning. Before applying a batch the writer computes the oldest open snapshot (or the visible sequence when none
/// is older); on each chain it touches, it cuts the versions older than the one visible at that snapshot, since no
/// open or future snapshot can reach them. Memory of chains that are never written again is kept until their next
/// write; deleted keys stay in the sorted key list as tombstones (readers skip them) until the next open, whose replay
/// drops them.
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
    private BulkLoad? _bulkLoad;

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

        ImmutableList<string> set = keys.Current;
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
                keys.Add(command.Key.Id);
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

    /// <summary>
    /// Starts a bulk load: recovery replay into this empty index, before any reader exists. Until
    /// <see cref="EndBulkLoad"/>, batches go through <see cref="ApplyReplayed"/>. <paramref name="putsPerCollection"/>
    /// (puts in the journal per collection, an upper bound on its ids) sizes each collection's dictionary once.
    /// </summary>
    internal void BeginBulkLoad(IReadOnlyDictionary<string, int> putsPerCollection)
    {
        if (!_collections.IsEmpty || _bulkLoad is not null)
        {
            ThrowHelper.ThrowInvalidOperation("A bulk load needs an empty index.");
        }

        _bulkLoad = new BulkLoad(putsPerCollection);
    }

    /// <summary>
    /// Applies replayed batch <paramref name="sequence"/> during a bulk load. Values are not copied yet: each put
    /// remembers where its value lies (<paramref name="segment"/>, <paramref name="entryOffset"/> + the command's
    /// value start), and <see cref="EndBulkLoad"/> copies the values still live, so an overwritten or deleted value
    /// is never copied. No snapshot can exist yet, so a new version replaces the old one outright (no chain), and a
    /// delete removes the document (no tombstone is needed: absent and deleted read the same). New ids are listed in
    /// arrival order; the sorted list is built at the end. The journal keeps <paramref name="segment"/> mapped until
    /// the end of the bulk load (nothing purges during an open).
    /// </summary>
    internal void ApplyReplayed(List<ReplayedCommand> commands, JournalSegment segment, long entryOffset, long sequence, long timestampTicks)
    {
        BulkLoad bulk = _bulkLoad ?? throw new InvalidOperationException("No bulk load is in progress.");
        for (int i = 0; i < commands.Count; i++)
        {
            ReplayedCommand command = commands[i];
            BulkCollection collection = bulk.CollectionOf(command.Key.Collection, this);
            ConcurrentDictionary<string, DocumentVersion> heads = collection.Keys.Heads;
            if (command.Kind == CommandKind.Delete)
            {
                if (heads.TryRemove(command.Key.Id, out DocumentVersion? removed))
                {
                    removed.Superseded = true;
                    collection.Removed = true;
                }

                continue;
            }

            var version = new DocumentVersion(sequence, timestampTicks, ReadOnlyMemory<byte>.Empty, isDeleted: false, older: null);
            if (heads.TryAdd(command.Key.Id, version))
            {
                collection.NewIds.Add(command.Key.Id); // most replayed puts are of new ids: one hash lookup
            }
            else
            {
                heads[command.Key.Id].Superseded = true;
                heads[command.Key.Id] = version;
            }

            bulk.AddPending(new PendingValue(version, segment, entryOffset + command.ValueStart, command.ValueLength));
        }

        Volatile.Write(ref _visible, sequence);
    }

    /// <summary>The fewest replayed puts for which <see cref="EndBulkLoad"/> works in parallel (below, about 2 MB of values, one thread does).</summary>
    internal const int MinPutsForParallelEnd = 16_384;

    /// <summary>
    /// Ends a bulk load: copies the live documents' values out of the journal into slabs sized to exactly their bytes
    /// (so replay keeps the live documents, not every version the journal holds), and makes each collection's ids
    /// its sorted list (built in linear time from the sorted ids).
    /// </summary>
    /// <remarks>
    /// Both halves of the copy and the sorted lists run as three parallel actions when there is more than one
    /// processor and enough values. They touch disjoint state (each half its own versions and its own slabs, the
    /// lists only the key sets), and no reader exists before the open returns. They are mostly page faults: the
    /// slabs and the list nodes are memory the process has not touched yet, which a virtual machine that backs memory
    /// lazily charges per page (11-14 µs per 4 KiB page measured on the project's machine: faulting in the 27.6 MB of
    /// a 200,000-document replay's values took 80-100 ms of a 290 ms open), and page faults on two cores proceed in
    /// parallel (26 MB: 90 ms on one thread, 47 ms on two). <see cref="Parallel.Invoke(Action[])"/> runs on the
    /// calling thread whatever the thread pool has not started, so a busy pool slows the open down but never blocks it.
    /// </remarks>
    internal void EndBulkLoad()
    {
        if (_bulkLoad is not { } bulk)
        {
            return;
        }

        List<PendingValue[]> pending = bulk.Pending;
        if (Environment.ProcessorCount > 1 && bulk.PendingCount >= MinPutsForParallelEnd)
        {
            int split = pending.Count / 2;
            try
            {
                Parallel.Invoke(
                    () => CopyLiveValues(pending, 0, split),
                    () => CopyLiveValues(pending, split, pending.Count),
                    () => SortIds(bulk));
            }
            catch (AggregateException e) when (e.InnerExceptions.Count > 0)
            {
                // The same exception the one-thread path would throw, not a wrapper.
                System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(e.InnerExceptions[0]).Throw();
            }
        }
        else
        {
            CopyLiveValues(pending, 0, pending.Count);
            SortIds(bulk);
        }

        _bulkLoad = null;
    }

    /// <summary>Copies the values still live among the pending puts in chunks [<paramref name="from"/>, <paramref name="to"/>) into slabs of their own.</summary>
    private static void CopyLiveValues(List<PendingValue[]> pending, int from, int to)
    {
        long slabbedBytes = 0;
        for (int c = from; c < to; c++)
        {
            foreach (PendingValue value in pending[c])
            {
                if (value.Version is { Superseded: false } && value.Length <= ValueSlabs.MaxSlabbedValue)
                {
                    slabbedBytes += value.Length;
                }
            }
        }

        var slabs = new ValueSlabs(slabbedBytes);
        for (int c = from; c < to; c++)
        {
            foreach (PendingValue value in pending[c])
            {
                if (value.Version is { Superseded: false } version)
                {
                    version.SetReplayedJson(slabs.Copy(value.Segment.Span(value.Offset, value.Length)));
                }
            }
        }
    }

    /// <summary>Makes each bulk-loaded collection's ids (new ids in arrival order, less the deleted ones) its sorted list.</summary>
    private static void SortIds(BulkLoad bulk)
    {
        foreach (BulkCollection collection in bulk.Collections.Values)
        {
            ConcurrentDictionary<string, DocumentVersion> heads = collection.Keys.Heads;
            List<string> ids = collection.NewIds;
            if (collection.Removed)
            {
                // Deleted ids are gone from the dictionary; an id deleted and put again is listed twice.
                ids.RemoveAll(id => !heads.ContainsKey(id));
            }

            collection.Keys.SetSorted(ids);
        }
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

        ImmutableList<string> set = keys.Current;
        int start = fromInclusive is null ? 0 : LowerBound(set, fromInclusive);
        int end = toExclusive is null ? set.Count : LowerBound(set, toExclusive);
        return Iterate(collection, set, start, end, descending, snapshot);
    }

    /// <summary>Yields the ids at positions [start, end) of the key set that have a live version at the snapshot.</summary>
    private IEnumerable<(string Id, DocumentVersion Version)> Iterate(string collection, ImmutableList<string> set, int start, int end, bool descending, long snapshot)
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
    private static int LowerBound(ImmutableList<string> set, string key)
    {
        int index = set.BinarySearch(key, StringComparer.Ordinal);
        return index >= 0 ? index : ~index;
    }

    /// <summary>
    /// A collection: the newest version per id, and the ids sorted ordinally (an immutable list replaced as a whole by
    /// the writer with a release write, read by readers with an acquire read).
    /// </summary>
    private sealed class SortedKeys
    {
        // Distinct ids in ordinal order. An ImmutableList kept sorted by Add (not an ImmutableSortedSet): a bulk load
        // builds it from a sorted list in linear time, where a sorted set sorts its input again.
        private ImmutableList<string> _set;

        public SortedKeys(int capacity = 0)
        {
            Heads = capacity > 0
                ? new ConcurrentDictionary<string, DocumentVersion>(Environment.ProcessorCount, capacity, StringComparer.Ordinal)
                : new ConcurrentDictionary<string, DocumentVersion>(StringComparer.Ordinal);
            _set = [];
        }

        public ConcurrentDictionary<string, DocumentVersion> Heads { get; }

        public ImmutableList<string> Current => Volatile.Read(ref _set);

        /// <summary>Adds a new id at its place in the order (writer only; the id is not in the set).</summary>
        public void Add(string id)
        {
            int index = _set.BinarySearch(id, StringComparer.Ordinal);
            if (index < 0)
            {
                Volatile.Write(ref _set, _set.Insert(~index, id));
            }
        }

        /// <summary>
        /// Bulk load only (no reader yet): the set becomes <paramref name="ids"/>, sorted and de-duplicated here unless
        /// they are strictly increasing already (replayed ids often are; a repeated id never is).
        /// </summary>
        public void SetSorted(List<string> ids)
        {
            if (!IsSorted(ids))
            {
                ids.Sort(StringComparer.Ordinal);
                int kept = 0;
                for (int i = 0; i < ids.Count; i++)
                {
                    if (kept == 0 || !string.Equals(ids[kept - 1], ids[i], StringComparison.Ordinal))
                    {
                        ids[kept++] = ids[i];
                    }
                }

                ids.RemoveRange(kept, ids.Count - kept);
            }

            Volatile.Write(ref _set, ImmutableList.CreateRange(ids));
        }

        private static bool IsSorted(List<string> ids)
        {
            for (int i = 1; i < ids.Count; i++)
            {
                if (string.CompareOrdinal(ids[i - 1], ids[i]) >= 0)
                {
                    return false;
                }
            }

            return true;
        }
    }

    /// <summary>The state of a bulk load: the values to copy at the end, and per collection the ids first seen, in arrival order.</summary>
    private sealed class BulkLoad(IReadOnlyDictionary<string, int> putsPerCollection)
    {
        // A dictionary sized for every put of a journal of overwrites would be mostly empty buckets: cap the hint.
        private const int MaxInitialCapacity = 1 << 20;

        // Pending values in chunks of 4,096 (128 KiB): large objects, which the GC never copies, allocated once each (one
        // list of them all would be a large object that grows by copying). They live until the end of the load, so as
        // small objects (64 KiB chunks, before) every gen0 and gen1 collection of the replay copied them: 128 KiB
        // chunks took a gen0 collection and 10-15 ms of pauses off each open of 200,000 documents (docs/benchmarks.md).
        private const int ChunkSize = 4096;

        /// <summary>Replayed puts so far.</summary>
        public int PendingCount => Pending.Count == 0 ? 0 : ((Pending.Count - 1) * ChunkSize) + _lastChunkUsed;

        private int _lastChunkUsed = ChunkSize;

        private string? _lastName;
        private BulkCollection? _last;

        public Dictionary<string, BulkCollection> Collections { get; } = new(StringComparer.Ordinal);

        /// <summary>Every replayed put, in order (the last chunk filled up to its count).</summary>
        public List<PendingValue[]> Pending { get; } = [];

        public void AddPending(PendingValue pending)
        {
            if (_lastChunkUsed == ChunkSize)
            {
                Pending.Add(new PendingValue[ChunkSize]);
                _lastChunkUsed = 0;
            }

            Pending[^1][_lastChunkUsed++] = pending;
        }

        /// <summary>The collection named <paramref name="name"/>, created in <paramref name="index"/> on first use (the last one is kept: batches mostly write one collection).</summary>
        public BulkCollection CollectionOf(string name, VersionedIndex index)
        {
            if (!ReferenceEquals(name, _lastName))
            {
                if (!Collections.TryGetValue(name, out _last))
                {
                    int capacity = putsPerCollection.TryGetValue(name, out int puts) ? Math.Min(puts, MaxInitialCapacity) : 0;
                    var keys = new SortedKeys(capacity);
                    index._collections[name] = keys;
                    Collections[name] = _last = new BulkCollection(keys, capacity);
                }

                _lastName = name;
            }

            return _last!;
        }
    }

    /// <summary>Where the value of a replayed version lies in the journal (copied at the end of the bulk load unless superseded).</summary>
    private readonly record struct PendingValue(DocumentVersion? Version, JournalSegment Segment, long Offset, int Length);

    /// <summary>One collection during a bulk load.</summary>
    private sealed class BulkCollection(SortedKeys keys, int capacity)
    {
        public SortedKeys Keys { get; } = keys;

        /// <summary>Ids in the order first put (an id deleted and put again appears twice).</summary>
        public List<string> NewIds { get; } = new(capacity);

        /// <summary>Whether any id was deleted (then <see cref="NewIds"/> needs filtering).</summary>
        public bool Removed { get; set; }
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
