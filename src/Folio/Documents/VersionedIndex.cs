using System.Buffers;
using System.Collections.Concurrent;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using Folio.Diagnostics;
using Folio.Journal;
using Folio.Pages;
using Folio.Transactions;

namespace Folio.Documents;

/// <summary>
/// The in-memory, multi-versioned index of the latest documents: every key keeps its versions tagged with their
/// commit sequence, and a reader at snapshot S sees, for every key, the newest version at or below S.
/// <para>
/// Protocol. One writer at a time, under <see cref="_writeLock"/>: the transaction merger's committer calls
/// <see cref="Apply(CommitBatch, ReadOnlyMemory{byte}, long, long)"/> batch by batch in commit order, then
/// <see cref="Publish"/> once per group; the checkpoint's thread takes the lock to evict
/// (<see cref="EvictCheckpointed"/>). For each command, Apply appends a version to its collection's
/// <see cref="HeadTable"/> (a record in an array, not an object: the id and the value stay in the batch's encoded
/// journal entry, which the record points at) and publishes it as the id's newest version with a release store of the
/// id's slot; the old head hangs off it. It appends a new key to its collection's added ids (<see cref="AddedIds"/>:
/// sorted off the commit path, when a range read first needs them). Publish then stores
/// <see cref="VisibleSequence"/> = the group's last sequence (a full fence). The committer applies a group while its
/// fsync runs and publishes it only once it is durable, so versions above <see cref="VisibleSequence"/> may sit at the
/// head of chains: every read skips them. Readers take a snapshot S = <see cref="VisibleSequence"/> (acquire) through
/// <see cref="SnapshotRegistry"/>, then read chains and key sets without locks (the <see cref="HeadTable"/>
/// protocol): every version at or below S was written before S was published, and versions above S are skipped.
/// Readers never wait for the writer; a read gets its own <see cref="DocumentVersion"/>, sharing the value's bytes.
/// </para>
/// <para>
/// Replayed documents. The documents an open replays form each collection's base layer
/// (<see cref="ReplayedDocuments"/>: arrays, one object per document, its id), built before any reader exists. A
/// read looks there first: a replayed document nobody has written since is answered from it (its version is visible
/// to every snapshot). The first commit that writes a replayed document puts the new version in the heads with the
/// replayed version as its older one, then marks the replayed slot shadowed; from then on reads go to the chain. The
/// ids added since the open are a sorted list of their own, disjoint from the replayed ids; range and prefix reads
/// merge the two.
/// </para>
/// <para>
/// Checkpointed documents. Below the replayed documents lies the newest checkpoint (<see cref="AttachCheckpoint"/> at
/// the open, <see cref="AdvanceCheckpoint"/> after each checkpoint): one immutable B+tree per collection, read when
/// neither the replayed documents nor the heads hold an id (so a version there is visible to every snapshot that can
/// miss the heads, see below). The first write of such an id starts its chain at the tree's version (read by the
/// committer as it applies, or by the writer's thread before it submits, see <see cref="ReadWrittenOver"/>; apply takes
/// the writer's read while the collection's layer is still the one read, since a tree never changes); range reads
/// merge the tree's ids with the others. A replayed delete of a checkpointed document is a tombstone slot, which
/// hides the tree's version. Checkpoints (<see cref="CollectChanges"/>) read the heads: every id written since a
/// checkpoint took and evicted it. A point read that falls through to a tree asks the <see cref="DocumentCache"/>
/// first, by the tree's <see cref="TreeLayer.CacheKey"/>, and adds what the tree gave it: an entry is what that tree
/// holds, so it stays right for as long as the layer is read, and a newer tree has a key of its own. A newer tree
/// keeps the hashes of the ids its checkpoint changed, and the key of the tree it was made from (both set before the
/// layer is published): a read that misses under its key, for an id of a hash the checkpoint did not change, moves
/// that older tree's entry to its own key (<see cref="TreeLayer.Shares"/>, <see cref="DocumentCache.TryMove"/>). The
/// changed ids come from the changes <see cref="CollectChanges"/> took since the last checkpoint that advanced the
/// index, so they cover every difference between the two trees, a checkpoint whose advance failed included.
/// </para>
/// <para>
/// Moving to a newer checkpoint (the checkpoint's thread, one at a time; the committer keeps committing). Once a
/// checkpoint at C is durable and pinned, <see cref="AdvanceCheckpoint"/> publishes each collection's new
/// <see cref="TreeLayer"/> (a release store), then drops the replayed documents if C covers them, then releases the
/// index's pin of the previous checkpoint, and then evicts from the heads every key the checkpoint took whose head is
/// at or below C and at or below the oldest open snapshot, if the key's head is still that version: it builds a new
/// <see cref="HeadTable"/> without those keys beside the committer (<see cref="HeadTableRebuild"/>, which also leaves
/// behind every version no snapshot can reach; a key written again meanwhile stays, with its chain) and, holding the
/// write lock for the last records, publishes it in place of the old one (a release store). Such a head is the newest
/// version and the tree at C holds exactly it, and every snapshot that can read is at least its sequence, so the tree
/// answers every reader as the head did. A reader that misses an evicted head loaded the new table (acquire), so it
/// then loads the new layer (published before), never an older tree lacking the version; a reader still walking the old
/// table finds the head there. Keys a snapshot held back are evicted by a later call (<see cref="EvictCheckpointed"/>).
/// So the heads hold what was written since the last checkpoint, plus what open snapshots need: the in-memory layer
/// stays bounded by the journal between checkpoints.
/// </para>
/// <para>
/// Reading a tree that is no longer the newest. A point read loads its collection's layer without pinning it; if a
/// later checkpoint frees a chunk the old tree reaches, a read of that page fails its checks (the chunk has left the
/// chunk map, or its space holds other pages, whose checksums cover their positions and chunk ids, which are never
/// reused), and the read retries with the newer layer when the collection's layer has changed (a failure through the
/// current layer is real damage and is thrown). A read that succeeds through an older tree is right: the older tree
/// holds every version a snapshot can need that is not in the heads (versions are evicted only after the newer
/// layer is published). Range reads, which walk a tree for as long as their caller enumerates, pin the layer's
/// checkpoint instead (<see cref="PinTree"/>), held by a <see cref="PageCheckpointLease"/> that the enumerator's
/// disposal releases, or its finalizer when a caller abandons the enumerator.
/// </para>
/// <para>
/// Pruning. Before applying a batch the writer computes the oldest open snapshot (or the visible sequence when none
/// is older); on each chain it touches, it cuts the versions older than the one visible at that snapshot, since no
/// open or future snapshot can reach them (their records stay in the table's arrays, unreachable, until the next
/// rebuild drops them). The oldest only grows, so a chain whose head was written after the oldest took its current
/// value is cut already: the walk to the version visible at it is skipped until the oldest moves. What the oldest
/// keeps is bounded: the bytes of versions written over, and of keys new to the heads (which eviction must leave
/// while a snapshot older than them is open), while it stays the same are counted, and past
/// <see cref="DocumentStoreOptions.MaxSnapshotRetainedBytes"/> the snapshots at it are expired
/// (<see cref="SnapshotRegistry.ExpireHolding"/>), as an old one is. Versions of chains that are never written again
/// are kept until their eviction; deleted keys stay in the sorted key list as tombstones (readers skip them) until the
/// next open, whose replay drops them.
/// </para>
/// </summary>
internal sealed class VersionedIndex : ICommitState
{
    // Per collection: the newest version of each id written since the last checkpoint took it (a HeadTable, with the
    // older versions snapshots still need), the replayed documents, the checkpointed tree and the added ids. The
    // outer dictionary is small and stays in cache. _writeLock: held by the one writer of the heads at a time (the
    // committer's Apply, the checkpoint's eviction).
    private readonly ConcurrentDictionary<string, SortedKeys> _collections = new(StringComparer.Ordinal);
    private readonly Lock _writeLock = new();
    private readonly SnapshotRegistry _snapshots;
    private long _visible;
    private BulkLoad? _bulkLoad;

    // The most memory one collection's id filter takes (0: no filters), the largest data file whose trees the
    // checkpoint's thread reads through to build filters for them (BuildIdFilters), and what all filters take together.
    private readonly long _idFilterBytes;
    private readonly long _idFilterBuildBytes;
    private readonly IdFilterBudget _idFilterBudget;
    private int _damageSeen; // 1 once damage was seen in the store's files (NoteDamage); never reset

    // The documents point reads found in the trees, or null when the store caches none: sized to the documents the
    // checkpoint holds, and replaced by a larger one (empty) by the checkpoint's thread when they outgrow it (a release
    // store; readers acquire it once a search). Its budget, and its instruments, which outlive the replacements.
    private DocumentCache? _documentCache;
    private readonly long _documentCacheBytes;
    private readonly DocumentCacheMetrics? _documentCacheMetrics;

    // The committer's (under _writeLock): the oldest snapshot its last apply computed, and the sequence of the first
    // apply that computed that value. A chain whose head was written at or after that sequence was cut at that value
    // then (see Pruning), so the next write of its id need not walk it again.
    private long _pruneOldest = -1;
    private long _pruneOldestSince;

    // The committer's: the bytes the oldest snapshot holds back since it took its value (versions written over whose
    // older version it keeps, and keys new to the heads, which cannot be evicted while it is open), an estimate;
    // past the registry's HeldBytesLimit the snapshots at it expire.
    private long _heldBytes;
    private IPageReader? _pages;

    // The checkpoint every collection's tree layer comes from, pinned by the index until the next one replaces it
    // (AttachCheckpoint, AdvanceCheckpoint, ReleaseCheckpoint: the open, then the checkpoint's thread). _evictLater:
    // keys a checkpoint covered whose eviction an open snapshot held back (the checkpoint's thread only).
    private PageCheckpoint? _layer;
    private List<EvictionCandidate> _evictLater = [];

    // Collections whose added-id list the committer should rebuild from its heads (queued by the checkpoint's thread
    // after an eviction, taken by the committer at its next apply: TrimAddedIds).
    private readonly ConcurrentQueue<SortedKeys> _trimDue = new();
    private readonly int _addedIdsTrimMinimum;

    // Whether the documents the open replayed still wait for a checkpoint to cover them (the checkpoint's thread).
    private bool _replayedPending = true;

    /// <param name="maxSnapshotAge">How long an open snapshot may hold back pruning
    /// (<see cref="DocumentStoreOptions.MaxSnapshotAge"/>).</param>
    /// <param name="addedIdsTrimMinimum">The length an added-id list must pass before it is trimmed
    /// (<see cref="TrimAddedIds"/>).</param>
    /// <param name="clock">The clock snapshot ages are measured with (default <see cref="TimeProvider.System"/>).
    /// </param>
    /// <param name="heldBytesLimit">The bytes of versions written over documents since the oldest open snapshot that
    /// the index keeps for it before it expires that snapshot (<see cref="ApplyLocked"/>): the store's
    /// <see cref="DocumentStoreOptions.MaxSnapshotRetainedBytes"/>.</param>
    /// <param name="idFilterBytes">The most memory one collection's <see cref="IdFilter"/> may take (0: no filters).
    /// </param>
    /// <param name="idFilterBuildBytes">The largest data file whose trees <see cref="BuildIdFilters"/> reads through
    /// to build filters for the collections the open found in it.</param>
    /// <param name="idFilterTotalBytes">The most memory all collections' filters take together.</param>
    /// <param name="documentCacheBytes">The memory of the <see cref="DocumentCache"/> (0: none).</param>
    /// <param name="documentCacheMetrics">The document cache's instruments, or null; the index disposes them at
    /// <see cref="CloseDocumentCache"/>.</param>
    public VersionedIndex(TimeSpan maxSnapshotAge, int addedIdsTrimMinimum = DefaultAddedIdsTrimMinimum,
        TimeProvider? clock = null, long heldBytesLimit = long.MaxValue, long idFilterBytes = DefaultIdFilterBytes,
        long idFilterBuildBytes = DefaultIdFilterBytes * 8, long idFilterTotalBytes = DefaultIdFilterBytes * 2,
        long documentCacheBytes = 0, DocumentCacheMetrics? documentCacheMetrics = null)
    {
        if (documentCacheBytes > 0)
        {
            _documentCacheBytes = documentCacheBytes;
            _documentCacheMetrics = documentCacheMetrics;
            _documentCache = new DocumentCache(documentCacheBytes, documents: 0, _documentCacheMetrics);
        }

        _snapshots = new SnapshotRegistry(maxSnapshotAge, clock ?? TimeProvider.System, heldBytesLimit);
        _addedIdsTrimMinimum = addedIdsTrimMinimum;
        _idFilterBytes = idFilterBytes;
        _idFilterBuildBytes = idFilterBuildBytes;
        _idFilterBudget = new IdFilterBudget(idFilterTotalBytes);
    }

    /// <summary>The smallest added-id list a checkpoint has trimmed (<see cref="TrimAddedIds"/>).</summary>
    internal const int DefaultAddedIdsTrimMinimum = 16 * 1024;

    /// <summary>The default limit of one collection's id filter: 16 MiB, about 8.7 million ids.</summary>
    internal const long DefaultIdFilterBytes = 16L * 1024 * 1024;

    /// <summary>An index whose snapshots never expire (tests).</summary>
    public VersionedIndex()
        : this(Timeout.InfiniteTimeSpan)
    {
    }

    /// <summary>The cache of checkpointed documents, or null when the store has none.</summary>
    internal DocumentCache? DocumentCache => Volatile.Read(ref _documentCache);

    /// <summary>The checkpoint's thread (or the open), once the index reads a checkpoint of
    /// <paramref name="documents"/> documents: a document cache too small for them is replaced by one sized for twice
    /// as many (its entries start afresh; readers still holding the old one add to it harmlessly), so it is replaced
    /// about once for each doubling of the store, and its slots take 40 to 80 bytes a document.</summary>
    private void SizeDocumentCache(long documents)
    {
        if (Volatile.Read(ref _documentCache) is { } cache && !cache.Fits(documents))
        {
            Volatile.Write(ref _documentCache, new DocumentCache(_documentCacheBytes, 2 * documents,
                _documentCacheMetrics));
        }
    }

    /// <summary>The store's close: the document cache's instruments end and its entries go (a store object kept
    /// after its close holds no documents).</summary>
    internal void CloseDocumentCache()
    {
        _documentCacheMetrics?.Dispose();
        DocumentCache?.Clear();
    }

    /// <summary>Tests: the <see cref="TreeLayer.CacheKey"/> of the collection's current tree, or 0 when it has
    /// none.</summary>
    internal long TreeCacheKey(string collection) =>
        _collections.TryGetValue(collection, out SortedKeys? keys) && keys.Tree is { Root: not null } layer
            ? layer.CacheKey
            : 0;

    /// <summary>The newest committed sequence whose effects are visible to new snapshots.</summary>
    public long VisibleSequence => Volatile.Read(ref _visible);

    /// <summary>Snapshots currently open (tests and diagnostics).</summary>
    public int OpenSnapshots => _snapshots.OpenCount;

    /// <summary>Opens a snapshot of everything committed so far; dispose it to let old versions go.</summary>
    public IndexSnapshot OpenSnapshot() => new(_snapshots.Open(ref _visible));

    /// <summary>
    /// The version of <paramref name="key"/> visible at a registered <paramref name="snapshot"/> (or at a sequence no
    /// prune can pass while the caller reads: tests, the committer), or null when absent or deleted.
    /// </summary>
    public DocumentVersion? Get(in DocumentKey key, long snapshot)
        => Find(key, snapshot, out _) is { IsDeleted: false } version ? version : null;

    /// <summary>
    /// The version of <paramref name="key"/> visible at <paramref name="snapshot"/>, or null; throws
    /// <see cref="SnapshotExpiredException"/> when the snapshot expired before the read could be trusted.
    /// </summary>
    public DocumentVersion? Get(in DocumentKey key, IndexSnapshot snapshot)
    {
        DocumentVersion? version = Get(key, snapshot.Sequence);
        snapshot.ThrowIfExpired();
        return version;
    }

    /// <summary>
    /// The latest committed version of <paramref name="key"/>, or null, without registering a snapshot (a point read
    /// of the latest state). Lock-free; never waits for the writer.
    /// </summary>
    /// <remarks>
    /// The read walks the key's chain to the version visible at the visible sequence S it read first. Nothing stops the
    /// committer from pruning meanwhile: two commits after S can cut the chain below the head the read started from. A
    /// walk that found a version is right (pruning cuts only the tail behind a version), so only a walk that ran off
    /// the end of a chain can be wrong. Then the read looks at the visible sequence again: if it is still S, no prune
    /// that could cut the version visible at S has run (a prune uses an oldest point at most the visible sequence when
    /// it started, and a walk that loaded a cut link (acquire of the release in <see cref="HeadTable.Prune"/>) would
    /// also see the publication of the commit before it; an eviction's rebuild leaves behind only versions below the
    /// one visible at the oldest open snapshot, a point at most the visible sequence too, and a walk of the rebuilt
    /// table loaded it with an acquire after the rebuild read that sequence), so "absent" is the answer; otherwise it
    /// retries at the new visible sequence.
    /// </remarks>
    public DocumentVersion? GetLatest(in DocumentKey key)
    {
        long snapshot = VisibleSequence;
        while (true)
        {
            DocumentVersion? version = Find(key, snapshot, out bool ranOffChain);
            if (!ranOffChain)
            {
                return version is { IsDeleted: false } ? version : null;
            }

            long now = VisibleSequence;
            if (now == snapshot)
            {
                return null;
            }

            snapshot = now;
        }
    }

    /// <summary>Tests only: called with the id by a read that missed the heads, before it reads the checkpointed tree
    /// (a test writes and checkpoints there: the race the re-check of the heads closes).</summary>
    internal Action<string>? AfterHeadsMiss { get; set; }

    /// <summary>Tests only: called with the collection by a range read or a count between taking the added-id list and
    /// pinning the tree layer (a test deletes and checkpoints there: the race merging after the pin closes).</summary>
    internal Action<string>? AfterAddedIdsTaken { get; set; }

    /// <summary>Tests only: called with the id by a writer's thread once it has read, before submitting its batch, the
    /// tree version a command writes over (a test writes and checkpoints there: the race the layer check
    /// closes).</summary>
    internal Action<string>? AfterWrittenOverRead { get; set; }

    /// <summary>Tests only: called by the committer with each written id once its version is in the heads (a test
    /// checkpoints there: the race the checkpoint's handling of shadowed replayed documents closes). It runs under the
    /// write lock, so a hook that waits for a checkpoint that evicts would wait for ever.</summary>
    internal Action<string>? AfterWriteApplied { get; set; }

    /// <summary>
    /// The newest version of <paramref name="key"/> at or below <paramref name="snapshot"/>, deletes included, or null;
    /// <paramref name="ranOffChain"/> says the key has versions but the walk found none at or below the snapshot.
    /// </summary>
    private DocumentVersion? Find(in DocumentKey key, long snapshot, out bool ranOffChain)
        => Find(key, snapshot, out ranOffChain, hintLayer: null, hint: default);

    /// <summary>
    /// <see cref="Find(in DocumentKey, long, out bool)"/> for a range read that already read the key's entry
    /// (<paramref name="hint"/>) from the tree of <paramref name="hintLayer"/>: when the read falls through to the
    /// checkpointed tree and the collection's current layer is still that one (read after the miss, as the protocol
    /// asks), the entry is the answer the tree would give, so it is used instead of a second descent.
    /// </summary>
    private DocumentVersion? Find(in DocumentKey key, long snapshot, out bool ranOffChain, TreeLayer? hintLayer,
        in StoredValue hint)
    {
        ranOffChain = false;
        if (!_collections.TryGetValue(key.Collection, out SortedKeys? keys))
        {
            return null;
        }

        // A replayed document nobody has written since the open: its replayed version is visible to every snapshot.
        if (keys.Replayed is { } replayed && replayed.TryGetSlot(key.Id, out int slot) && !replayed.IsShadowed(slot))
        {
            return replayed.VersionAt(slot);
        }

        int hash = IdBytes.HashOf(key.Id);
        while (true)
        {
            HeadTable heads = keys.Heads;
            int head = heads.Find(key.Id, hash);
            if (head != 0)
            {
                int version = heads.At(head, snapshot);
                ranOffChain = version == 0;
                return version == 0 ? null : heads.Record(version).ToVersion();
            }

            // Not in memory: the checkpointed tree's version (loaded after the miss: see the protocol).
            AfterHeadsMiss?.Invoke(key.Id);
            DocumentVersion? checkpointed = hintLayer is not null && ReferenceEquals(keys.Tree, hintLayer)
                ? ToVersion(hint)
                : FromCheckpoint(keys, key.Id, hash, cache: hintLayer is null);

            // Still not in memory: nothing wrote the key since the miss, so the tree's version is the one every
            // snapshot sees. Otherwise a write since the miss may already be in the layer read (a checkpoint can
            // cover it and be published between the miss and that read), which then holds a version newer than
            // the snapshot, or none for a delete; that write put the key in the heads before the layer was
            // published (acquire), and a version newer than the caller's snapshot stays there while the snapshot
            // is open, so the chain has the answer: look again.
            if (keys.Heads.Find(key.Id, hash) == 0)
            {
                return checkpointed;
            }
        }
    }

    /// <summary>The version of <paramref name="id"/> in the collection's newest checkpointed tree, or null; with
    /// <paramref name="cache"/> (a point read), a document found in the tree goes into the
    /// <see cref="DocumentCache"/>.</summary>
    private DocumentVersion? FromCheckpoint(SortedKeys keys, string id, int hash, bool cache = false) =>
        SearchCheckpoint(keys, id, hash, readValue: true, cache, out DocumentVersion? version) ? version : null;

    /// <summary>Whether the collection's newest checkpointed tree holds <paramref name="id"/> (no value
    /// read).</summary>
    private bool TreeContains(SortedKeys keys, string id, int hash) =>
        SearchCheckpoint(keys, id, hash, readValue: false, cache: false, out _);

    /// <summary>Searches the collection's newest checkpointed tree for <paramref name="id"/>, with its value when
    /// <paramref name="readValue"/>; a read through a layer a newer checkpoint replaced meanwhile that fails its page
    /// checks retries with the new layer (see the protocol). An id the collection's complete <see cref="IdFilter"/>
    /// (read after the layer, see its protocol) has never seen is in no tree: no search.</summary>
    private bool SearchCheckpoint(SortedKeys keys, string id, int hash, bool readValue, bool cache,
        out DocumentVersion? version)
    {
        TreeLayer? layer = keys.Tree;
        return SearchLayer(keys, id, hash, readValue, unreadableValue: false, cache, ref layer, out version);
    }

    /// <summary><see cref="SearchCheckpoint"/> from <paramref name="layer"/> (read by the caller from the
    /// collection; on return, the layer whose tree answered). With <paramref name="unreadableValue"/>, a value whose
    /// own pages (a large document's overflow pages) fail their checks in the current layer is returned as an
    /// unreadable version (<see cref="UnreadableVersion"/>) instead of thrown: what a write over the document needs,
    /// since it replaces the value whole.</summary>
    private bool SearchLayer(SortedKeys keys, string id, int hash, bool readValue, bool unreadableValue, bool cache,
        ref TreeLayer? layer, out DocumentVersion? version)
    {
        DocumentCache? documents = cache ? Volatile.Read(ref _documentCache) : null; // acquire, once a search
        while (true)
        {
            version = null;
            if (layer?.Root is null)
            {
                return false;
            }

            // A point read (a user's, or the committer's check of an expected version) asks the cache first, which
            // holds what this tree holds for the ids it has. The other searches (writes reading the versions they
            // replace, apply, range reads' checks) go to the tree:
            // a write over a document in a damaged page must meet the damage and fail alone (see ReadWrittenOver),
            // not take the version from the cache and leave the checkpoint a leaf it cannot rewrite.
            if (documents is not null && documents.TryGet(keys.CacheKey, layer.CacheKey, id, hash,
                out DocumentVersion hit))
            {
                version = hit;
                return true;
            }

            // The tree this one was made from holds the same version of every id its checkpoint did not change:
            // what the cache has of that tree for such an id is this tree's too, and moves to this tree.
            if (documents is not null && layer.Shares(hash)
                && documents.TryMove(keys.CacheKey, layer.PreviousCacheKey, layer.CacheKey, id, hash, out hit))
            {
                version = hit;
                return true;
            }

            if (keys.Filter is { IsComplete: true } filter && !filter.MightContain(hash))
            {
                return false;
            }

            try
            {
                if (layer.IsAboveEveryId(id, _pages!))
                {
                    return false; // ids that grow: nothing to search
                }

                if (!readValue)
                {
                    return BTree.Contains(layer.Root, id, _pages!);
                }

                if (!BTree.TryGet(layer.Root, id, _pages!, out StoredValue stored))
                {
                    return false;
                }

                try
                {
                    version = ToVersion(stored);
                    documents?.Add(keys.CacheKey, layer.CacheKey, id, hash, version.Value);
                }
                catch (StoreCorruptedException damage) when (unreadableValue && ReferenceEquals(layer, keys.Tree))
                {
                    // The leaf holds the id at this version; only the value's pages are damaged.
                    NoteDamage();
                    version = UnreadableVersion.Of(stored.Sequence, stored.TimestampTicks, damage);
                }

                return true;
            }
            catch (StoreCorruptedException) when (!ReferenceEquals(layer, keys.Tree))
            {
                layer = keys.Tree;
            }
            catch (StoreCorruptedException)
            {
                NoteDamage();
                throw;
            }
        }
    }

    /// <summary>The checkpointed version a write of <paramref name="id"/> replaces (see
    /// <see cref="ReadWrittenOver"/>): as <see cref="FromCheckpoint"/>, but a value whose own pages are damaged is an
    /// unreadable version, not a failure.</summary>
    private DocumentVersion? ReplacedFromCheckpoint(SortedKeys keys, string id, int hash)
    {
        TreeLayer? layer = keys.Tree;
        return ReplacedFromCheckpoint(keys, id, hash, ref layer);
    }

    /// <summary>
    /// <see cref="ReplacedFromCheckpoint(SortedKeys, string, int)"/> for apply, which runs after the journal holds the
    /// write, where a failure cannot fail the write alone. A leaf that fails its checks there (a page damaged on disk
    /// since the id filter's build read every leaf, and evicted since, so nothing read it again; writes of a
    /// collection with a complete filter and no damage seen are not read before they are written, see
    /// <see cref="ReadWrittenOver"/>) leaves the write's previous version unknown: the write goes on over an unreadable
    /// version older than every snapshot (sequence 0), so a snapshot older than the write still gets the failure, as
    /// the tree would have given it, and from then on writes read first (<see cref="NoteDamage"/>) and fail alone.
    /// The checkpoint that must merge the write into the damaged leaf fails, logged, until the store is repaired; the
    /// journal keeps every write meanwhile.
    /// </summary>
    private DocumentVersion? ReplacedWhileApplying(SortedKeys keys, string id, int hash)
    {
        try
        {
            return ReplacedFromCheckpoint(keys, id, hash);
        }
        catch (StoreCorruptedException damage)
        {
            NoteDamage();
            return UnreadableVersion.Of(0, 0, damage);
        }
    }

    /// <summary><see cref="ReplacedFromCheckpoint(SortedKeys, string, int)"/> from <paramref name="layer"/>; on
    /// return, the layer whose tree answered.</summary>
    private DocumentVersion? ReplacedFromCheckpoint(SortedKeys keys, string id, int hash, ref TreeLayer? layer) =>
        SearchLayer(keys, id, hash, readValue: true, unreadableValue: true, cache: false, ref layer,
            out DocumentVersion? version)
            ? version
            : null;

    private DocumentVersion ToVersion(in StoredValue stored) =>
        new(stored.Sequence, stored.TimestampTicks, stored.Read(_pages!), isDeleted: false);

    /// <summary>
    /// The live documents of <paramref name="collection"/> at <paramref name="snapshot"/> whose ids are in
    /// [<paramref name="fromInclusive"/>, <paramref name="toExclusive"/>) (null: unbounded), in ordinal order.
    /// <paramref name="expectedEntries"/>: how many the caller will take at most, a hint for prefetch.
    /// </summary>
    public IEnumerable<(string Id, DocumentVersion Version)> Range(string collection, string? fromInclusive,
        string? toExclusive, bool descending, long snapshot, int expectedEntries = int.MaxValue)
    {
        CheckRange(fromInclusive, toExclusive);
        return RangeIterator(collection, fromInclusive, toExclusive, descending, snapshot, expectedEntries);
    }

    /// <summary>Throws <see cref="ArgumentException"/> for an inverted range.</summary>
    public static void CheckRange(string? fromInclusive, string? toExclusive)
    {
        if (fromInclusive is not null && toExclusive is not null
            && string.CompareOrdinal(fromInclusive, toExclusive) > 0)
        {
            ThrowHelper.ThrowArgument(nameof(fromInclusive),
                $"The range is inverted: '{fromInclusive}' is after '{toExclusive}'.");
        }
    }

    /// <summary>The live documents of <paramref name="collection"/> at <paramref name="snapshot"/> whose ids start with
    /// <paramref name="prefix"/>; <paramref name="expectedEntries"/> as for <see cref="Range"/>.</summary>
    public IEnumerable<(string Id, DocumentVersion Version)> Prefix(string collection, string prefix, bool descending,
        long snapshot, int expectedEntries = int.MaxValue)
    {
        ArgumentNullException.ThrowIfNull(prefix);
        return RangeIterator(collection, prefix, PrefixEnd(prefix), descending, snapshot, expectedEntries);
    }

    /// <summary>
    /// The first string after every string that starts with <paramref name="prefix"/> in ordinal order (its last code
    /// unit below U+FFFF raised by one, the rest dropped), or null when there is none (empty, or all U+FFFF).
    /// </summary>
    internal static string? PrefixEnd(string prefix)
    {
        for (int i = prefix.Length - 1; i >= 0; i--)
        {
            if (prefix[i] != char.MaxValue)
            {
                return string.Concat(prefix.AsSpan(0, i), [(char)(prefix[i] + 1)]);
            }
        }

        return null;
    }

    /// <summary>The collections the index knows (written since the open, or in the mounted checkpoint).</summary>
    public IEnumerable<string> CollectionNames() => _collections.Keys;

    /// <summary>
    /// The number of live documents of <paramref name="collection"/> at <paramref name="snapshot"/>, without walking
    /// the collection: the count its checkpointed tree carries, corrected for each id whose presence at the snapshot
    /// may differ from the tree's.
    /// </summary>
    /// <remarks>
    /// Those ids are the replayed ones and the added ones (<see cref="SortedKeys.Added"/>): an id joins the added list
    /// whenever a write changes whether it exists (written when absent, deleted, or written over a delete), and stays
    /// while a snapshot or the tree may see it otherwise (see <see cref="TrimAddedIds"/>). Any other id was alive, or
    /// absent, in every state since the open, the tree's included. The list and the layer are read as a range read
    /// reads them (the list first, the layer pinned after, and the list read again), so the list holds every id
    /// appended before the layer was published: one the layer holds though the snapshot does not see it (written after
    /// the snapshot) is corrected too. Each such id counts its presence at the snapshot less its presence in the
    /// pinned tree, which its chain gives when it can (<see cref="InTree"/>), else a search that copies no value.
    /// </remarks>
    public int Count(string collection, long snapshot)
    {
        if (!_collections.TryGetValue(collection, out SortedKeys? keys))
        {
            return 0;
        }

        string[] replayed = keys.Replayed?.SortedIds ?? [];
        (AddedIds addedIds, TreeLayer? layer) = PinAddedIdsAndTree(keys, collection);
        try
        {
            long count = 0;
            if (layer?.Root is not null
                && layer.Checkpoint.Collections.TryGetValue(collection, out CollectionTree? tree))
            {
                count = tree.Count;
            }

            IdSkipList added = addedIds.Sorted();
            foreach (string id in MergeSinceOpen(replayed, 0, replayed.Length, added, null, null, descending: false))
            {
                bool inTree = layer?.Root is not null && InTree(keys, collection, id, snapshot, layer);
                bool live = IsLive(keys, id, snapshot, layer, inTree);
                count += (live ? 1 : 0) - (inTree ? 1 : 0);
            }

            return (int)Math.Min(count, int.MaxValue);
        }
        finally
        {
            if (layer is not null)
            {
                PageStore.Unpin(layer.Checkpoint);
            }
        }
    }

    /// <summary>
    /// Whether the tree of <paramref name="layer"/> (pinned, with a root) holds <paramref name="id"/>, read from the
    /// id's chain when it can be (not for an id the tree is ahead for, <see cref="PageCheckpoint.SequenceOf"/>): its
    /// newest version at or below the layer's sequence is what the tree holds, and a
    /// chain whose versions are all above it but whose oldest is the id's first (<see cref="DocumentVersion.IsFirst"/>)
    /// at or below <paramref name="snapshot"/> means the tree lacks it (that version was written before this count
    /// pinned the layer, so against a layer at most as new, which lacked the id, and nothing wrote the id between).
    /// Otherwise (no chain, or one pruned below the layer) the tree is searched.
    /// </summary>
    private bool InTree(SortedKeys keys, string collection, string id, long snapshot, TreeLayer layer)
    {
        HeadTable heads = keys.Heads;
        long treeSequence = layer.Checkpoint.Sequence;
        // A tree ahead of its checkpoint for the id (CollectionTree.AheadSequence) may hold a version newer than
        // the checkpoint's: only the tree itself says whether it holds the id.
        if (heads.Find(id, IdBytes.HashOf(id)) is int version and not 0
            && layer.Checkpoint.SequenceOf(collection, id) == treeSequence)
        {
            int oldest = version;
            while (version != 0 && heads.Record(version).Sequence > treeSequence)
            {
                oldest = version;
                version = heads.OlderOf(version);
            }

            if (version != 0)
            {
                return !heads.Record(version).IsDeleted;
            }

            if (heads.Record(oldest).IsFirst && heads.Record(oldest).Sequence <= snapshot)
            {
                return false;
            }
        }

        return BTree.Contains(layer.Root, id, _pages!);
    }

    /// <summary>The walk <see cref="Count"/> replaces: every live document of the collection at the snapshot,
    /// read (tests compare the two).</summary>
    internal int CountByWalking(string collection, long snapshot)
    {
        int count = 0;
        foreach (var _ in RangeIterator(collection, null, null, descending: false, snapshot))
        {
            count++;
        }

        return count;
    }

    /// <summary>
    /// Whether <paramref name="id"/> is alive at <paramref name="snapshot"/>: <see cref="Find(in DocumentKey, long,
    /// out bool)"/> without reading a value. <paramref name="inTree"/> is the id's presence in the tree of
    /// <paramref name="layer"/>, used when the read falls through to the tree and that layer is still current.
    /// </summary>
    private bool IsLive(SortedKeys keys, string id, long snapshot, TreeLayer? layer, bool inTree)
    {
        if (keys.Replayed is { } replayed && replayed.TryGetSlot(id, out int slot) && !replayed.IsShadowed(slot))
        {
            return !replayed.VersionAt(slot).IsDeleted;
        }

        int hash = IdBytes.HashOf(id);
        while (true)
        {
            HeadTable heads = keys.Heads;
            int head = heads.Find(id, hash);
            if (head != 0)
            {
                int version = heads.At(head, snapshot);
                return version != 0 && !heads.Record(version).IsDeleted;
            }

            // As in Find: the tree's answer holds only if the key is still not in the heads after it was read.
            bool present = ReferenceEquals(keys.Tree, layer) ? inTree : TreeContains(keys, id, hash);
            if (keys.Heads.Find(id, hash) == 0)
            {
                return present;
            }
        }
    }

    /// <inheritdoc/>
    /// <remarks>With overlapping groups the committer validates on one thread while another applies and prunes, so
    /// this reads like <see cref="GetLatest"/>.</remarks>
    public long GetVersion(in DocumentKey key) => GetLatest(key)?.Sequence ?? 0;

    /// <inheritdoc/>
    public void Validate(CommitBatch batch)
    {
    }

    /// <summary>
    /// Reads, on the writer's thread before <paramref name="batch"/> is submitted, the checkpointed version each
    /// command writes over when no version of its id is in memory, and notes them on the batch
    /// (<see cref="WrittenOverVersions"/>) for <see cref="Apply"/>, which starts the id's chain at that version. A
    /// page that fails its checks throws <see cref="StoreCorruptedException"/> here, failing this write alone before
    /// the journal holds it; met by the committer's apply instead, after the journal write, the damage could only
    /// fault the store. Ids the collection's complete filter has never seen, or that sort above every id of the
    /// tree, are not read (apply needs no tree for them either), except that once damage was seen the leaf such a new
    /// id would go into is read (<see cref="ReadLeafOf"/>).
    /// <para>
    /// Which collections. Those without a complete <see cref="IdFilter"/>: right after an open, while the filter is
    /// built (which reads every leaf, and so finds a damaged one), and collections too large for one, whose every
    /// write searches the tree, possibly reading from disk: here on the writers' threads, in parallel, rather than in
    /// apply under the write lock. And every collection once a page of a current tree has failed its checks
    /// (<see cref="NoteDamage"/>). A collection with a complete filter and no damage seen is left to apply: its new
    /// ids need no search, and an id the tree holds is searched there while the group's fsync runs, off the
    /// writers' path (its leaves were all read whole when the filter was built, so only an overflow page, or a leaf
    /// damaged on disk since, can fail there: apply then goes on over an unreadable version, see
    /// <see cref="ReplacedWhileApplying"/>).
    /// </para>
    /// </summary>
    internal void ReadWrittenOver(CommitBatch batch)
    {
        List<BatchCommand> commands = batch.Commands;
        WrittenOverVersions? read = null;
        for (int i = 0; i < commands.Count; i++)
        {
            DocumentKey key = commands[i].Key;
            if (!_collections.TryGetValue(key.Collection, out SortedKeys? keys)
                || keys.Tree is not { Root: not null } layer
                || (keys.Filter is { IsComplete: true } && !DamageSeen))
            {
                continue; // no tree, or one apply searches itself (see above)
            }

            // The layer before the filter, as SearchCheckpoint reads them; the cheap answers first (a new id is ruled
            // out by the filter, or by sorting above the tree's ids).
            int hash = IdBytes.HashOf(key.Id);
            if ((keys.Filter is { IsComplete: true } filter && !filter.MightContain(hash))
                || layer.IsAboveEveryId(key.Id, _pages!))
            {
                if (DamageSeen)
                {
                    ReadLeafOf(keys, key.Id, layer);
                }

                continue; // in no tree
            }

            if (keys.Heads.Find(key.Id, hash) != 0
                || (keys.Replayed is { } replayed && replayed.TryGetSlot(key.Id, out int slot)
                    && !replayed.IsShadowed(slot)))
            {
                continue; // apply starts from the head or the replayed version in memory
            }

            TreeLayer? searched = layer;
            DocumentVersion? version = ReplacedFromCheckpoint(keys, key.Id, hash, ref searched);
            read ??= new WrittenOverVersions(commands.Count);
            read.Set(i, searched!, version);
            AfterWrittenOverRead?.Invoke(key.Id);
        }

        batch.StateNotes = read;
    }

    /// <summary>
    /// Reads the leaf of <paramref name="layer"/>'s tree that <paramref name="id"/>, an id no tree holds, would go
    /// into: the checkpoint that adds it rewrites that leaf, which it cannot if the leaf is damaged (every checkpoint
    /// would fail), so once damage was seen a write of a new id reads the leaf first and fails alone on a damaged one.
    /// </summary>
    private void ReadLeafOf(SortedKeys keys, string id, TreeLayer layer)
    {
        while (true)
        {
            try
            {
                BTree.Contains(layer.Root, id, _pages!);
                return;
            }
            catch (StoreCorruptedException) when (!ReferenceEquals(layer, keys.Tree))
            {
                if (keys.Tree is not { Root: not null } newer)
                {
                    return;
                }

                layer = newer;
            }
        }
    }

    /// <summary>
    /// Records that the store's files hold damage (any thread: a page of a current tree that failed its checks in a
    /// read, the filter's build, a write's read or a checkpoint; any problem a scrub reports): from then on every
    /// write reads the version it replaces on its own thread (<see cref="ReadWrittenOver"/>), so a write over a
    /// damaged page fails alone instead of faulting the store. The flag is never cleared: a plain store, release.
    /// </summary>
    internal void NoteDamage() => Volatile.Write(ref _damageSeen, 1);

    /// <summary>Whether damage was seen in the store's files since the open (<see cref="NoteDamage"/>).</summary>
    internal bool DamageSeen => Volatile.Read(ref _damageSeen) != 0;

    /// <inheritdoc/>
    public void Apply(CommitBatch batch, ReadOnlyMemory<byte> encoded, long sequence, long timestampTicks)
    {
        lock (_writeLock)
        {
            ApplyLocked(batch, encoded, sequence, timestampTicks);
        }
    }

    private void ApplyLocked(CommitBatch batch, ReadOnlyMemory<byte> encoded, long sequence, long timestampTicks)
    {
        if (!_trimDue.IsEmpty)
        {
            TrimAddedIds();
        }

        long oldest = _snapshots.Oldest(VisibleSequence);
        if (oldest != _pruneOldest)
        {
            (_pruneOldest, _pruneOldestSince) = (oldest, sequence); // it only grows (SnapshotRegistry.Oldest)
            _heldBytes = 0;
        }

        // The heads keep each command's id and value as slices of the store's copy in the journal entry, never the
        // caller's memory.
        ArraySegment<byte> entry = ArrayOf(encoded);
        byte[] buffer = entry.Array!;
        int at = BatchEncoding.FirstCommand;
        string? collection = null;
        SortedKeys keys = null!;
        List<BatchCommand> commands = batch.Commands;
        var writtenOver = batch.StateNotes as WrittenOverVersions;
        for (int c = 0; c < commands.Count; c++)
        {
            BatchCommand command = commands[c];
            BatchEncoding.NextCommand(entry, ref at, out int idOffset, out int idLength, out int valueOffset,
                out int valueLength);
            idOffset += entry.Offset;
            valueOffset += entry.Offset;
            if (!string.Equals(command.Key.Collection, collection, StringComparison.Ordinal))
            {
                collection = command.Key.Collection; // a batch's commands mostly share their collection
                keys = _collections.GetOrAdd(collection,
                    static (_, index) => new SortedKeys(index.NewCollectionFilter()), this);
            }

            ReadOnlySpan<byte> id = buffer.AsSpan(idOffset, idLength);
            int hash = IdBytes.HashOf(command.Key.Id);
            HeadTable heads = keys.Heads;
            int slot = heads.Locate(id, hash, out int head);
            ReplayedDocuments? shadowIn = null;
            int shadowedSlot = -1;
            bool isDelete = command.Kind == ChangeKind.Delete;
            bool absent = false;
            bool wasDeleted;
            int older = head;
            if (head == 0)
            {
                DocumentVersion? previous = null;
                if (keys.Replayed is { } replayed && replayed.TryGetSlot(command.Key.Id, out int replayedSlot)
                    && !replayed.IsShadowed(replayedSlot))
                {
                    // First write of a replayed document since the open: its replayed version becomes the oldest of the
                    // chain, and the slot is marked shadowed once the heads hold the new version (ReplayedDocuments).
                    previous = replayed.VersionAt(replayedSlot);
                    shadowIn = replayed; // not re-read: a checkpoint may drop the replayed documents meanwhile
                    shadowedSlot = replayedSlot;
                }
                else if ((writtenOver is not null && writtenOver.TryGet(c, keys.Tree, out DocumentVersion? read)
                    ? read : ReplacedWhileApplying(keys, command.Key.Id, hash)) is { } checkpointed)
                {
                    // First write of a checkpointed document since it was last in memory: its tree version becomes the
                    // oldest of the chain (the heads are read before the tree, so readers move to the chain at once).
                    previous = checkpointed;
                }
                else
                {
                    absent = true;
                    if (keys.Filter is { } filter && !filter.Add(hash))
                    {
                        // Grown to its limit: dropped (release) before the id can reach a tree, so no reader trusts a
                        // filter that lacks it; the collection's reads and writes search the trees from now on.
                        keys.Filter = null;
                        filter.Release();
                    }
                }

                wasDeleted = previous?.IsDeleted ?? false;
                if (previous is { } found)
                {
                    older = heads.Append(OlderRecord(found));
                }

                // A key new to the heads stays in them while a snapshot older than this write is open (eviction waits
                // for the oldest to pass its head): count it against what the oldest holds back.
                _heldBytes += valueLength + (Unsafe.SizeOf<HeadRecord>() * (previous is null ? 1 : 2));
            }
            else
            {
                // Cut what no snapshot can reach: everything older than the version visible at the oldest snapshot.
                // A head written since the oldest took its value was cut at that value then, and every version after
                // it is newer than the oldest: nothing more to cut, so no walk. (Without this, a snapshot held open
                // while an id is written again and again made each write walk every version since the snapshot.)
                ref readonly HeadRecord current = ref heads.Record(head);
                wasDeleted = current.IsDeleted;
                if (current.Sequence < _pruneOldestSince && heads.At(head, oldest) is int visibleToOldest and not 0)
                {
                    heads.Prune(visibleToOldest);
                }

                if (current.Sequence > oldest)
                {
                    // The version written over stays for the oldest snapshot (every version above the one it sees
                    // does): count what it holds back.
                    _heldBytes += current.ValueLength + Unsafe.SizeOf<HeadRecord>();
                }
            }

            // The added ids hold every id that a newer tree may lack while a snapshot still sees it: those written
            // when absent, and those deleted or written over a delete (a checkpoint drops a deleted id from its tree,
            // and an older snapshot may still see the id alive). Ids the skip list holds already are not added twice.
            if (absent || isDelete != wasDeleted)
            {
                keys.Added.Append(id);
            }

            int written = heads.Append(new HeadRecord
            {
                Buffer = buffer,
                Sequence = sequence,
                TimestampTicks = timestampTicks,
                Older = older,
                ValueOffset = valueOffset,
                ValueLength = valueLength,
                IdOffset = idOffset,
                IdLength = idLength,
                Hash = hash,
                Flags = (byte)((isDelete ? HeadRecord.DeletedFlag : 0) | (absent ? HeadRecord.FirstFlag : 0)),
            });
            heads.SetHead(slot, hash, written, inserted: head == 0);
            shadowIn?.Shadow(shadowedSlot);
            AfterWriteApplied?.Invoke(command.Key.Id);
        }

        if (_heldBytes > _snapshots.HeldBytesLimit)
        {
            // The oldest snapshots keep more versions than the store lets the in-memory layer hold: expire them (their
            // next read throws), so the next batch prunes what they kept instead of memory growing until their age
            // runs out. Writers go on at their pace; a snapshot is meant to be short-lived.
            _snapshots.ExpireHolding(oldest);
            _heldBytes = 0;
        }
    }

    /// <summary>A record for an older version the index took from the replayed documents or a tree (no id: it is
    /// never a head).</summary>
    private static HeadRecord OlderRecord(DocumentVersion version)
    {
        ArraySegment<byte> value = ArrayOf(version.Json);
        return new HeadRecord
        {
            Buffer = value.Array!,
            Sequence = version.Sequence,
            TimestampTicks = version.TimestampTicks,
            ValueOffset = value.Offset,
            ValueLength = value.Count,
            IdOffset = -1,
            Flags = (byte)((version.IsDeleted ? HeadRecord.DeletedFlag : 0)
                | (version.IsFirst ? HeadRecord.FirstFlag : 0)
                | (version.IsUnreadable ? HeadRecord.UnreadableFlag : 0)),
        };
    }

    /// <summary>The array behind <paramref name="memory"/> (the store's memory always has one; anything else is
    /// copied into one).</summary>
    private static ArraySegment<byte> ArrayOf(ReadOnlyMemory<byte> memory)
    {
        if (memory.IsEmpty)
        {
            return new ArraySegment<byte>([]);
        }

        return MemoryMarshal.TryGetArray(memory, out ArraySegment<byte> segment) && segment.Array is not null
            ? segment
            : new ArraySegment<byte>(memory.ToArray());
    }

    /// <inheritdoc/>
    public void Publish(long sequence)
    {
        // A full fence, not only a release: the next batch's scan of the snapshot registry loads its slots after this
        // store, and a reader registering meanwhile stores its slot before it re-reads this (SnapshotRegistry).
        Interlocked.Exchange(ref _visible, sequence);
    }

    /// <summary>
    /// Makes <paramref name="checkpoint"/>'s trees the bottom layer of their collections (before the bulk load, before
    /// any reader): a document no later layer holds is read from its tree through <paramref name="reader"/>. The
    /// caller pinned the checkpoint; the index now owns that pin (released by <see cref="AdvanceCheckpoint"/> or
    /// <see cref="ReleaseCheckpoint"/>). The visible sequence starts at the checkpoint's.
    /// </summary>
    internal void AttachCheckpoint(PageCheckpoint checkpoint, IPageReader reader)
    {
        if (!_collections.IsEmpty || _bulkLoad is not null || _layer is not null)
        {
            ThrowHelper.ThrowInvalidOperation("A checkpoint is attached to an empty index.");
        }

        _pages = reader;
        _layer = checkpoint;
        foreach (CollectionTree tree in checkpoint.Collections.Values)
        {
            var keys = new SortedKeys();
            keys.PublishTree(new TreeLayer(checkpoint, tree.Root));
            _collections[tree.Name] = keys;
            CheckpointedDocuments += tree.Count;
        }

        SizeDocumentCache(CheckpointedDocuments);
        Volatile.Write(ref _visible, checkpoint.Sequence);
    }

    /// <summary>
    /// The checkpoint's thread, after <paramref name="checkpoint"/> (which took <paramref name="changes"/>) became
    /// durable and current, pinned by the caller (the index now owns the pin): reads move to its trees, the replayed
    /// documents go if it covers them, the previous checkpoint's pin is released, and the heads it covers are
    /// evicted (see the protocol).
    /// </summary>
    internal void AdvanceCheckpoint(PageCheckpoint checkpoint, CheckpointChanges changes)
    {
        PageCheckpoint? previous = _layer;
        if (previous is not null && checkpoint.Generation <= previous.Generation)
        {
            ThrowHelper.ThrowInvalidOperation("The index moves to newer checkpoints only.");
        }

        long documents = 0;
        Dictionary<string, int[]?>? changed =
            Volatile.Read(ref _documentCache) is null ? null : ChangedHashes(changes);
        foreach (CollectionTree tree in checkpoint.Collections.Values)
        {
            // With the document cache on: the hashes of the ids the checkpoint changed in the tree (none for a tree
            // it only rewrote), so the new tree keeps the cached documents of the others; null: not known.
            int[]? changedHashes = changed is null ? null : changed.GetValueOrDefault(tree.Name, []);
            _collections.GetOrAdd(tree.Name, static _ => new SortedKeys())
                .PublishTree(new TreeLayer(checkpoint, tree.Root, changedHashes: changedHashes));
            documents += tree.Count;
        }

        SizeDocumentCache(documents);

        // Collections the checkpoint has no tree for (every document deleted, or none checkpointed yet); one the
        // committer creates after this loop has no layer, which reads the same.
        var empty = new TreeLayer(checkpoint, null);
        foreach ((string name, SortedKeys keys) in _collections)
        {
            if (!checkpoint.Collections.ContainsKey(name))
            {
                keys.PublishTree(empty);
            }
        }

        if (changes.CoveredReplayed)
        {
            foreach (SortedKeys keys in _collections.Values)
            {
                keys.Replayed = null;
            }
        }

        _layer = checkpoint;
        if (previous is not null)
        {
            PageStore.Unpin(previous);
        }

        _evictLater.AddRange(changes.Evictable);
        EvictCheckpointed();
    }

    /// <summary>The most ids a checkpoint may change in one collection for its new tree to keep the cached documents
    /// of the others (their hashes are kept with the tree, four bytes each, while it is current or a snapshot reads
    /// it).</summary>
    internal const int MaxChangedHashes = 1 << 20;

    /// <summary>Per collection of <paramref name="changes"/>, the sorted hashes (<see cref="IdBytes.HashOf(string)"/>)
    /// of the ids the checkpoint put or deleted (<see cref="CollectionChanges.Hashes"/>: the page store lets go of the
    /// changes themselves once applied); null for a collection of more than <see cref="MaxChangedHashes"/>, or without
    /// hashes (not known); a collection it did not change is not in the result.</summary>
    private static Dictionary<string, int[]?> ChangedHashes(CheckpointChanges changes)
    {
        var result = new Dictionary<string, int[]?>(StringComparer.Ordinal);
        foreach (CollectionChanges collection in changes.Collections)
        {
            List<int>? list = collection.Hashes;
            if (list is null || list.Count > MaxChangedHashes)
            {
                result[collection.Name] = null;
                continue;
            }

            int[] hashes = [.. list];
            IntRadixSort.Sort(hashes);
            result[collection.Name] = hashes;
        }

        return result;
    }

    /// <summary>The id filter of <paramref name="collection"/>, or null (tests and diagnostics).</summary>
    internal IdFilter? IdFilterOf(string collection) =>
        _collections.TryGetValue(collection, out SortedKeys? keys) ? keys.Filter : null;

    /// <summary>The filter a collection the committer creates starts with: complete (no tree holds any of its ids
    /// yet), or none when filters are off or their memory is taken.</summary>
    private IdFilter? NewCollectionFilter() =>
        _idFilterBytes > 0 ? IdFilter.Create(0, _idFilterBytes, complete: true, _idFilterBudget) : null;

    /// <summary>
    /// The checkpoint's thread, before its first checkpoint: builds the <see cref="IdFilter"/> of each collection the
    /// open found (those the committer created since have theirs), when the data file is at most the size the index
    /// was given (reading every tree through the cache costs a pass over it) and the collection's ids fit the
    /// filter's limit. The filter is published first, under the write lock, so every id the committer writes from
    /// then on is added by it; then the ids of the current tree (no other thread publishes trees meanwhile:
    /// checkpoints and compactions run on this thread), of the replayed documents and of the heads (which hold every
    /// id written before the filter was published that a later checkpoint can put in a tree) are added, and the
    /// filter is marked complete. A collection whose ids do not fit, or whose tree fails to read, keeps no filter.
    /// Returns the filters built. <paramref name="cancellationToken"/> (a close) stops it between two tree pages.
    /// </summary>
    internal int BuildIdFilters(long dataFileBytes, CancellationToken cancellationToken = default)
    {
        if (_idFilterBytes <= 0 || dataFileBytes > _idFilterBuildBytes)
        {
            return 0;
        }

        int built = 0;
        foreach ((string name, SortedKeys keys) in _collections)
        {
            if (keys.Filter is not null)
            {
                continue;
            }

            TreeLayer? layer = keys.Tree;
            long ids = (layer?.Root is null ? 0 : layer.Checkpoint.Collections.GetValueOrDefault(name)?.Count ?? 0)
                + (keys.Replayed?.SortedIds.Length ?? 0) + keys.Heads.Count;
            if (IdFilter.Create(ids, _idFilterBytes, complete: false, _idFilterBudget) is not { } filter)
            {
                continue; // more ids than a filter may hold, or the filters' memory is taken
            }

            lock (_writeLock)
            {
                keys.Filter = filter;
            }

            if (FillFilter(filter, keys, layer, cancellationToken))
            {
                filter.MarkComplete();
                built++;
            }
            else
            {
                lock (_writeLock)
                {
                    keys.Filter = null;
                }

                filter.Release();
            }
        }

        return built;
    }

    /// <summary>Adds the ids <see cref="BuildIdFilters"/> must add to <paramref name="filter"/>; false when one did
    /// not fit or the tree could not be read.</summary>
    private bool FillFilter(IdFilter filter, SortedKeys keys, TreeLayer? layer, CancellationToken cancellationToken)
    {
        try
        {
            if (layer?.Root is not null
                && !BTree.VisitKeys(layer.Root, _pages!, key => filter.Add(IdBytes.HashOf(key)), cancellationToken))
            {
                return false;
            }
        }
        catch (Exception error) when (error is StoreCorruptedException or IOException)
        {
            if (error is StoreCorruptedException)
            {
                NoteDamage();
            }

            return false; // a damaged or unreadable page fails the reads that reach it, as without a filter
        }

        if (keys.Replayed is { } replayed)
        {
            foreach (string id in replayed.SortedIds)
            {
                if (!filter.Add(IdBytes.HashOf(id)))
                {
                    return false;
                }
            }
        }

        foreach (long slot in keys.Heads.Slots)
        {
            if (slot != 0 && !filter.Add(HeadTable.HashOfSlot(slot)))
            {
                return false;
            }
        }

        return true;
    }

    /// <summary>Whether the heads need the checkpoint's thread without a checkpoint
    /// (<see cref="EvictCheckpointed"/>): keys wait for eviction because a snapshot held them back, or a collection's
    /// table holds mostly records no version can reach any more.</summary>
    internal bool HasHeadsMaintenance
    {
        get
        {
            if (_evictLater.Count > 0)
            {
                return true;
            }

            foreach (SortedKeys keys in _collections.Values)
            {
                if (HasOutgrown(keys.Heads))
                {
                    return true;
                }
            }

            return false;
        }
    }

    /// <summary>Records appended to a table since it was built, past which it is rebuilt even with nothing to evict:
    /// pruned versions stay in a table's arrays until a rebuild leaves them behind, so a store whose checkpoints are
    /// rare (or off) and whose writes overwrite the same ids would otherwise keep every version it ever
    /// wrote.</summary>
    internal const int HeadsRebuildMinimum = 65_536;

    /// <summary>Whether <paramref name="heads"/> has appended more records since it was built than it started with,
    /// and more than <see cref="HeadsRebuildMinimum"/>, and holds enough records that are not its ids' heads (the most
    /// a rebuild can leave behind) to pay for copying the heads: more than that minimum and half its ids. A rebuild
    /// then leaves the unreachable ones behind, at a cost proportional to the records appended since the last one; a
    /// table of new ids only (a bulk load), whose every record is a head, is never rebuilt for nothing.</summary>
    private static bool HasOutgrown(HeadTable heads)
    {
        int records = heads.RecordCount;
        int ids = heads.Count;
        return records - heads.BuiltRecords > Math.Max(HeadsRebuildMinimum, heads.BuiltRecords)
            && records - ids > Math.Max(HeadsRebuildMinimum, ids / 2);
    }

    /// <summary>
    /// The checkpoint's thread: evicts from the heads every waiting key whose head the current layer's checkpoint
    /// holds and no open snapshot is older than; keeps the keys an open snapshot still holds back. Also rebuilds a
    /// collection's heads that outgrew their reachable records (<see cref="HasOutgrown"/>). Returns the number of
    /// keys marked for eviction.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // once per checkpoint over its keys: no tier-0 pass
    internal int EvictCheckpointed()
    {
        List<EvictionCandidate> waiting = _layer is null ? [] : _evictLater;
        if (_layer is not null)
        {
            _evictLater = [];
        }

        long oldest = _snapshots.OldestOpen(VisibleSequence);

        // Each collection's new heads are built beside the committer (HeadTableRebuild), which waits only for the
        // last pass; a candidate is matched against the heads after its rebuild started, so a commit that writes the
        // id again meanwhile is replayed into the new table.
        var rebuilds = new Dictionary<SortedKeys, HeadTableRebuild>();
        foreach (EvictionCandidate candidate in waiting)
        {
            rebuilds.TryAdd(candidate.Keys, null!);
        }

        foreach (SortedKeys keys in _collections.Values)
        {
            if (HasOutgrown(keys.Heads))
            {
                rebuilds.TryAdd(keys, null!);
            }
        }

        if (rebuilds.Count == 0)
        {
            return 0;
        }

        lock (_writeLock)
        {
            // Started under the write lock, when every record appended is published (HeadTableRebuild); only this
            // thread replaces the heads.
            foreach (SortedKeys keys in rebuilds.Keys)
            {
                rebuilds[keys] = new HeadTableRebuild(keys.Heads, oldest);
            }
        }

        int evicted = 0;
        foreach (EvictionCandidate candidate in waiting)
        {
            HeadTableRebuild rebuild = rebuilds[candidate.Keys];
            HeadTable heads = rebuild.Source;
            // In the table the checkpoint read, the candidate's record: the rebuild leaves the id out only if that
            // record is still its head when the rebuild reads it. In a table an eviction made since, found by its id.
            ref readonly HeadRecord checkpointed = ref candidate.Record;
            int head = ReferenceEquals(candidate.Table, heads) ? candidate.Head
                : heads.Find(checkpointed.Id, checkpointed.Hash);
            if (head == 0 || heads.Record(head).Sequence != checkpointed.Sequence)
            {
                continue; // written again since: the newer head stays, and a later checkpoint offers it
            }

            if (checkpointed.Sequence > oldest)
            {
                // Held back by a snapshot: kept while the head is still the one checkpointed.
                if (heads.Find(checkpointed.Id, checkpointed.Hash) == head)
                {
                    _evictLater.Add(candidate);
                }
            }
            else if (rebuild.Evict(head))
            {
                evicted++;
            }
        }

        var due = new List<(SortedKeys Keys, HeadTableRebuild Rebuild)>(rebuilds.Count);
        foreach ((SortedKeys keys, HeadTableRebuild rebuild) in rebuilds)
        {
            if (rebuild.EvictedCount > 0 || HasOutgrown(rebuild.Source))
            {
                rebuild.CopyHeads();
                rebuild.CatchUp();
                due.Add((keys, rebuild));
            }
        }

        if (due.Count > 0)
        {
            lock (_writeLock)
            {
                foreach ((SortedKeys keys, HeadTableRebuild rebuild) in due)
                {
                    rebuild.CatchUp(); // the committer is stopped: what it appended since the first pass
                    keys.Heads = rebuild.Result; // the old table is not written again
                }
            }
        }

        // An added-id list much longer than the heads holds ids that are in the tree now and that no snapshot needs
        // from the list any more: the committer rebuilds it (TrimAddedIds). The heads are counted (which takes every
        // lock of their dictionary) only for a list past the minimum.
        foreach (SortedKeys keys in _collections.Values)
        {
            long added = keys.Added.Count;
            if (added > _addedIdsTrimMinimum && added > 2L * keys.Heads.Count
                && Interlocked.Exchange(ref keys.TrimQueued, 1) == 0)
            {
                _trimDue.Enqueue(keys);
            }
        }

        return evicted;
    }

    /// <summary>
    /// The committer, before it applies a batch: replaces each queued collection's added-id list with one that holds
    /// the keys of its heads only. Range reads need the list for the ids the current tree may lack while a snapshot
    /// sees them: ids added after the tree's checkpoint, and ids deleted (or written over a delete) after a snapshot
    /// still open. Each such id has a version newer than that checkpoint or than the oldest open snapshot, and the
    /// checkpoint's thread evicts from the heads only keys whose newest version is at or below both, so all of them
    /// are heads. The readers merge the list with the tree and skip duplicates, so the heads that are in the tree
    /// too cost only their place in the list. Published with a release store after the tree layer the eviction relied
    /// on (queued after it, on the checkpoint's thread; taken here with an acquire): a reader that loads the new list
    /// (acquire) then loads that layer or a newer one. A reader that loaded the old list walks that one, a superset.
    /// The committer alone appends to either list, so no id appended meanwhile is lost.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)] // rare, over every head
    private void TrimAddedIds()
    {
        while (_trimDue.TryDequeue(out SortedKeys? keys))
        {
            var fresh = new AddedIds(readBefore: keys.Added.WasRead);
            HeadTable heads = keys.Heads;
            for (int slot = 0; slot < heads.SlotCount; slot++)
            {
                if (heads.HeadAt(slot) is int head and not 0)
                {
                    fresh.Append(heads.Record(head).Id);
                }
            }

            keys.ReplaceAdded(fresh);
            Volatile.Write(ref keys.TrimQueued, 0);
        }
    }

    /// <summary>Ids in a collection's added-id list (tests and diagnostics).</summary>
    internal long AddedIdCount(string collection) =>
        _collections.TryGetValue(collection, out SortedKeys? keys) ? keys.Added.Count : 0;

    /// <summary>Releases the index's pin of its checkpoint (the store's close, after the last reader).</summary>
    internal void ReleaseCheckpoint()
    {
        if (Interlocked.Exchange(ref _layer, null) is { } layer)
        {
            PageStore.Unpin(layer);
        }
    }

    /// <summary>Ids held in the heads across all collections (a figure while commits run: tests, diagnostics and
    /// the size of a checkpoint's lists). Read through the dictionary's enumerator, which takes no lock.</summary>
    internal int HeadCount
    {
        get
        {
            int count = 0;
            foreach ((_, SortedKeys keys) in _collections)
            {
                count += keys.Heads.Count;
            }

            return count;
        }
    }

    /// <summary>Records in the heads' tables across all collections, reachable or not (tests and
    /// diagnostics).</summary>
    internal long HeadRecords
    {
        get
        {
            long records = 0;
            foreach (SortedKeys keys in _collections.Values)
            {
                records += keys.Heads.RecordCount;
            }

            return records;
        }
    }

    /// <summary>
    /// Starts a bulk load: recovery replay into this empty index, before any reader exists. Until
    /// <see cref="EndBulkLoad"/>, batches go through <see cref="ApplyReplayed"/>. <paramref name="putsPerCollection"/>
    /// (puts in the journal per collection, an upper bound on its ids) sizes each collection's arrays once.
    /// </summary>
    internal void BeginBulkLoad(IReadOnlyDictionary<string, int> putsPerCollection)
    {
        if (_bulkLoad is not null || HasVersions())
        {
            ThrowHelper.ThrowInvalidOperation("A bulk load needs an index with no versions yet.");
        }

        _bulkLoad = new BulkLoad(putsPerCollection);
    }

    /// <summary>
    /// Applies replayed batch <paramref name="sequence"/> during a bulk load into each collection's
    /// <see cref="ReplayedDocuments.Builder"/>. Values are not copied yet: each put records where its value lies
    /// (<paramref name="entry"/>, the entry's data in the journal, plus the command's value start) in its id's slot,
    /// and
    /// <see cref="EndBulkLoad"/> copies the values still live, so an overwritten or deleted value is never copied. No
    /// snapshot can exist yet, so a put replaces the id's replayed state outright and a delete frees the id (no
    /// version chains, no tombstones: absent and deleted read the same). The journal keeps every segment mapped until
    /// the end of the bulk load (nothing purges during an open).
    /// </summary>
    internal void ApplyReplayed(List<ReplayedCommand> commands, JournalDataLocation entry, long sequence,
        long timestampTicks)
    {
        BulkLoad bulk = _bulkLoad ?? throw new InvalidOperationException("No bulk load is in progress.");
        for (int i = 0; i < commands.Count; i++)
        {
            ReplayedCommand command = commands[i];
            ReplayedDocuments.Builder collection = bulk.CollectionOf(command.Key.Collection, this);
            if (command.Kind == ChangeKind.Delete)
            {
                collection.Delete(command.Key.Id, sequence, timestampTicks);
            }
            else
            {
                collection.Put(command.Key.Id, sequence, timestampTicks, entry.Plus(command.ValueStart),
                    command.ValueLength);
            }
        }

        Volatile.Write(ref _visible, sequence);
    }

    /// <summary>The fewest replayed ids (slots) for which <see cref="EndBulkLoad"/> works in parallel (below, about 2
    /// MB of values, one thread does).</summary>
    internal const int MinPutsForParallelEnd = 16_384;

    /// <summary>
    /// Ends a bulk load: copies the live documents' values out of the journal into slabs sized to exactly their bytes
    /// (so replay keeps the live documents, not every version the journal holds), sorts each collection's live ids,
    /// and makes each collection's <see cref="ReplayedDocuments"/> its base layer.
    /// </summary>
    /// <remarks>
    /// For a collection of at least <see cref="MinPutsForParallelEnd"/> slots on more than one processor, both halves
    /// of the copy and the sort run as three parallel actions. They touch disjoint state (each half its own slots and
    /// its own slabs, the sort only the id list), and no reader exists before the open returns. They are mostly page
    /// faults: the slabs are memory the process has not touched yet, which a virtual machine that backs memory lazily
    /// charges per page (docs/measurements.md, "Recovery replay"), and page faults on two cores proceed in parallel.
    /// <see cref="Parallel.Invoke(Action[])"/> runs on the calling thread whatever the thread pool has not started, so
    /// a busy pool slows the open down but never blocks it.
    /// </remarks>
    internal void EndBulkLoad()
    {
        if (_bulkLoad is not { } bulk)
        {
            return;
        }

        foreach ((string name, ReplayedDocuments.Builder collection) in bulk.Collections)
        {
            bool parallel = Environment.ProcessorCount > 1 && collection.SlotCount >= MinPutsForParallelEnd;
            _collections[name].Replayed = collection.Build(parallel);
        }

        _bulkLoad = null;
    }

    /// <summary>
    /// What a checkpoint at <paramref name="sequence"/> writes on top of the one at <paramref name="since"/>: per
    /// collection, the version visible at <paramref name="sequence"/> of every document whose version there is newer
    /// than <paramref name="since"/> (a put, or a delete for a tombstone). The candidates are the heads (every id
    /// written since a checkpoint took and evicted it: each id once, however often written) and, until a checkpoint
    /// covers them, the documents the open replayed. The caller holds a snapshot at <paramref name="sequence"/>
    /// (registered before this call), so no version it needs is pruned meanwhile; commits after it continue. Every
    /// write at or below the sequence was applied, its id in the heads' id table, before the sequence was published,
    /// so the id table read after it lists them all. Ids whose newest version is above the sequence stay in the heads
    /// for the next checkpoint, and so does everything if this checkpoint fails (eviction follows success only).
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // once per checkpoint over its keys: no tier-0 pass
    internal CheckpointChanges CollectChanges(long sequence, long since)
    {
        // While the replayed documents are pending, one entry per id and collection for them: the change's index in
        // the collection's list (> 0, one more than the index), which an id in the heads replaces.
        var byCollection = new Dictionary<string, CollectedChanges>(StringComparer.Ordinal);
        bool replayedPending = _replayedPending;
        if (replayedPending)
        {
            foreach ((string name, SortedKeys keys) in _collections)
            {
                if (keys.Replayed is not { } replayed)
                {
                    continue;
                }

                CollectedChanges? collected = null;
                foreach (string id in replayed.SortedIds)
                {
                    replayed.TryGetSlot(id, out int slot);
                    long replayedSequence = replayed.SequenceAt(slot);
                    // Shadowed or not: a shadowed document's first write may be above the sequence, so the replayed
                    // version is its version here; its heads, when they hold a version at the sequence, replace it.
                    if (replayedSequence > since && replayedSequence <= sequence)
                    {
                        collected ??= CollectedOf(byCollection, name, replayed.SortedIds.Length, positions: true);
                        DocumentVersion version = replayed.VersionAt(slot);
                        collected.Changes.Add(version.IsDeleted
                            ? TreeChange.Delete(id)
                            : TreeChange.Put(id, new StoredValue(version.Sequence, version.TimestampTicks,
                                version.Json)));
                        collected.Hashes.Add(IdBytes.HashOf(id));
                        collected.Positions![id] = collected.Changes.Count;
                    }
                }
            }
        }

        var evictable = new List<EvictionCandidate>(HeadCount + 64); // a figure: a few inserts late, or grown
        foreach ((string name, SortedKeys keys) in _collections)
        {
            // The heads' table changes only on this thread (an eviction), so the records read below stay in it. The
            // ids are taken in the order of their newest records (commit order), so the records, their entries' id
            // bytes and the journal's documents are read front to back rather than in the id table's hash order;
            // the page store sorts the puts by id itself.
            HeadTable heads = keys.Heads;
            long[] slots = heads.Slots;
            int[] order = ArrayPool<int>.Shared.Rent(Math.Max(1, heads.Count + 64));
            int found = 0;
            for (int i = 0; i < slots.Length; i++)
            {
                int head = (int)Volatile.Read(ref slots[i]);
                if (head != 0)
                {
                    if (found == order.Length)
                    {
                        int[] larger = ArrayPool<int>.Shared.Rent(order.Length * 2);
                        order.AsSpan(0, found).CopyTo(larger);
                        ArrayPool<int>.Shared.Return(order);
                        order = larger;
                    }

                    order[found++] = head;
                }
            }

            IntRadixSort.Sort(order.AsSpan(0, found));
            CollectedChanges? current = null;
            foreach (int head in order.AsSpan(0, found))
            {
                ref readonly HeadRecord newest = ref heads.Record(head);
                if (newest.Sequence <= sequence)
                {
                    evictable.Add(new EvictionCandidate(keys, heads, head));
                }

                int version = heads.At(head, sequence);
                if (version == 0 || heads.Record(version).Sequence <= since)
                {
                    continue; // written after the sequence only, or already in the tree at since
                }

                current ??= CollectedOf(byCollection, name, heads.Count, positions: false);
                ref readonly HeadRecord record = ref heads.Record(version);
                var value = new StoredValue(record.Sequence, record.TimestampTicks, record.Value);
                TreeChange change;
                int replayedAt = 0;
                if (current.Positions is null && newest.IdOffset >= 0 && Ascii.IsValid(newest.Id))
                {
                    // The id's bytes in the commit's entry, which no one writes again and the record keeps alive: no
                    // string until a leaf takes the id (TreeChange says why).
                    change = record.IsDeleted
                        ? TreeChange.DeleteAscii(newest.Buffer, newest.IdOffset, newest.IdLength)
                        : TreeChange.PutAscii(newest.Buffer, newest.IdOffset, newest.IdLength, value);
                }
                else
                {
                    string id = Encoding.UTF8.GetString(newest.Id); // from the record's own copy if any
                    change = record.IsDeleted ? TreeChange.Delete(id) : TreeChange.Put(id, value);
                    if (current.Positions is { } positions)
                    {
                        positions.TryGetValue(id, out replayedAt);
                    }
                }

                if (replayedAt > 0)
                {
                    current.Changes[replayedAt - 1] = change;
                }
                else
                {
                    current.Changes.Add(change);
                    current.Hashes.Add(newest.Hash); // the id's, as every record of it carries
                }
            }

            ArrayPool<int>.Shared.Return(order);
        }

        var result = new List<CollectionChanges>(byCollection.Count);
        foreach ((string name, CollectedChanges collected) in byCollection)
        {
            if (collected.Changes.Count > 0)
            {
                result.Add(new CollectionChanges(name, collected.Changes, collected.Hashes,
                    releaseWhenApplied: true)); // a failed checkpoint's retry collects them anew
            }
        }

        return new CheckpointChanges(result, replayedPending, evictable);
    }

    /// <summary>The checkpoint of <paramref name="changes"/> is durable: the replayed documents are covered.</summary>
    internal void ChangesCheckpointed(CheckpointChanges changes)
    {
        if (changes.CoveredReplayed)
        {
            _replayedPending = false;
        }
    }

    private static CollectedChanges CollectedOf(Dictionary<string, CollectedChanges> byCollection, string collection,
        int capacity, bool positions)
    {
        if (!byCollection.TryGetValue(collection, out CollectedChanges? collected))
        {
            collected = new CollectedChanges(capacity, positions);
            byCollection[collection] = collected;
        }

        return collected;
    }

    /// <summary>One collection's changes as <see cref="CollectChanges"/> gathers them (the checkpoint's thread
    /// only).</summary>
    private sealed class CollectedChanges(int capacity, bool positions)
    {
        /// <summary>Each replayed document's change's index plus one (while the replayed documents are
        /// pending).</summary>
        public Dictionary<string, int>? Positions { get; } =
            positions ? new(capacity, StringComparer.Ordinal) : null;

        public List<TreeChange> Changes { get; } = new(capacity);

        /// <summary>Each change's id's hash, in the order of <see cref="Changes"/>.</summary>
        public List<int> Hashes { get; } = new(capacity);
    }

    /// <summary>Whether any version was applied or replayed (a checkpoint's trees aside).</summary>
    private bool HasVersions()
    {
        foreach (SortedKeys keys in _collections.Values)
        {
            if (keys.Heads.Count > 0 || keys.Replayed is not null)
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>Documents in the checkpointed trees the open mounted (the open's log line: exact without reading
    /// the trees).</summary>
    internal long CheckpointedDocuments { get; private set; }

    /// <summary>Live documents across all collections at the visible sequence (<see cref="Count"/> of each; a
    /// restore's result, diagnostics and tests).</summary>
    internal long LiveDocuments()
    {
        long snapshot = VisibleSequence;
        long live = 0;
        foreach (string name in _collections.Keys)
        {
            live += Count(name, snapshot);
        }

        return live;
    }

    /// <summary>How many versions of <paramref name="key"/> are still reachable (tests and diagnostics).</summary>
    internal int ChainLength(in DocumentKey key)
    {
        int length = 0;
        if (!_collections.TryGetValue(key.Collection, out SortedKeys? keys))
        {
            return 0;
        }

        HeadTable heads = keys.Heads;
        int head = heads.Find(key.Id, IdBytes.HashOf(key.Id));
        if (head == 0)
        {
            return keys.Replayed is { } replayed && replayed.TryGetSlot(key.Id, out _) ? 1 : 0;
        }

        for (int version = head; version != 0; version = heads.OlderOf(version))
        {
            length++;
        }

        return length;
    }

    private IEnumerable<(string Id, DocumentVersion Version)> RangeIterator(string collection, string? fromInclusive,
        string? toExclusive, bool descending, long snapshot, int expectedEntries = int.MaxValue)
    {
        if (!_collections.TryGetValue(collection, out SortedKeys? keys))
        {
            yield break;
        }

        // The replayed ids before the tree layer: once the replayed documents are dropped, the layer that covers
        // them is the one loaded after.
        string[] replayed = keys.Replayed?.SortedIds ?? [];
        int replayedStart = fromInclusive is null ? 0 : LowerBound(replayed, fromInclusive);
        int replayedEnd = toExclusive is null ? replayed.Length : LowerBound(replayed, toExclusive);
        // The added ids and the tree layer, read so that every id the snapshot sees alive is in one of them. The list
        // object is read before the layer: an id trimmed from a later list was an evicted head, which the layer read
        // after holds. Its ids are merged after the layer: an id deleted (or rewritten over a delete) after the
        // snapshot is appended when the delete is applied, before any layer that lacks it is published, so merging
        // after the pin puts it in the walk (merged before the pin, an append in between could be passed over while
        // the pinned layer had already dropped the id). A trim between the two reads starts over.
        (AddedIds addedIds, TreeLayer? layer) = PinAddedIdsAndTree(keys, collection);
        IdSkipList added = addedIds.Sorted(); // every id appended before the layer was published, merged
        IEnumerable<string> sinceOpen = MergeSinceOpen(replayed, replayedStart, replayedEnd, added, fromInclusive,
            toExclusive, descending);
        PageCheckpointLease? lease = layer is null ? null : new PageCheckpointLease(layer.Checkpoint);
        try
        {
            IEnumerable<(string Id, bool InTree, StoredValue Entry)> ids = layer?.Root is not null
                ? MergeWithCheckpoint(sinceOpen, BTree.Range(layer.Root, fromInclusive, toExclusive, descending,
                    _pages!, expectedEntries), descending)
                : OutsideTree(sinceOpen);
            foreach ((string id, bool inTree, StoredValue entry) in ids)
            {
                if (Find(new DocumentKey(collection, id), snapshot, out _, inTree ? layer : null, entry)
                    is { IsDeleted: false } version)
                {
                    yield return (id, version);
                }
            }
        }
        finally
        {
            lease?.Dispose(); // or its finalizer, if the caller abandons the enumerator undisposed
        }
    }

    /// <summary>The collection's added-id list and its current tree layer, pinned (null when it has none), read in
    /// the order a range read needs (see <see cref="RangeIterator"/>): the list, then the layer, then the list again,
    /// starting over when a trim replaced it in between. The caller unpins the layer's checkpoint.</summary>
    private (AddedIds Added, TreeLayer? Layer) PinAddedIdsAndTree(SortedKeys keys, string collection)
    {
        while (true)
        {
            AddedIds addedIds = keys.Added;
            AfterAddedIdsTaken?.Invoke(collection);
            TreeLayer? layer = PinTree(keys);
            if (ReferenceEquals(addedIds, keys.Added))
            {
                return (addedIds, layer);
            }

            if (layer is not null)
            {
                PageStore.Unpin(layer.Checkpoint);
            }
        }
    }

    /// <summary>
    /// Pins the checkpoint of the collection's current tree layer for a range read, or returns null when it has
    /// none. The pin (an interlocked increment, a full fence) comes before the re-read of the layer, and the index
    /// releases its own pin of a checkpoint only after replacing every layer that names it, so a layer read again
    /// unchanged is one whose checkpoint was still pinned when this pin was added (the store-buffering litmus of
    /// <see cref="PageStore.Pin"/>).
    /// </summary>
    private static TreeLayer? PinTree(SortedKeys keys)
    {
        while (true)
        {
            TreeLayer? layer = keys.Tree;
            if (layer is null)
            {
                return null;
            }

            layer.Checkpoint.AddPin();
            if (ReferenceEquals(layer, keys.Tree))
            {
                return layer;
            }

            PageStore.Unpin(layer.Checkpoint);
        }
    }

    private static IEnumerable<(string Id, bool InTree, StoredValue Entry)> OutsideTree(IEnumerable<string> ids)
    {
        foreach (string id in ids)
        {
            yield return (id, false, default);
        }
    }

    /// <summary>
    /// Yields, in order, the ids at positions [replayedStart, replayedEnd) of the replayed ids and the ids in
    /// [<paramref name="fromInclusive"/>, <paramref name="toExclusive"/>) of those added since the open (two disjoint
    /// sorted sets, merged). Ids added after the caller's snapshot may or may not be walked (see
    /// <see cref="IdSkipList"/>); they have no version at it, so they are skipped either way.
    /// </summary>
    private static IEnumerable<string> MergeSinceOpen(string[] replayed, int replayedStart, int replayedEnd,
        IdSkipList added, string? fromInclusive, string? toExclusive, bool descending)
    {
        int r = 0;
        int replayedCount = Math.Max(0, replayedEnd - replayedStart);
        IdSkipList.Node? node = descending ? added.Last(toExclusive) : added.First(fromInclusive);
        while (true)
        {
            if (node is not null && !InRange(node.Id, fromInclusive, toExclusive))
            {
                node = null;
            }

            string? fromReplayed = r < replayedCount ? replayed[descending ? replayedEnd - 1 - r : replayedStart + r]
                : null;
            string? fromAdded = node?.Id;
            if (fromAdded is null && fromReplayed is null)
            {
                yield break;
            }

            if (fromReplayed is not null && fromAdded is not null
                && string.Equals(fromReplayed, fromAdded, StringComparison.Ordinal))
            {
                // An id in both: written again after an eviction while a reader still holds the replayed ids.
                r++;
                node = descending ? node!.Previous : node!.Next;
                yield return fromReplayed;
            }
            else if (fromAdded is null
                || (fromReplayed is not null && (string.CompareOrdinal(fromReplayed, fromAdded) < 0) != descending))
            {
                r++;
                yield return fromReplayed!;
            }
            else
            {
                node = descending ? node!.Previous : node!.Next;
                yield return fromAdded;
            }
        }
    }

    /// <summary>
    /// Merges the ids since the open with the checkpointed tree's ids (in the same order); an id in both (a
    /// checkpointed document replayed or rewritten since) comes once. An id the tree holds comes with its entry,
    /// which the read uses when it falls through to that tree.
    /// </summary>
    private static IEnumerable<(string Id, bool InTree, StoredValue Entry)> MergeWithCheckpoint(
        IEnumerable<string> sinceOpen, IEnumerable<KeyValuePair<string, StoredValue>> checkpointed, bool descending)
    {
        using IEnumerator<string> left = sinceOpen.GetEnumerator();
        using IEnumerator<KeyValuePair<string, StoredValue>> right = checkpointed.GetEnumerator();
        bool hasLeft = left.MoveNext();
        bool hasRight = right.MoveNext();
        while (hasLeft || hasRight)
        {
            if (!hasRight)
            {
                yield return (left.Current, false, default);
                hasLeft = left.MoveNext();
                continue;
            }

            if (!hasLeft)
            {
                yield return (right.Current.Key, true, right.Current.Value);
                hasRight = right.MoveNext();
                continue;
            }

            int comparison = string.CompareOrdinal(left.Current, right.Current.Key);
            if (comparison == 0)
            {
                yield return (left.Current, true, right.Current.Value);
                hasLeft = left.MoveNext();
                hasRight = right.MoveNext();
            }
            else if ((comparison < 0) != descending)
            {
                yield return (left.Current, false, default);
                hasLeft = left.MoveNext();
            }
            else
            {
                yield return (right.Current.Key, true, right.Current.Value);
                hasRight = right.MoveNext();
            }
        }
    }

    private static bool InRange(string id, string? fromInclusive, string? toExclusive) =>
        (fromInclusive is null || string.CompareOrdinal(id, fromInclusive) >= 0)
        && (toExclusive is null || string.CompareOrdinal(id, toExclusive) < 0);

    /// <summary>The position of the first id at or after <paramref name="key"/>.</summary>
    private static int LowerBound(string[] ids, string key)
    {
        int index = Array.BinarySearch(ids, key, StringComparer.Ordinal);
        return index >= 0 ? index : ~index;
    }

    /// <summary>
    /// A collection: the documents the open replayed (<see cref="Replayed"/>, set once at the end of the bulk load,
    /// before any reader), the newest version of each id written since (<see cref="Heads"/>), and the ids added since
    /// the open (<see cref="Added"/>, in ordinal order; disjoint from the replayed ids).
    /// </summary>
    internal sealed class SortedKeys(IdFilter? filter = null)
    {
        private static long s_lastCacheKey;

        private TreeLayer? _tree;
        private ReplayedDocuments? _replayed;
        private IdFilter? _filter = filter;

        /// <summary>The key that places the collection's documents in the <see cref="DocumentCache"/>: one per
        /// collection, never reused, the same for all its trees (an entry moves between them in place).</summary>
        public long CacheKey { get; } = Interlocked.Increment(ref s_lastCacheKey);

        /// <summary>The filter of the ids the collection's trees may hold, or null (acquire; set with a release by the
        /// checkpoint's thread when it builds one, and by the committer when it drops one: see
        /// <see cref="IdFilter"/>).</summary>
        public IdFilter? Filter
        {
            get => Volatile.Read(ref _filter);
            set => Volatile.Write(ref _filter, value);
        }

        private HeadTable _heads = new();

        /// <summary>The newest versions written since a checkpoint took them (acquire); replaced by an eviction, under
        /// the write lock (release).</summary>
        public HeadTable Heads
        {
            get => Volatile.Read(ref _heads);
            set => Volatile.Write(ref _heads, value);
        }

        /// <summary>The collection's tree in the newest checkpoint the index moved to, or null (acquire).</summary>
        public TreeLayer? Tree => Volatile.Read(ref _tree);

        /// <summary>The replayed documents until a checkpoint covers them (acquire; set to null with a release, after
        /// the layer that covers them is published).</summary>
        public ReplayedDocuments? Replayed
        {
            get => Volatile.Read(ref _replayed);
            set => Volatile.Write(ref _replayed, value);
        }

        /// <summary>Set to 1 by the checkpoint's thread when it queues the collection for
        /// <see cref="TrimAddedIds"/>, back to 0 by the committer once done.</summary>
        public int TrimQueued;

        private AddedIds _added = new();

        /// <summary>Ids a range read merges with the tree (acquire); the committer appends, and replaces the list
        /// (<see cref="ReplaceAdded"/>).</summary>
        public AddedIds Added => Volatile.Read(ref _added);

        /// <summary>The committer publishes a rebuilt list (release).</summary>
        public void ReplaceAdded(AddedIds fresh) => Volatile.Write(ref _added, fresh);

        /// <summary>Publishes a newer tree layer (release): the open, then the checkpoint's thread. A layer whose tree
        /// is the one the current layer has (a checkpoint that did not change the collection) keeps its
        /// <see cref="TreeLayer.CacheKey"/>, so the documents cached from that tree stay found.</summary>
        public void PublishTree(TreeLayer layer)
        {
            if (Volatile.Read(ref _tree) is { Root: { } root } current)
            {
                if (ReferenceEquals(root, layer.Root))
                {
                    if (current.CacheKey != layer.CacheKey)
                    {
                        layer = current.In(layer.Checkpoint);
                    }
                }
                else
                {
                    layer.Follow(current);
                }
            }

            Volatile.Write(ref _tree, layer);
        }
    }

    /// <summary>
    /// A head a checkpoint holds (its version is at or below the checkpoint's sequence): record
    /// <paramref name="Head"/> of <paramref name="Table"/> (found again by its id once an eviction replaced that
    /// table), evicted from its collection's heads once no open snapshot is older than it, if it is still the id's
    /// head then. The id and the sequence are read from the record (records never change but for their link to older
    /// versions), so a checkpoint of many ids keeps 24 bytes per id here.
    /// </summary>
    internal readonly record struct EvictionCandidate(SortedKeys Keys, HeadTable Table, int Head)
    {
        /// <summary>The checkpointed record.</summary>
        public ref readonly HeadRecord Record => ref Table.Record(Head);
    }

    /// <summary>A collection's tree (null: no document) in one checkpoint, which the index pins while the layer is
    /// current.</summary>
    internal sealed class TreeLayer(PageCheckpoint checkpoint, PageReference? root, long cacheKey = 0,
        int[]? changedHashes = null)
    {
        /// <summary>The mark of a tree whose rightmost leaf holds no id (its highest id is not known).</summary>
        private static readonly string s_unknown = new('?', 1);

        private static long s_lastCacheKey;

        // The tree's highest id, looked up on first use (null until then; s_unknown when not known). The tree never
        // changes, so threads that look it up at once find the same id, and either store is the answer
        // (a release store; readers acquire).
        private string? _highestId;

        public PageCheckpoint Checkpoint { get; } = checkpoint;

        public PageReference? Root { get; } = root;

        /// <summary>The key of the tree's documents in the <see cref="DocumentCache"/>: one per tree, never reused
        /// (a new layer of the same tree takes its key over, see <see cref="SortedKeys.PublishTree"/>).</summary>
        public long CacheKey { get; } = cacheKey != 0 ? cacheKey : Interlocked.Increment(ref s_lastCacheKey);

        /// <summary>The <see cref="CacheKey"/> of the tree this one was made from by one checkpoint, whose documents
        /// this tree holds at the same versions but for the ids of <see cref="_changedHashes"/>; 0 when there is none
        /// or those ids are not known. Set by <see cref="SortedKeys.PublishTree"/> before the layer is published
        /// (release), never after.</summary>
        public long PreviousCacheKey { get; private set; }

        // The sorted hashes of the ids whose documents the checkpoint put or deleted between the previous tree and
        // this one (null: not known, so nothing is shared).
        private readonly int[]? _changedHashes = changedHashes;

        /// <summary>Whether the previous tree's cached document of an id of <paramref name="hash"/> is this tree's
        /// too: the checkpoint between them changed no id of that hash (ids that share a hash with a changed one are
        /// read from this tree).</summary>
        public bool Shares(int hash) => PreviousCacheKey != 0 && Array.BinarySearch(_changedHashes!, hash) < 0;

        /// <summary>Makes <paramref name="previous"/>, the collection's current layer, the tree this one was made from
        /// (before this one is published), when the ids changed between them are known.</summary>
        public void Follow(TreeLayer previous)
        {
            if (_changedHashes is not null && Root is not null && previous.Root is not null)
            {
                PreviousCacheKey = previous.CacheKey;
            }
        }

        /// <summary>The same tree in <paramref name="checkpoint"/> (a checkpoint that did not change it): the same
        /// cache key, and the same tree before it.</summary>
        public TreeLayer In(PageCheckpoint checkpoint) =>
            new(checkpoint, Root, CacheKey, _changedHashes) { PreviousCacheKey = PreviousCacheKey };

        /// <summary>Whether <paramref name="id"/> sorts after every id of the tree, so the tree cannot hold it: what
        /// a write of a new id that grows (a sequence, a time, a generated id) spares the tree search for. False
        /// when that is not known.</summary>
        public bool IsAboveEveryId(string id, IPageReader reader)
        {
            string? highest = Volatile.Read(ref _highestId);
            if (highest is null)
            {
                try
                {
                    highest = BTree.HighestKey(Root, reader) ?? s_unknown;
                }
                catch (StoreCorruptedException)
                {
                    highest = s_unknown; // a damaged rightmost page fails the searches that reach it, not all
                }

                Volatile.Write(ref _highestId, highest);
            }

            return !ReferenceEquals(highest, s_unknown) && string.CompareOrdinal(id, highest) > 0;
        }
    }

    /// <summary>The state of a bulk load: a builder per collection.</summary>
    private sealed class BulkLoad(IReadOnlyDictionary<string, int> putsPerCollection)
    {
        // Arrays sized for every put of a journal of overwrites would be mostly empty: cap the hint (they grow past
        // it).
        private const int MaxInitialCapacity = 1 << 20;

        private string? _lastName;
        private ReplayedDocuments.Builder? _last;

        public Dictionary<string, ReplayedDocuments.Builder> Collections { get; } = new(StringComparer.Ordinal);

        /// <summary>The collection named <paramref name="name"/>, created in <paramref name="index"/> on first use (the
        /// last one is kept: batches mostly write one collection).</summary>
        public ReplayedDocuments.Builder CollectionOf(string name, VersionedIndex index)
        {
            if (!ReferenceEquals(name, _lastName))
            {
                if (!Collections.TryGetValue(name, out _last))
                {
                    int capacity = putsPerCollection.TryGetValue(name, out int puts)
                        ? Math.Min(puts, MaxInitialCapacity) : 0;
                    SortedKeys keys = index._collections.GetOrAdd(name, static _ => new SortedKeys());
                    Collections[name] = _last = new ReplayedDocuments.Builder(capacity,
                        keepTombstones: keys.Tree?.Root is not null);
                }

                _lastName = name;
            }

            return _last!;
        }
    }
}

/// <summary>
/// A registered read snapshot of the <see cref="VersionedIndex"/>, owned by one reader (a session); dispose it when the
/// reads are done. If its owner forgets to and drops it, its finalizer releases the registration, so a leaked session
/// does not hold old versions for the life of the process (the registry references only the
/// <see cref="SnapshotRegistry.Entry"/>, never this object, so the collector can find it unreachable).
/// <para>
/// An owner whose enumerations may outlive its use of the snapshot (a session's queries, across a save) counts them
/// with <see cref="BeginRead"/> and <see cref="EndRead"/> and lets go with <see cref="Release"/> instead of
/// <see cref="Dispose"/>. Readers and the release run on any threads: the owner writes <c>_released</c>, then reads
/// <c>_readers</c>; a reader decrements <c>_readers</c>, then reads <c>_released</c>. Both writes are interlocked (full
/// fences), so of a release and a last reader's end that race, at least one sees the other's write and closes the
/// snapshot (closing twice is harmless); none closes it while a reader that began before the release reads.
/// </para>
/// </summary>
internal sealed class IndexSnapshot : IDisposable
{
    private readonly SnapshotRegistry.Entry _entry;
    private int _readers; // enumerations between BeginRead and EndRead
    private int _released; // 1 once the owner released the snapshot

    internal IndexSnapshot(SnapshotRegistry.Entry entry) => _entry = entry;

    ~IndexSnapshot() => _entry.Close();

    /// <summary>The snapshot's sequence: it sees every commit at or below it.</summary>
    public long Sequence => _entry.Sequence;

    /// <summary>
    /// Throws <see cref="SnapshotExpiredException"/> when the committer expired the snapshot (it outlived
    /// <see cref="DocumentStoreOptions.MaxSnapshotAge"/>). Call after a read at <see cref="Sequence"/>, before using
    /// its result: a read that walked into a version pruned after the expiry is then refused (SnapshotRegistry's
    /// protocol).
    /// </summary>
    public void ThrowIfExpired()
    {
        if (_entry.IsExpired)
        {
            ThrowExpired();
        }
    }

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private void ThrowExpired() => throw (_entry.HeldTooMuch
        ? SnapshotExpiredException.HeldTooMuch(Sequence, _entry.HeldBytesLimit)
        : new SnapshotExpiredException(Sequence, _entry.MaxAge));

    public void Dispose()
    {
        _entry.Close();
        GC.SuppressFinalize(this);
    }

    /// <summary>An enumeration starts reading at this snapshot; it calls <see cref="EndRead"/> when it
    /// ends.</summary>
    public void BeginRead() => Interlocked.Increment(ref _readers);

    /// <summary>An enumeration that called <see cref="BeginRead"/> ended: the snapshot closes if it was released and
    /// this was its last reader.</summary>
    public void EndRead()
    {
        if (Interlocked.Decrement(ref _readers) == 0 && Volatile.Read(ref _released) != 0)
        {
            Dispose();
        }
    }

    /// <summary>The owner is done with the snapshot: it closes now, or when the last enumeration reading at it
    /// ends.</summary>
    public void Release()
    {
        Interlocked.Exchange(ref _released, 1);
        if (Volatile.Read(ref _readers) == 0)
        {
            Dispose();
        }
    }
}
