using System.Buffers;
using System.Buffers.Binary;
using System.Diagnostics;
using System.Runtime.InteropServices;
using Folio.Buffers;
using Folio.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Folio.Pages;

/// <summary>
/// The persistent page store: one copy-on-write B+tree per collection plus a catalog tree naming them, saved by
/// checkpoints into append-only chunks of one data file (the design of H2 MVStore; docs/formats/pages.md).
/// <para>
/// Protocol. One checkpoint at a time (the checkpoint lock): it applies changes to the trees in a new edit epoch
/// (unpublished nodes, changed in place), numbers the unsaved pages tree by tree, serializes the trees in parallel
/// into buffers of their own, writes the chunk (header, pages, table of contents, chunk table) at a free extent,
/// fsyncs, writes the header slot of its generation, fsyncs, and only then publishes the new
/// <see cref="PageCheckpoint"/> (an interlocked exchange). A failure before the header leaves the previous
/// checkpoint current and the store usable (the chunk's extent is free again); a failed header write is retried by
/// the next checkpoint in the same slot, so the other slot, the previous checkpoint, is never overwritten while it
/// is the newest durable one. Readers read any published checkpoint without locks; a reader that may go to disk pins
/// its checkpoint (<see cref="Pin"/>). A chunk no current root reaches (every page superseded) is freed for reuse
/// once no pinned checkpoint older than the one that dropped it remains, and no other process's
/// <see cref="ReaderPin"/> names it (<see cref="ReaderPins"/>: read at the open and by each checkpoint).
/// </para>
/// </summary>
internal sealed class PageStore : IDisposable
{
    /// <summary>The cache a store gets when its opener names none: 256 MiB.</summary>
    public const long DefaultCacheBytes = 256L * 1024 * 1024;

    /// <summary>The bytes of chunks a checkpoint lets be on their way to the disk before it writes more
    /// (<see cref="WriteDurably"/>): 4 MiB, about one chunk of the most pages a chunk holds.</summary>
    private const long WriteBackLimit = 4L * 1024 * 1024;

    /// <summary>A checkpoint's parallel phases use at most one thread per processor: more would only time-slice
    /// the same cores and share their caches.</summary>
    private static readonly ParallelOptions s_workers = new() { MaxDegreeOfParallelism = Environment.ProcessorCount };

    private readonly DataFile _file;
    private readonly PageCache _cache;
    private readonly ILogger _logger;
    private readonly Lock _checkpointLock = new();
    private long _unusedBytes; // UnusedBytes: written under _checkpointLock (release), read by any thread (acquire)
    private long _liveBytes; // LiveBytes: as _unusedBytes
    private readonly List<PageCheckpoint> _retired = [];
    private readonly List<(long Offset, long Extent)> _orphans = [];
    private readonly HashSet<uint> _unmovable = []; // chunks a nearly-emptied move met damage in (checkpoint lock)
    private bool _nearlyEmptiedFailed; // the last checkpoint failed in that move (checkpoint lock)
    private readonly ChunkSpace _space;
    private readonly IFileSystem? _fileSystem; // with the pins' folder: null when mounted for reads only
    private readonly string? _pinFolder;

    /// <summary>The folder where readers in other processes leave their pins (<see cref="ReaderPin"/>, and the
    /// change-feed followers' <see cref="Journal.FeedPin"/>); null when mounted for reads only.</summary>
    internal string? PinFolder => _pinFolder;
    private readonly List<(uint Id, long Offset, long Extent)> _heldForReaders;
    private PageCheckpoint _current;
    private PageReference? _catalogRoot;
    private long _generation;
    private uint _lastChunkId;
    private int _pagesPerChunk = ChunkFormat.MaxPagesPerChunk;
    private int _epoch;
    private bool _disposed;
    private CheckpointStatistics _last; // replaced by the checkpoint's thread (release), read by anyone (acquire)

    private PageStore(DataFile file, PageCache cache, ChunkSpace space, PageCheckpoint current,
        PageReference? catalogRoot, uint lastChunkId, ILogger logger, MountedPins? pins)
    {
        _file = file;
        _fileSystem = pins?.FileSystem;
        _pinFolder = pins?.Folder;
        _heldForReaders = pins?.Held ?? [];
        _cache = cache;
        _logger = logger;
        _space = space;
        _current = current;
        _catalogRoot = catalogRoot;
        _generation = current.Generation;
        _lastChunkId = lastChunkId;
        // Until this process checkpoints: the mounted checkpoint, as its chunk table describes it.
        _last = new CheckpointStatistics(current.Generation, current.Sequence, 0, 0, 0, TimeSpan.Zero,
            file.Chunks.Count, FillRate(file.Chunks.Values), 0, 0);
        PublishUnusedBytes();
    }

    /// <summary>The newest durable checkpoint (acquire).</summary>
    public PageCheckpoint Current => Volatile.Read(ref _current);

    /// <summary>Reads pages of this store's data file, through its buffer pool.</summary>
    public IPageReader Reader => _cache;

    /// <summary>The buffer pool page reads go through.</summary>
    public PageCache Cache => _cache;

    public string Path => _file.Path;

    /// <summary>The chunks of the data file, as its newest checkpoint's chunk table lists them (a reader's
    /// <see cref="ReaderPin"/>, tests and diagnostics).</summary>
    internal IEnumerable<ChunkInfo> Chunks => _file.Chunks.Values;

    /// <summary>The catalog tree's root, naming the collections' roots (tests, between checkpoints).</summary>
    internal PageReference? CatalogRootForTests => _catalogRoot;

    /// <summary>The most pages a chunk this store writes holds: <see cref="ChunkFormat.MaxPagesPerChunk"/>; tests set
    /// fewer, so small stores write checkpoints of several chunks (set before the first checkpoint).</summary>
    internal int PagesPerChunk
    {
        get => _pagesPerChunk;
        set => _pagesPerChunk = value is >= 1 and <= ChunkFormat.MaxPagesPerChunk ? value
            : throw new ArgumentOutOfRangeException(nameof(value));
    }

    /// <summary>The id of the store this data file belongs to, written into every checkpoint's header: the mounted
    /// header's (<see cref="Guid.Empty"/> when it has none) until the store sets its journal's, before the first
    /// checkpoint (the checkpoint thread starts after it, which orders the write before its reads).</summary>
    internal Guid StoreId { get; set; }

    /// <summary>The data file's length in bytes.</summary>
    public long FileLength => _file.Length;

    /// <summary>Chunks in the data file, live or waiting for their pins to go.</summary>
    public int ChunkCount => _file.Chunks.Count;

    /// <summary>What the last successful checkpoint did (before any: the mounted checkpoint, nothing written).
    /// Lock-free, so a metrics collector never waits for a checkpoint in progress.</summary>
    public CheckpointStatistics LastCheckpoint => Volatile.Read(ref _last);

    /// <summary>Chunks no current root reaches, kept while an older pinned checkpoint may read them.</summary>
    public int WaitingChunks
    {
        get
        {
            int waiting = 0;
            foreach (ChunkInfo chunk in _file.Chunks.Values)
            {
                waiting += chunk.DeadAt > 0 ? 1 : 0;
            }

            return waiting;
        }
    }

    /// <summary>Free bytes between the chunks (before the end of the used space).</summary>
    public long FreeBytes
    {
        get
        {
            lock (_checkpointLock)
            {
                return _space.FreeBytes;
            }
        }
    }

    /// <summary>Bytes of the data file no live chunk holds: the free extents between chunks, any tail past the used
    /// space, and the chunks no current root reaches that are kept for older readers, in this process or another
    /// (free to whoever mounts the file, as <see cref="OpenForReading"/> does, and freed here once their readers are
    /// gone). As of the last checkpoint or the mount; lock-free, so a caller never waits for a checkpoint in
    /// progress.</summary>
    public long UnusedBytes => Volatile.Read(ref _unusedBytes);

    /// <summary>Bytes of the data file live chunks hold, as of the last checkpoint or the mount (lock-free, published
    /// with <see cref="UnusedBytes"/>).</summary>
    public long LiveBytes => Volatile.Read(ref _liveBytes);

    /// <summary>Under the checkpoint lock (or in the constructor), after the file's chunks changed: publishes
    /// <see cref="UnusedBytes"/> (release).</summary>
    private void PublishUnusedBytes()
    {
        long length = FileLength;
        long unused = _space.FreeBytes + Math.Max(0, length - _space.End);
        foreach (ChunkInfo chunk in _file.Chunks.Values)
        {
            unused += chunk.DeadAt > 0 ? chunk.Extent : 0;
        }

        foreach ((_, _, long extent) in _heldForReaders)
        {
            unused += extent;
        }

        Volatile.Write(ref _unusedBytes, unused);
        Volatile.Write(ref _liveBytes, Math.Max(0, length - unused));
    }

    /// <summary>Where the data file's used space ends.</summary>
    public long UsedBytes
    {
        get
        {
            lock (_checkpointLock)
            {
                return _space.End;
            }
        }
    }

    /// <summary>Opens (or creates) the data file at <paramref name="path"/> and mounts its newest valid checkpoint:
    /// the catalog is read, the collection trees stay on disk until read, through a buffer pool of
    /// <paramref name="cacheBytes"/> (<see cref="DefaultCacheBytes"/> when null), with range prefetch unless
    /// <paramref name="prefetch"/> is false, reading around the operating system's page cache while the file is longer
    /// than <paramref name="directReadsAbove"/> bytes (<see cref="PageCache.NoteFileLength"/>).</summary>
    public static PageStore Open(IFileSystem fileSystem, string path, ILogger? logger = null, long? cacheBytes = null,
        BufferPoolOptions? poolOptions = null, bool prefetch = true, long directReadsAbove = long.MaxValue)
    {
        logger ??= NullLogger.Instance;
        bool existed = fileSystem.FileExists(path);
        IStorageFile storage = fileSystem.OpenFile(path, existed ? FileMode.Open : FileMode.CreateNew);
        if (!existed)
        {
            // The new file's name must survive a power cut before a checkpoint relies on it.
            fileSystem.SyncDirectory(System.IO.Path.GetDirectoryName(System.IO.Path.GetFullPath(path))!);
        }

        var file = new DataFile(storage);
        PageCache? cache = null;
        try
        {
            cache = new PageCache(file, cacheBytes ?? DefaultCacheBytes, poolOptions, prefetch, directReadsAbove);
            if (cache.NoteFileLength(file.Length))
            {
                PageStoreLog.ReadModeChanged(logger, path, file.Length, "around");
            }

            string pinFolder = ReaderPins.FolderOf(path);
            // Unreadable pins are no reason to refuse the open: a reader whose chunk is reused fails its page checks
            // (they cover the page's place and chunk id), so it fails (or starts over, before its first output),
            // never reads another page's bytes.
            var pins = new MountedPins(fileSystem, pinFolder, TryReadPins(fileSystem, pinFolder, logger) ?? []);
            PageStore store = Mount(file, cache, logger, pins, previous: false)!;
            PageStoreLog.Mounted(logger, path, store._generation, store.Current.Sequence, file.Chunks.Count,
                store.Current.Collections.Count);
            return store;
        }
        catch
        {
            file.Dispose();
            cache?.Dispose();
            throw;
        }
    }

    /// <summary>
    /// Mounts the newest valid checkpoint of the existing data file at <paramref name="path"/> for reads only, beside a
    /// process that may be writing it: no lock is taken and nothing is written (the file is opened read-only, so a
    /// checkpoint through this store fails). The writer frees and reuses the chunks of the mounted checkpoint only
    /// after it has made two newer checkpoints durable; a page read after that fails its checks (a
    /// <see cref="StoreCorruptedException"/>: the checksums cover each page's position and chunk id, never reused), and
    /// the caller mounts the file again. With <paramref name="previous"/>, mounts the checkpoint before the newest
    /// valid one instead (the other header slot's, which the newest checkpoint's chunks never overwrite: a salvage's
    /// way around a newest checkpoint whose chunk or catalog is damaged); null when the file holds no such
    /// checkpoint.
    /// </summary>
    public static PageStore? OpenForReading(IFileSystem fileSystem, string path, long cacheBytes, bool previous = false)
    {
        var file = new DataFile(fileSystem.OpenFileForReading(path));
        PageCache? cache = null;
        try
        {
            cache = new PageCache(file, cacheBytes, prefetch: false);
            PageStore? store = Mount(file, cache, NullLogger.Instance, pins: null, previous);
            if (store is null)
            {
                file.Dispose();
                cache.Dispose();
            }

            return store;
        }
        catch
        {
            file.Dispose();
            cache?.Dispose();
            throw;
        }
    }

    /// <summary>Pins the current checkpoint: its pages stay readable until <see cref="Unpin"/>.</summary>
    public PageCheckpoint Pin()
    {
        while (true)
        {
            PageCheckpoint checkpoint = Volatile.Read(ref _current);
            checkpoint.AddPin();
            // Interlocked increment, then this load: paired with the interlocked exchange that publishes a newer
            // checkpoint before the checkpoint's thread reads older checkpoints' pins.
            if (ReferenceEquals(checkpoint, Volatile.Read(ref _current)))
            {
                return checkpoint;
            }

            checkpoint.RemovePin();
        }
    }

    /// <summary>The chunks <paramref name="checkpoint"/>'s roots reach (its chunk's table, read from disk and
    /// checked), in the table's order; none for a store without a checkpoint. Pin the checkpoint first, so that none
    /// of them is freed and reused meanwhile.</summary>
    public List<ChunkInfo> ReadChunkTable(PageCheckpoint checkpoint)
    {
        var chunks = new List<ChunkInfo>();
        if (checkpoint.Header is not { } header)
        {
            return chunks;
        }

        (ChunkFormat.Header chunkHeader, byte[] metadata) =
            _file.ReadChunkMetadata(header.ChunkId, header.ChunkOffset, header.ChunkLength);
        ReadOnlySpan<byte> table = metadata.AsSpan(chunkHeader.PageCount * ChunkFormat.TocEntrySize);
        for (int i = 0; i < chunkHeader.TableEntries; i++)
        {
            chunks.Add(ChunkFormat.ReadTableEntry(
                table.Slice(i * ChunkFormat.TableEntrySize, ChunkFormat.TableEntrySize)));
        }

        return chunks;
    }

    /// <summary>Reads exactly <paramref name="destination"/>.Length bytes of the data file at
    /// <paramref name="offset"/> (a backup copying a pinned checkpoint's chunks); false when the file ends
    /// first.</summary>
    public bool ReadBytes(Span<byte> destination, long offset) => _file.TryReadExactly(destination, offset);

    /// <summary>Reads a chunk and every page in it from disk, bypassing the buffer pool, and checks them all;
    /// returns the pages checked. Throws <see cref="StoreCorruptedException"/> at the first failure.</summary>
    public int VerifyChunk(ChunkInfo chunk) => _file.VerifyChunk(chunk);

    /// <summary>Asks the kernel to start reading a range of the data file (a scrub, for the chunk after the one it
    /// checks).</summary>
    public void AdviseWillNeed(long offset, long length) => _file.AdviseWillNeed(offset, length);

    public static void Unpin(PageCheckpoint checkpoint)
    {
        if (checkpoint.RemovePin() < 0)
        {
            ThrowHelper.ThrowInvalidOperation("A page checkpoint was unpinned more often than pinned.");
        }
    }

    /// <summary>
    /// Writes a checkpoint covering every commit up to <paramref name="sequence"/>: applies <paramref name="changes"/>
    /// to the current trees, saves every changed page in one new chunk, makes it durable and current, and returns the
    /// new checkpoint. With <paramref name="parallel"/>, collections are changed and serialized in parallel. Throws
    /// (an <see cref="IOException"/>) when a write or fsync fails; the previous checkpoint then stays current.
    /// </summary>
    public PageCheckpoint Checkpoint(long sequence, IReadOnlyList<CollectionChanges> changes, bool parallel = true,
        CompactionRequest? compaction = null, CheckpointPass? pass = null)
    {
        lock (_checkpointLock)
        {
            ObjectDisposedException.ThrowIf(_disposed, this);
            PageCheckpoint current = _current;
            if (sequence < current.Sequence)
            {
                ThrowHelper.ThrowArgumentOutOfRange(nameof(sequence), sequence,
                    $"A checkpoint cannot go back before sequence {current.Sequence}.");
            }

            if (pass is not null && (sequence != current.Sequence || pass.Sequence <= sequence))
            {
                ThrowHelper.ThrowArgumentOutOfRange(nameof(pass), pass.Sequence,
                    $"A slice of a checkpoint pass is at the current sequence {current.Sequence}, its pass after it.");
            }

            long started = Stopwatch.GetTimestamp();
            int freed = ReclaimChunks();
            int epoch = ++_epoch;
            HashSet<uint> rewrite = compaction is { } request ? SelectSparseChunks(request) : [];
            var edits = new List<CollectionEdit>(changes.Count);
            var changed = new HashSet<string>(StringComparer.Ordinal);
            foreach (CollectionChanges collection in changes)
            {
                current.Collections.TryGetValue(collection.Name, out CollectionTree? tree);
                edits.Add(new CollectionEdit(collection, tree, new TreeEdit(epoch, _cache), rewrite));
                changed.Add(collection.Name);
            }

            if (rewrite.Count > 0)
            {
                AddUnchangedTrees(current, changed, edits, epoch, rewrite); // compaction reaches every tree
            }

            ForEachEdit(edits, parallel, static edit => edit.Apply());

            // Chunks the changes left nearly empty give up their last live pages too, so they die with this
            // checkpoint instead of waiting for compaction: changes spread over a tree leave a few untouched pages in
            // nearly every chunk of the tree they replace, and a checkpoint written in slices reuses the space of
            // the chunks an earlier slice emptied.
            HashSet<uint> emptied = SelectNearlyEmptied(edits, rewrite);
            _nearlyEmptiedFailed = false;
            if (emptied.Count > 0)
            {
                try
                {
                    RewriteNearlyEmptied(current, changed, edits, emptied, rewrite, epoch, parallel);
                }
                catch (Exception error) when (AsDamage(error) is { } damage)
                {
                    // A page these moves read is damaged: such chunks are left to compaction from now on, and the
                    // caller may retry the checkpoint without them (TakeNearlyEmptiedFailure).
                    _unmovable.UnionWith(emptied);
                    _nearlyEmptiedFailed = true;
                    System.Runtime.ExceptionServices.ExceptionDispatchInfo.Throw(damage);
                }

                emptied.UnionWith(rewrite);
            }
            else
            {
                emptied = rewrite;
            }

            long applied = Stopwatch.GetTimestamp();
            try
            {
                return Save(current, sequence, [.. edits], epoch, parallel, started, applied, freed, rewrite, emptied,
                    pass);
            }
            catch (Exception error) when (error is not ObjectDisposedException)
            {
                PageStoreLog.CheckpointFailed(_logger, error, sequence, current.Generation);
                throw;
            }
            finally
            {
                PublishUnusedBytes(); // chunks freed, written or truncated away, whether or not the checkpoint held
            }
        }
    }

    public void Dispose()
    {
        lock (_checkpointLock)
        {
            if (_disposed)
            {
                return;
            }

            _disposed = true;
            _cache.Dispose(); // first: it waits for the prefetch worker's read in progress
            _file.Dispose();
        }
    }

    /// <summary>Compaction's choice: the live chunks whose share of live pages is below the request's fill, sparsest
    /// first, until their live pages reach the request's bytes (at least one chunk).</summary>
    private HashSet<uint> SelectSparseChunks(CompactionRequest request)
    {
        if (request.MoveTail && SelectTailChunks(request.MaxBytes) is { Count: > 0 } tail)
        {
            return tail;
        }

        var candidates = new List<ChunkInfo>();
        foreach (ChunkInfo chunk in _file.Chunks.Values)
        {
            if (chunk.DeadAt == 0 && chunk.PageCount > 0 && chunk.Fill < request.FillBelow)
            {
                candidates.Add(chunk);
            }
        }

        candidates.Sort((a, b) => a.Fill.CompareTo(b.Fill));
        var chosen = new HashSet<uint>();
        long bytes = 0;
        long room = request.WithinFreeSpace ? _space.Usable * 4 / 5 : long.MaxValue;
        foreach (ChunkInfo chunk in candidates)
        {
            if ((chosen.Count > 0 && bytes >= request.MaxBytes) || bytes + chunk.LiveBytes > room)
            {
                break;
            }

            chosen.Add(chunk.Id);
            bytes += chunk.LiveBytes;
        }

        return chosen;
    }

    /// <summary>Moves the live pages of the nearly emptied chunks <paramref name="emptied"/> out of every tree (a tree
    /// the changes did not edit gets an edit of its own).</summary>
    private void RewriteNearlyEmptied(PageCheckpoint current, HashSet<string> changed, List<CollectionEdit> edits,
        HashSet<uint> emptied, HashSet<uint> rewrite, int epoch, bool parallel)
    {
        if (rewrite.Count == 0)
        {
            AddUnchangedTrees(current, changed, edits, epoch, rewrite); // else compaction added them already
        }

        ForEachEdit(edits, parallel, edit => edit.RewriteAlso(emptied));
    }

    /// <summary>Adds an edit without changes for every tree of <paramref name="current"/> the changes do not edit
    /// (<paramref name="changed"/>), so that moving the pages of chunks reaches it too.</summary>
    private void AddUnchangedTrees(PageCheckpoint current, HashSet<string> changed, List<CollectionEdit> edits,
        int epoch, HashSet<uint> rewrite)
    {
        foreach ((string name, CollectionTree tree) in current.Collections)
        {
            if (!changed.Contains(name))
            {
                edits.Add(new CollectionEdit(new CollectionChanges(name), tree, new TreeEdit(epoch, _cache), rewrite));
            }
        }
    }

    /// <summary>Runs <paramref name="work"/> on every edit: in parallel (one worker per processor) when asked and
    /// there are several, else one after another on this thread.</summary>
    private static void ForEachEdit(List<CollectionEdit> edits, bool parallel, Action<CollectionEdit> work)
    {
        if (parallel && edits.Count > 1)
        {
            Parallel.For(0, edits.Count, s_workers, i => work(edits[i]));
        }
        else
        {
            foreach (CollectionEdit edit in edits)
            {
                work(edit);
            }
        }
    }

    /// <summary>The damage <paramref name="error"/> reports, itself or as the one exception a parallel loop wrapped;
    /// null for any other error.</summary>
    private static StoreCorruptedException? AsDamage(Exception error) => error switch
    {
        StoreCorruptedException damage => damage,
        AggregateException { InnerExceptions: [StoreCorruptedException damage] } => damage,
        _ => null,
    };

    /// <summary>Whether the last checkpoint failed on a damaged page while it moved the pages of nearly emptied
    /// chunks (<see cref="SelectNearlyEmptied"/>), which later checkpoints leave alone: a retry can succeed. Reading it
    /// clears it. The checkpoint's thread.</summary>
    public bool TakeNearlyEmptiedFailure()
    {
        lock (_checkpointLock)
        {
            bool failed = _nearlyEmptiedFailed;
            _nearlyEmptiedFailed = false;
            return failed;
        }
    }

    /// <summary>
    /// An estimate of the bytes of the current checkpoint's leaves that <paramref name="changes"/> would supersede:
    /// the leaves that a sample of their ids falls in (found from the branches, no leaf read), extrapolated to all of
    /// them with the Chao1 estimator of distinct classes (ids that land in few leaves, as appends at a few places do,
    /// repeat those leaves in the sample and are estimated as few), a full page each, at most the tree's share of the
    /// live pages. The checkpoint's thread (<see cref="Documents.CheckpointSlicer"/>).
    /// </summary>
    public long EstimateSupersededBytes(CollectionChanges changes, int sampleSize)
    {
        PageCheckpoint current = Current;
        if (changes.Changes.Count == 0 || !current.Collections.TryGetValue(changes.Name, out CollectionTree? tree))
        {
            return 0;
        }

        long documents = 0;
        foreach (CollectionTree each in current.Collections.Values)
        {
            documents += each.Count;
        }

        long treeBytes = documents == 0 ? 0 : (long)(LiveBytes * ((double)tree.Count / documents));
        List<TreeChange> list = changes.Changes;
        int depth = BTree.LeafDepth(tree.Root, _cache);
        int step = Math.Max(1, list.Count / sampleSize);
        var seen = new Dictionary<ulong, int>();
        int sampled = 0;
        for (int i = 0; i < list.Count; i += step)
        {
            PagePosition leaf = BTree.LeafOf(tree.Root, list[i].Id, depth, _cache);
            seen[leaf.Value] = seen.GetValueOrDefault(leaf.Value) + 1;
            sampled++;
        }

        double once = 0;
        double twice = 0;
        foreach (int count in seen.Values)
        {
            once += count == 1 ? 1 : 0;
            twice += count == 2 ? 1 : 0;
        }

        double leaves = sampled >= list.Count ? seen.Count : seen.Count + (once * (once - 1) / (2 * (twice + 1)));
        return (long)Math.Min(treeBytes, leaves * PageFormat.TargetPageSize);
    }

    /// <summary>The share of a chunk's pages below which a checkpoint that supersedes some of them moves the rest
    /// (<see cref="SelectNearlyEmptied"/>).</summary>
    internal const double NearlyEmptyFill = 0.25;

    /// <summary>The live chunks that the applied <paramref name="edits"/> supersede pages of and leave with live pages
    /// under <see cref="NearlyEmptyFill"/> of their pages, other than those <paramref name="rewrite"/> moves
    /// already or a move found damaged, emptiest first while their live pages stay within a quarter of the pages
    /// superseded (at least 16).</summary>
    private HashSet<uint> SelectNearlyEmptied(List<CollectionEdit> edits, HashSet<uint> rewrite)
    {
        var superseded = new Dictionary<uint, int>();
        foreach (CollectionEdit edit in edits)
        {
            CountSuperseded(edit.TreeEdit.Superseded, superseded);
        }

        var candidates = new List<(uint Id, int Left)>();
        IReadOnlyDictionary<uint, ChunkInfo> chunks = _file.Chunks;
        int supersededPages = 0;
        foreach ((uint id, int count) in superseded)
        {
            supersededPages += count;
            if (chunks.TryGetValue(id, out ChunkInfo? chunk) && chunk.DeadAt == 0 && !rewrite.Contains(id)
                && !_unmovable.Contains(id)
                && chunk.LivePages - count is int left && left > 0 && left < chunk.PageCount * NearlyEmptyFill)
            {
                candidates.Add((id, left));
            }
        }

        // The emptiest first, moving at most a quarter of the pages the changes wrote, so the moves add little to
        // what the checkpoint holds in memory (its changes are sized to that memory).
        candidates.Sort((a, b) => a.Left.CompareTo(b.Left));
        var chosen = new HashSet<uint>();
        int budget = Math.Max(16, supersededPages / 4);
        foreach ((uint id, int left) in candidates)
        {
            if (left > budget)
            {
                break;
            }

            budget -= left;
            chosen.Add(id);
        }

        return chosen;
    }

    /// <summary>Compaction's tail move: the live chunks at the end of the file, last first, while their live pages
    /// (with room for the branches above them) fit in four fifths of the free extents, so this checkpoint's chunks
    /// land in those extents and the end of the file is free once they are; at most the request's bytes (at least
    /// one chunk), as for sparse chunks.</summary>
    private HashSet<uint> SelectTailChunks(long maxBytes)
    {
        var live = new List<ChunkInfo>();
        foreach (ChunkInfo chunk in _file.Chunks.Values)
        {
            if (chunk.DeadAt == 0 && chunk.PageCount > 0)
            {
                live.Add(chunk);
            }
        }

        live.Sort((a, b) => b.FileOffset.CompareTo(a.FileOffset));
        long room = _space.Usable * 4 / 5;
        var chosen = new HashSet<uint>();
        long bytes = 0;
        foreach (ChunkInfo chunk in live)
        {
            if ((chosen.Count > 0 && bytes >= maxBytes) || bytes + chunk.LiveBytes > room)
            {
                break;
            }

            chosen.Add(chunk.Id);
            bytes += chunk.LiveBytes;
        }

        return chosen;
    }

    private PageCheckpoint Save(PageCheckpoint current, long sequence, CollectionEdit[] edits, int epoch,
        bool parallel, long started, long applied, int freed, HashSet<uint> rewrite, HashSet<uint> moved,
        CheckpointPass? pass)
    {
        uint firstChunkId = _lastChunkId + 1;

        // Phase 1a (sequential): number each changed tree's unsaved pages, so page numbers are unique.
        var serializers = new List<(CollectionEdit Edit, TreeSerializer Serializer)>();
        uint pageBase = 0;
        foreach (CollectionEdit edit in edits)
        {
            int pages = TreeSerializer.CountUnsaved(edit.Root, out long bytes);
            if (pages > 0)
            {
                serializers.Add((edit, new TreeSerializer(firstChunkId, PagesPerChunk, pageBase,
                    (int)Math.Min(bytes, int.MaxValue))));
                pageBase = checked(pageBase + (uint)pages);
            }
        }

        TreeSerializer? catalogSerializer = null;
        try
        {
            // Phase 1b (parallel): each tree into its own buffer.
            if (parallel && serializers.Count > 1)
            {
                Parallel.For(0, serializers.Count, s_workers,
                    i => serializers[i].Serializer.Serialize(serializers[i].Edit.Root!));
            }
            else
            {
                foreach ((CollectionEdit edit, TreeSerializer serializer) in serializers)
                {
                    serializer.Serialize(edit.Root!);
                }
            }

            // Phase 2 (sequential): the catalog names every changed tree's root, now final.
            var catalogEdit = new TreeEdit(epoch, _cache);
            var collections = new Dictionary<string, CollectionTree>(current.Collections, StringComparer.Ordinal);
            PageReference? catalogRoot = _catalogRoot;
            var entries = new HashSet<string>(StringComparer.Ordinal); // catalog entries to write
            foreach (CollectionEdit edit in edits)
            {
                if (edit.Root is null)
                {
                    if (collections.Remove(edit.Name))
                    {
                        BTree.Remove(catalogEdit, ref catalogRoot, edit.Name);
                    }

                    continue;
                }

                collections.TryGetValue(edit.Name, out CollectionTree? before);
                if (before is not null && before.Root == edit.Root)
                {
                    continue;
                }

                collections[edit.Name] = new CollectionTree(edit.Name, edit.Root, edit.Count)
                {
                    AheadSequence = before?.AheadSequence ?? 0,
                    AheadBefore = before?.AheadBefore,
                };
                entries.Add(edit.Name);
            }

            bool settle = sequence > current.Sequence;
            MarkAhead(collections, entries, settle ? null : pass, settle, sequence);
            foreach (string name in entries)
            {
                byte[] entry = CatalogEntry.Encode(collections[name]);
                BTree.Put(catalogEdit, ref catalogRoot, name, new StoredValue(0, 0, entry));
            }

            // The pass a slice belongs to, kept until a checkpoint reaches its sequence (compaction keeps it).
            long passSequence = pass?.Sequence
                ?? (settle && current.PassSequence <= sequence ? 0 : current.PassSequence);
            if (passSequence != current.PassSequence)
            {
                if (passSequence == 0)
                {
                    BTree.Remove(catalogEdit, ref catalogRoot, CatalogEntry.PassName);
                }
                else
                {
                    BTree.Put(catalogEdit, ref catalogRoot, CatalogEntry.PassName,
                        new StoredValue(0, 0, CatalogEntry.EncodePass(passSequence)));
                }
            }

            int rewritten = BTree.RewriteChunks(catalogEdit, ref catalogRoot, moved);
            foreach (CollectionEdit edit in edits)
            {
                rewritten += edit.Rewritten;
            }

            int catalogPages = TreeSerializer.CountUnsaved(catalogRoot, out long catalogBytes);
            PagePosition catalogPosition = catalogRoot?.Position ?? default;
            if (catalogPages > 0)
            {
                catalogSerializer = new TreeSerializer(firstChunkId, PagesPerChunk, pageBase, (int)catalogBytes);
                catalogPosition = catalogSerializer.Serialize(catalogRoot!);
                pageBase = checked(pageBase + (uint)catalogPages);
            }

            // Pages this checkpoint supersedes leave their chunks' live counts once it is durable.
            var superseded = new Dictionary<uint, int>();
            foreach (CollectionEdit edit in edits)
            {
                CountSuperseded(edit.TreeEdit.Superseded, superseded);
            }

            CountSuperseded(catalogEdit.Superseded, superseded);

            // Phase 3 (sequential): cut the numbered pages into chunks of at most PagesPerChunk (each placed in
            // the first free extent it fits), the last of which holds the chunk table and is what the header names.
            int pageCount = (int)pageBase;
            IReadOnlyDictionary<uint, ChunkInfo> chunks = _file.Chunks;
            var table = new List<ChunkInfo>();
            foreach (ChunkInfo chunk in chunks.Values)
            {
                if (chunk.DeadAt == 0 && chunk.LivePages - superseded.GetValueOrDefault(chunk.Id) > 0)
                {
                    table.Add(chunk);
                }
            }

            var parts = new List<TreeSerializer>(serializers.Count + 1);
            foreach ((_, TreeSerializer serializer) in serializers)
            {
                parts.Add(serializer);
            }

            if (catalogSerializer is not null)
            {
                parts.Add(catalogSerializer);
            }

            long generation = _generation + 1;
            NewChunk[] written = PlanChunks(firstChunkId, pageCount, parts, table, superseded, sequence,
                catalogPosition, generation);
            NewChunk last = written[^1];
            long serialized = Stopwatch.GetTimestamp();
            _cache.WritePriority = true; // prefetch reads stop until the chunks and the header are durable
            try
            {
                WriteDurably(written, generation, sequence);
            }
            finally
            {
                _cache.WritePriority = false;
            }

            long wrote = Stopwatch.GetTimestamp();

            // Durable: publish.
            _generation = generation;
            var map = new Dictionary<uint, ChunkInfo>(chunks);
            long length = 0;
            foreach (NewChunk chunk in written)
            {
                chunk.Info.PublishToc(chunk.Toc);
                map[chunk.Info.Id] = chunk.Info;
                length += chunk.Info.Length;
            }

            uint chunkId = last.Info.Id;
            foreach ((uint id, int count) in superseded)
            {
                map[id].LivePages -= count;
            }

            // A chunk with no live page is dead from this generation on, this checkpoint's own excepted (its header
            // names it even when it holds no page: it dies at the next checkpoint).
            foreach (ChunkInfo chunk in map.Values)
            {
                if (chunk.LivePages <= 0 && chunk.DeadAt == 0 && chunk.Id != chunkId)
                {
                    chunk.DeadAt = generation;
                }
            }

            foreach ((long orphanOffset, long orphanExtent) in _orphans)
            {
                _space.Free(orphanOffset, orphanExtent);
            }

            _orphans.Clear();
            _file.PublishChunks(map);
            if (_cache.NoteFileLength(_file.Length))
            {
                PageStoreLog.ReadModeChanged(_logger, _file.Path, _file.Length,
                    _cache.ReadsDirect ? "around" : "through");
            }

            _catalogRoot = catalogRoot;
            var checkpoint = new PageCheckpoint(generation, sequence, collections)
            {
                Header = new DataFileHeader(generation, chunkId, last.Info.FileOffset, last.Info.Length, sequence,
                    StoreId),
                PassSequence = passSequence,
            };
            PageCheckpoint previous = Interlocked.Exchange(ref _current, checkpoint);
            _retired.Add(previous);

            // The saved trees leave memory but for their resident branches: reads go through the buffer pool.
            foreach (CollectionEdit edit in edits)
            {
                BTree.ReleaseSaved(edit.Root);
            }

            BTree.ReleaseSaved(catalogRoot);
            int supersededPages = 0;
            foreach (int count in superseded.Values)
            {
                supersededPages += count;
            }

            TruncateFreeTail();
            long ended = Stopwatch.GetTimestamp();
            var phases = new CheckpointPhases(Stopwatch.GetElapsedTime(started, applied),
                Stopwatch.GetElapsedTime(applied, serialized), Stopwatch.GetElapsedTime(serialized, wrote),
                Stopwatch.GetElapsedTime(wrote, ended));
            var statistics = new CheckpointStatistics(generation, sequence, chunkId, pageCount, length,
                Stopwatch.GetElapsedTime(started, ended), map.Count, FillRate(map.Values), freed, supersededPages,
                rewrite.Count, rewritten, phases);
            Volatile.Write(ref _last, statistics);
            PageStoreLog.Checkpointed(_logger, generation, sequence, chunkId, pageCount, length,
                statistics.Elapsed.TotalMilliseconds, phases.Apply.TotalMilliseconds,
                phases.Serialize.TotalMilliseconds, phases.Write.TotalMilliseconds, map.Count, statistics.FillRate,
                freed);
            return checkpoint;
        }
        finally
        {
            // The chunk ids this checkpoint numbered pages in are never handed out again, whether or not it landed.
            int numbered = ChunkFormat.ChunksFor((int)pageBase, PagesPerChunk);
            _lastChunkId = Math.Max(_lastChunkId, firstChunkId + (uint)numbered - 1);
            foreach ((_, TreeSerializer serializer) in serializers)
            {
                serializer.Dispose();
            }

            catalogSerializer?.Dispose();
        }
    }

    /// <summary>
    /// The trees' ahead marks (<see cref="CollectionTree.AheadSequence"/>) for a new checkpoint, adding the collections
    /// whose mark changed to <paramref name="entries"/>: a checkpoint past the current sequence
    /// (<paramref name="settle"/>) holds every commit up to <paramref name="sequence"/>, so no tree is ahead to a
    /// sequence at or below it (a mark beyond it stays: see <see cref="CollectionTree"/>); a slice of
    /// <paramref name="pass"/> marks the ids its pass has covered so far; any other checkpoint at the current sequence
    /// (compaction) keeps the marks it found.
    /// </summary>
    private static void MarkAhead(Dictionary<string, CollectionTree> collections, HashSet<string> entries,
        CheckpointPass? pass, bool settle, long sequence)
    {
        var marked = new List<CollectionTree>();
        foreach (CollectionTree tree in collections.Values)
        {
            if (settle)
            {
                if (tree.AheadSequence != 0 && tree.AheadSequence <= sequence)
                {
                    marked.Add(tree.Settled());
                }
            }
            else if (pass is not null && pass.Ahead.TryGetValue(tree.Name, out string? before))
            {
                CollectionTree ahead = tree with { AheadSequence = pass.Sequence, AheadBefore = before };
                if (ahead != tree)
                {
                    marked.Add(ahead);
                }
            }
        }

        foreach (CollectionTree tree in marked)
        {
            collections[tree.Name] = tree;
            entries.Add(tree.Name);
        }
    }

    /// <summary>Live pages over all pages of the live chunks; 1 when there are none.</summary>
    private static double FillRate(IEnumerable<ChunkInfo> chunks)
    {
        long live = 0;
        long total = 0;
        foreach (ChunkInfo chunk in chunks)
        {
            if (chunk.DeadAt == 0)
            {
                live += chunk.LivePages;
                total += chunk.PageCount;
            }
        }

        return total == 0 ? 1 : (double)live / total;
    }

    private bool ReachedByPinned(ChunkInfo chunk)
    {
        foreach (PageCheckpoint checkpoint in _retired)
        {
            if (chunk.BornAt <= checkpoint.Generation && checkpoint.Generation < chunk.DeadAt)
            {
                return true;
            }
        }

        return false;
    }

    /// <summary>
    /// Cuts a checkpoint's <paramref name="pageCount"/> numbered pages (in <paramref name="parts"/>, in numbering
    /// order) into chunks of at most <see cref="PagesPerChunk"/> pages, the numbering
    /// <see cref="ChunkFormat.PositionOf"/> gave them, and places each in the first free extent it fits. The last chunk
    /// (the only one when there are no pages) names the catalog root and holds the chunk table: every live chunk of
    /// <paramref name="table"/> with its live pages less <paramref name="superseded"/>, then the new chunks.
    /// </summary>
    private NewChunk[] PlanChunks(uint firstChunkId, int pageCount, List<TreeSerializer> parts, List<ChunkInfo> table,
        Dictionary<uint, int> superseded, long sequence, PagePosition catalogRoot, long generation)
    {
        var pages = new (TreeSerializer Part, long Entry, int Index)[pageCount];
        int numbered = 0;
        foreach (TreeSerializer part in parts)
        {
            for (int index = 0; index < part.Toc.Count; index++)
            {
                pages[numbered++] = (part, part.Toc[index], index);
            }
        }

        int chunkCount = ChunkFormat.ChunksFor(pageCount, PagesPerChunk);
        var lengths = new long[chunkCount];
        for (int j = 0; j < chunkCount; j++)
        {
            (int first, int count) = ChunkFormat.PagesOf(j, pageCount, PagesPerChunk);
            long pageBytes = 0;
            for (int i = first; i < first + count; i++)
            {
                pageBytes += pages[i].Entry & 0xFFFF_FFFF;
            }

            long tocOffset = ChunkFormat.HeaderSize + pageBytes;
            if (tocOffset > uint.MaxValue)
            {
                ThrowHelper.ThrowInvalidOperation(
                    $"A chunk of {tocOffset} bytes exceeds the chunk limit of 4 GiB; use smaller documents.");
            }

            int tableEntries = j == chunkCount - 1 ? table.Count + chunkCount : 0;
            lengths[j] = tocOffset + (count * (long)ChunkFormat.TocEntrySize)
                + (tableEntries * (long)ChunkFormat.TableEntrySize);
        }

        var infos = new ChunkInfo[chunkCount];
        for (int j = 0; j < chunkCount; j++)
        {
            long offset = _space.Allocate(ChunkFormat.Align(lengths[j]));
            (_, int count) = ChunkFormat.PagesOf(j, pageCount, PagesPerChunk);
            infos[j] = new ChunkInfo(firstChunkId + (uint)j, offset, lengths[j], count, count) { BornAt = generation };
        }

        var planned = new NewChunk[chunkCount];
        for (int j = 0; j < chunkCount; j++)
        {
            (int first, int count) = ChunkFormat.PagesOf(j, pageCount, PagesPerChunk);
            bool isLast = j == chunkCount - 1;
            int tableEntries = isLast ? table.Count + chunkCount : 0;
            byte[] metadata = new byte[(count * (long)ChunkFormat.TocEntrySize)
                + (tableEntries * (long)ChunkFormat.TableEntrySize)];
            long[] toc = new long[count];
            var runs = new List<ChunkRun>();
            long at = ChunkFormat.HeaderSize;
            for (int i = 0; i < count; i++)
            {
                (TreeSerializer part, long entry, int index) = pages[first + i];
                int inPart = (int)(entry >>> 32);
                int length = (int)(entry & 0xFFFF_FFFF);
                toc[i] = (at << 32) | (uint)length;
                BinaryPrimitives.WriteUInt32LittleEndian(metadata.AsSpan(i * ChunkFormat.TocEntrySize), (uint)at);
                BinaryPrimitives.WriteUInt32LittleEndian(metadata.AsSpan((i * ChunkFormat.TocEntrySize) + 4),
                    (uint)length);
                at += length;
                ReadOnlyMemory<byte> body = part.BodyOf(index);
                int inBuffer = length - body.Length;
                if (inBuffer > 0) // none for an encoded leaf: it lies wholly outside the buffer
                {
                    ChunkRun.Append(runs, new ChunkRun(part, inPart, inBuffer, default));
                }

                if (!body.IsEmpty)
                {
                    // An overflow page's value or an encoded leaf, where it lies (leaves encoded one after another lie
                    // back to back, so their bodies join into one run).
                    ChunkRun.Append(runs, new ChunkRun(null, 0, body.Length, body));
                }
            }

            if (isLast)
            {
                int tableAt = count * ChunkFormat.TocEntrySize;
                foreach (ChunkInfo chunk in table)
                {
                    var copy = new ChunkInfo(chunk.Id, chunk.FileOffset, chunk.Length, chunk.PageCount,
                        chunk.LivePages - superseded.GetValueOrDefault(chunk.Id));
                    ChunkFormat.WriteTableEntry(metadata.AsSpan(tableAt), copy);
                    tableAt += ChunkFormat.TableEntrySize;
                }

                foreach (ChunkInfo chunk in infos)
                {
                    ChunkFormat.WriteTableEntry(metadata.AsSpan(tableAt), chunk);
                    tableAt += ChunkFormat.TableEntrySize;
                }
            }

            byte[] header = new byte[ChunkFormat.HeaderSize];
            ChunkFormat.WriteHeader(header, infos[j].Id, sequence, count, tableEntries, infos[j].Length,
                isLast ? catalogRoot : default, at);
            ChunkFormat.Seal(header, metadata);
            planned[j] = new NewChunk(infos[j], toc, header, metadata, runs);
        }

        return planned;
    }

    /// <summary>
    /// Writes the chunks and fsyncs, then the header slot of <paramref name="generation"/> naming the last one, and
    /// fsyncs again (the checkpoint's thread, under the checkpoint lock). The chunks' bytes go to the disk as they are
    /// written, at most <see cref="WriteBackLimit"/> of them on their way at a time (the write of the next chunk
    /// waits for the oldest): a checkpoint writes tens of megabytes, and left to the fsync they would reach the disk
    /// in one burst that the journal's fsyncs, on the same disk, wait behind for tens of milliseconds, stalling every
    /// commit (docs/measurements.md, "Sixteenth round"). The fsync still makes them durable; a write-back that fails
    /// fails the checkpoint, as a failed write does.
    /// </summary>
    private void WriteDurably(NewChunk[] chunks, long generation, long sequence)
    {
        try
        {
            var window = new WriteBackWindow(_file.WriteBack, WriteBackLimit);
            foreach (NewChunk chunk in chunks)
            {
                window.MakeRoom(chunk.Info.Length);
                WriteChunk(chunk);
                window.Start(chunk.Info.FileOffset, chunk.Info.Length);
            }

            _file.Sync();
        }
        catch
        {
            foreach (NewChunk chunk in chunks)
            {
                _space.Free(chunk.Info.FileOffset, chunk.Info.Extent);
            }

            // No header names these chunks, so the file's tail they took goes back to the file system: on a full disk
            // the journal can only rotate into space a failed checkpoint does not keep.
            TruncateFreeTail();
            throw;
        }

        try
        {
            ChunkInfo last = chunks[^1].Info;
            byte[] slot = new byte[DataFileHeader.SlotSize];
            new DataFileHeader(generation, last.Id, last.FileOffset, last.Length, sequence, StoreId).Write(slot);
            _file.Write(slot, DataFileHeader.SlotOffset(generation));
            _file.Sync();
        }
        catch
        {
            // The slot may hold anything now; the next checkpoint writes the same generation into it again. The
            // chunks may be what that slot names on disk, so their extents stay taken until a later header lands.
            foreach (NewChunk chunk in chunks)
            {
                _orphans.Add((chunk.Info.FileOffset, chunk.Info.Extent));
            }

            throw;
        }
    }

    /// <summary>Writes one chunk: up to 64 KiB gathered into one write, a larger one as consecutive writes of its
    /// header, its runs of pages (straight from the serializers' buffers) and its metadata, in file order. None is
    /// durable before the sync that follows, so the number of writes changes nothing a crash can leave; gathering
    /// a large chunk would copy every byte once more for a few system calls fewer.</summary>
    private void WriteChunk(NewChunk chunk)
    {
        const int OneWriteLimit = 64 * 1024;
        long offset = chunk.Info.FileOffset;
        if (chunk.Info.Length <= OneWriteLimit)
        {
            byte[] buffer = ArrayPool<byte>.Shared.Rent((int)chunk.Info.Length);
            try
            {
                chunk.Header.CopyTo(buffer, 0);
                int at = ChunkFormat.HeaderSize;
                foreach (ChunkRun run in chunk.Runs)
                {
                    run.Span.CopyTo(buffer.AsSpan(at));
                    at += run.Length;
                }

                chunk.Metadata.CopyTo(buffer, at);
                _file.Write(buffer.AsSpan(0, (int)chunk.Info.Length), offset);
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }

            return;
        }

        _file.Write(chunk.Header, offset);
        long position = offset + ChunkFormat.HeaderSize;
        foreach (ChunkRun run in chunk.Runs)
        {
            _file.Write(run.Span, position);
            position += run.Length;
        }

        _file.Write(chunk.Metadata, position);
    }

    /// <summary>One chunk a checkpoint writes: its place and size, its table of contents (published once it is
    /// durable), its header and metadata, and the runs of serialized pages it holds, in order.</summary>
    private sealed record NewChunk(ChunkInfo Info, long[] Toc, byte[] Header, byte[] Metadata, List<ChunkRun> Runs);

    /// <summary>Bytes a chunk holds, in order: a run of a tree serializer's buffer (<paramref name="Part"/>), or an
    /// overflow page's value where it lies in memory (<paramref name="Body"/>, when <paramref name="Part"/> is
    /// null).</summary>
    private readonly record struct ChunkRun(TreeSerializer? Part, int Offset, int Length, ReadOnlyMemory<byte> Body)
    {
        public ReadOnlySpan<byte> Span => Part is null ? Body.Span : Part.Bytes.Slice(Offset, Length);

        /// <summary>Adds <paramref name="run"/> to <paramref name="runs"/>, joined to the last run when its bytes
        /// follow that run's: the next bytes of the same serializer's buffer, or of the same array.</summary>
        public static void Append(List<ChunkRun> runs, ChunkRun run)
        {
            if (runs.Count > 0 && runs[^1].JoinedWith(run) is { } joined)
            {
                runs[^1] = joined;
            }
            else
            {
                runs.Add(run);
            }
        }

        /// <summary>This run grown by <paramref name="next"/> when its bytes follow this run's; else null.</summary>
        private ChunkRun? JoinedWith(ChunkRun next)
        {
            if (Part is not null)
            {
                return ReferenceEquals(Part, next.Part) && Offset + Length == next.Offset
                    ? this with { Length = Length + next.Length }
                    : null;
            }

            return next.Part is null
                && MemoryMarshal.TryGetArray(Body, out ArraySegment<byte> before)
                && MemoryMarshal.TryGetArray(next.Body, out ArraySegment<byte> after)
                && ReferenceEquals(before.Array, after.Array)
                && before.Offset + before.Count == after.Offset
                ? this with
                {
                    Length = Length + next.Length,
                    Body = before.Array.AsMemory(before.Offset, before.Count + next.Length),
                }
                : null;
        }
    }

    /// <summary>Gives the file's free tail back to the file system once the checkpoint is durable, or once its chunks
    /// failed to write: neither it nor the previous checkpoint (the fallback if the next header tears) reaches a chunk
    /// there, and no pinned reader does (a freed chunk is one none of them reaches). A failure is left for the next
    /// checkpoint.</summary>
    private void TruncateFreeTail()
    {
        long end = _space.End;
        if (_file.Length <= end)
        {
            return;
        }

        try
        {
            _file.Truncate(end);
        }
        catch (IOException error)
        {
            PageStoreLog.TruncateFailed(_logger, error, _file.Path, end);
        }
    }

    private static void CountSuperseded(List<PagePosition> positions, Dictionary<uint, int> counts)
    {
        foreach (PagePosition position in positions)
        {
            counts[position.ChunkId] = counts.GetValueOrDefault(position.ChunkId) + 1;
        }
    }

    /// <summary>Frees the chunks no current root reaches once no checkpoint that could reach them is pinned: a
    /// checkpoint of generation g reaches only chunks written at or before g and dead after it.</summary>
    private int ReclaimChunks()
    {
        _retired.RemoveAll(static checkpoint => checkpoint.Pins <= 0);
        Dictionary<uint, (long Offset, long Extent)>? readers = ReadReaderPins();
        if (readers is null)
        {
            return 0; // the pins could not be read: free nothing this time
        }

        for (int i = _heldForReaders.Count - 1; i >= 0; i--)
        {
            (uint id, long offset, long extent) = _heldForReaders[i];
            if (!readers.ContainsKey(id))
            {
                _heldForReaders.RemoveAt(i);
                _space.Free(offset, extent);
            }
        }

        Dictionary<uint, ChunkInfo>? map = null;
        int freed = 0;
        int kept = _heldForReaders.Count;
        long keptBytes = 0;
        foreach ((_, _, long extent) in _heldForReaders)
        {
            keptBytes += extent;
        }

        foreach (ChunkInfo chunk in _file.Chunks.Values)
        {
            if (chunk.DeadAt == 0 || ReachedByPinned(chunk))
            {
                continue;
            }

            if (readers.ContainsKey(chunk.Id))
            {
                kept++;
                keptBytes += chunk.Extent;
                continue;
            }

            freed++;
            map ??= new Dictionary<uint, ChunkInfo>(_file.Chunks);
            map.Remove(chunk.Id);
            _space.Free(chunk.FileOffset, chunk.Extent);
        }

        if (map is not null)
        {
            _file.PublishChunks(map);
        }

        if (kept > 0)
        {
            // An export or backup of the files that runs long keeps the data file from reusing this space.
            PageStoreLog.KeptForReaders(_logger, kept, keptBytes, _pinFolder!);
        }

        return freed;
    }

    /// <summary>The chunks other processes pin (<see cref="ReaderPins"/>); empty for a store mounted for reads, null
    /// when the pins' folder cannot be read.</summary>
    private Dictionary<uint, (long Offset, long Extent)>? ReadReaderPins() =>
        _fileSystem is null || _pinFolder is null ? [] : TryReadPins(_fileSystem, _pinFolder, _logger);

    /// <summary>The live pins of <paramref name="folder"/>, or null (logged) when they cannot be read.</summary>
    private static Dictionary<uint, (long Offset, long Extent)>? TryReadPins(IFileSystem fileSystem, string folder,
        ILogger logger)
    {
        try
        {
            return ReaderPins.ReadLive(fileSystem, folder);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            PageStoreLog.ReaderPinsUnreadable(logger, e, folder);
            return null;
        }
    }

    /// <summary>Mounts the newest valid checkpoint, or with <paramref name="previous"/> the valid one before it (null
    /// when there is none).</summary>
    private static PageStore? Mount(DataFile file, PageCache cache, ILogger logger, MountedPins? pins, bool previous)
    {
        DataFileHeader? newest = null;
        long newestSlot = 0;
        DataFileHeader? older = null;
        long olderSlot = 0;
        byte[] slot = new byte[DataFileHeader.SlotSize];
        for (int i = 0; i < DataFileHeader.SlotCount; i++)
        {
            long slotOffset = i * (long)DataFileHeader.SlotSize;
            if (file.TryReadExactly(slot, slotOffset)
                && DataFileHeader.TryRead(slot, file.Path, slotOffset) is { } header)
            {
                if (newest is null || header.Generation > newest.Value.Generation)
                {
                    (older, olderSlot) = (newest, newestSlot);
                    (newest, newestSlot) = (header, slotOffset);
                }
                else
                {
                    (older, olderSlot) = (header, slotOffset);
                }
            }
        }

        if (previous)
        {
            if (older is null)
            {
                return null;
            }

            (newest, newestSlot) = (older, olderSlot);
        }

        if (newest is not { } current)
        {
            // No checkpoint became durable: whatever chunk bytes the file holds were never made current.
            return new PageStore(file, cache, new ChunkSpace(DataFileHeader.DataStart), PageCheckpoint.Empty, null, 0,
                logger, pins);
        }

        if (current.ChunkOffset < DataFileHeader.DataStart || current.ChunkOffset + current.ChunkLength > file.Length)
        {
            ThrowHelper.ThrowStoreCorrupted(file.Path, newestSlot,
                $"the header of checkpoint {current.Generation} names chunk {current.ChunkId} at "
                + $"{current.ChunkOffset} ({current.ChunkLength} bytes), past the end of the file "
                + $"({file.Length} bytes)");
        }

        (ChunkFormat.Header chunkHeader, byte[] metadata) =
            file.ReadChunkMetadata(current.ChunkId, current.ChunkOffset, current.ChunkLength);
        if (chunkHeader.Sequence != current.CheckpointSequence)
        {
            ThrowHelper.ThrowStoreCorrupted(file.Path, current.ChunkOffset,
                $"chunk {current.ChunkId} covers sequence {chunkHeader.Sequence}, its header says "
                + $"{current.CheckpointSequence}");
        }

        var chunks = new Dictionary<uint, ChunkInfo>();
        var used = new List<(long Offset, long Extent)>();
        ReadOnlySpan<byte> table = metadata.AsSpan(chunkHeader.PageCount * ChunkFormat.TocEntrySize);
        uint lastChunkId = 0;
        for (int i = 0; i < chunkHeader.TableEntries; i++)
        {
            ChunkInfo chunk = ChunkFormat.ReadTableEntry(
                table.Slice(i * ChunkFormat.TableEntrySize, ChunkFormat.TableEntrySize));
            if (chunk.Id == 0 || chunk.FileOffset < DataFileHeader.DataStart
                || chunk.FileOffset + chunk.Length > file.Length || !chunks.TryAdd(chunk.Id, chunk))
            {
                ThrowHelper.ThrowStoreCorrupted(file.Path, current.ChunkOffset,
                    $"chunk {current.ChunkId}'s chunk table names chunk {chunk.Id} at {chunk.FileOffset} "
                    + $"({chunk.Length} bytes): outside the file ({file.Length} bytes) or twice");
            }

            used.Add((chunk.FileOffset, chunk.Extent));
            lastChunkId = Math.Max(lastChunkId, chunk.Id);
        }

        if (!chunks.TryGetValue(current.ChunkId, out ChunkInfo? newestChunk))
        {
            ThrowHelper.ThrowStoreCorrupted(file.Path, current.ChunkOffset,
                $"chunk {current.ChunkId} does not list itself in its chunk table");
        }

        newestChunk.PublishToc(ChunkInfo.DecodeToc(metadata, chunkHeader.PageCount));
        file.PublishChunks(chunks);
        pins?.HoldPinnedChunks(chunks, used, file.Length);

        // The catalog: every collection's root and count (the trees themselves stay on disk until read).
        var collections = new Dictionary<string, CollectionTree>(StringComparer.Ordinal);
        PageReference? catalogRoot =
            chunkHeader.CatalogRoot.IsSaved ? new PageReference(chunkHeader.CatalogRoot) : null;
        long passSequence = 0;
        foreach (KeyValuePair<string, StoredValue> entry in BTree.Range(catalogRoot, null, null, false, cache))
        {
            if (entry.Key == CatalogEntry.PassName)
            {
                passSequence = CatalogEntry.DecodePass(entry.Value.Inline.Span);
                if (passSequence <= current.CheckpointSequence)
                {
                    ThrowHelper.ThrowStoreCorrupted(file.Path, current.ChunkOffset,
                        "the catalog's pass entry is damaged");
                }

                continue;
            }

            if (CatalogEntry.Decode(entry.Key, entry.Value.Inline.Span) is not { } tree)
            {
                ThrowHelper.ThrowStoreCorrupted(file.Path, current.ChunkOffset,
                    $"the catalog entry of collection '{entry.Key}' is damaged");
                return null!;
            }

            collections[entry.Key] = tree;
        }

        var checkpoint = new PageCheckpoint(current.Generation, current.CheckpointSequence, collections)
        {
            Header = current,
            PassSequence = passSequence,
        };
        return new PageStore(file, cache, ChunkSpace.FromUsed(used), checkpoint, catalogRoot, lastChunkId, logger,
            pins) { StoreId = current.StoreId };
    }

    /// <summary>What a writable open knows of other processes' <see cref="ReaderPin"/>s: the chunks they pin, and
    /// those of them the mounted checkpoint no longer lists, kept out of the free space (<see cref="Held"/>).</summary>
    private sealed class MountedPins(IFileSystem fileSystem, string folder,
        Dictionary<uint, (long Offset, long Extent)> pinned)
    {
        public IFileSystem FileSystem => fileSystem;

        public string Folder => folder;

        public List<(uint Id, long Offset, long Extent)> Held { get; } = [];

        /// <summary>Adds each pinned chunk the chunk table does not list to <paramref name="used"/> and to
        /// <see cref="Held"/>, unless it overlaps what is already used or lies past the file's end (then it is not
        /// the chunk its reader pinned, which a writer that ignored the pin reused).</summary>
        public void HoldPinnedChunks(Dictionary<uint, ChunkInfo> chunks, List<(long Offset, long Extent)> used,
            long fileLength)
        {
            foreach ((uint id, (long offset, long extent)) in pinned)
            {
                if (chunks.ContainsKey(id) || offset < DataFileHeader.DataStart || extent <= 0
                    || offset + extent > ChunkFormat.Align(fileLength) || Overlaps(used, offset, extent))
                {
                    continue;
                }

                used.Add((offset, extent));
                Held.Add((id, offset, extent));
            }
        }

        private static bool Overlaps(List<(long Offset, long Extent)> used, long offset, long extent)
        {
            foreach ((long start, long length) in used)
            {
                if (offset < start + length && start < offset + extent)
                {
                    return true;
                }
            }

            return false;
        }
    }

    /// <summary>One collection's edit in a checkpoint (changed on one worker thread).</summary>
    private sealed class CollectionEdit(CollectionChanges changes, CollectionTree? tree, TreeEdit edit,
        IReadOnlySet<uint> rewrite)
    {
        /// <summary>Pages compaction copied out of the chunks it rewrites.</summary>
        public int Rewritten { get; private set; }

        public string Name => changes.Name;

        public TreeEdit TreeEdit => edit;

        public PageReference? Root { get; private set; } = tree?.Root;

        public long Count { get; private set; } = tree?.Count ?? 0;

        [System.Runtime.CompilerServices.MethodImpl(
            System.Runtime.CompilerServices.MethodImplOptions.AggressiveOptimization)] // once per checkpoint
        public void Apply()
        {
            PageReference? root = Root;
            long count = Count;
            // Each id changes once, so the deletes and the puts commute: the deletes one at a time, then the puts
            // sorted, placed run by run.
            foreach (TreeChange change in changes.Changes)
            {
                if (change.IsDelete)
                {
                    count -= BTree.Remove(edit, ref root, change.Id) ? 1 : 0;
                }
            }

            TreeChange[] puts = TreeChangeOrder.SortedPuts(changes.Changes, out int putCount);
            try
            {
                count += BTree.PutSorted(edit, ref root, puts.AsSpan(0, putCount), new LeafEncoder(new LeafArena()));
            }
            finally
            {
                TreeChangeOrder.Return(puts);
            }

            changes.Applied();
            Rewritten = BTree.RewriteChunks(edit, ref root, rewrite);
            Root = root;
            Count = count;
        }

        /// <summary>After <see cref="Apply"/>: moves the live pages of <paramref name="chunks"/> too.</summary>
        public void RewriteAlso(IReadOnlySet<uint> chunks)
        {
            PageReference? root = Root;
            Rewritten += BTree.RewriteChunks(edit, ref root, chunks);
            Root = root;
        }
    }
}
