using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.ExceptionServices;
using System.Text.Json;
using Folio.Buffers;
using Folio.Diagnostics;
using Folio.Documents;
using Folio.Journal;
using Folio.Pages;
using Folio.Transactions;
using Microsoft.Extensions.Logging;

namespace Folio;

/// <summary>
/// An embedded document store in one folder: JSON documents by collection and string id, written through group
/// commit to a write-ahead journal, and served from a multi-versioned in-memory index of the documents written since
/// the last checkpoint over that checkpoint's B+trees in the data file (read through a bounded page cache,
/// <see cref="DocumentStoreOptions.CacheSize"/>); an open mounts the checkpoint and replays only the journal after it.
/// Thread-safe; open one per folder and share it. Use <see cref="OpenSession"/> for typed units of work, or the raw
/// methods for callers that already hold JSON.
/// </summary>
public sealed partial class DocumentStore : IDisposable, IAsyncDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly VersionedIndex _index;
    private readonly TransactionMerger _merger;
    private readonly PageStore _pages;
    private readonly StoreCheckpointer _checkpointer;
    private int _disposed;
    private readonly TaskCompletionSource _disposeCompleted = new(TaskCreationOptions.RunContinuationsAsynchronously);

    private DocumentStore(string path, DocumentStoreOptions options, WriteAheadJournal journal, VersionedIndex index,
        PageStore pages, ILogger logger, long replayedBytes, long replayedPuts)
    {
        Path = path;
        Options = options;
        Logger = logger;
        _journal = journal;
        _index = index;
        _pages = pages;
        _merger = new TransactionMerger(journal, index, options.ToMergerOptions());
        pages.Cache.Prefetcher?.YieldToCommits(() => _merger.IsCommitterActive || _merger.GroupsInFlight > 0);
        try
        {
            _checkpointer = new StoreCheckpointer(pages, journal, index, options, logger, () => _merger.IsFaulted,
                replayedBytes, replayedPuts);
        }
        catch (OutOfMemoryException e)
        {
            _merger.Dispose(); // its timer; the caller closes the journal and the data file
            throw new StoreUnavailableException($"Cannot open the store '{path}': its checkpoint thread could not " +
                "be started (the process may be out of threads, memory or file descriptors).", e);
        }

        Changes = new DocumentChanges(this);
    }

    /// <summary>The change feed: every committed change, in order, from a saved sequence or a time, tailing new
    /// commits.</summary>
    public DocumentChanges Changes { get; }

    /// <summary>The store's folder.</summary>
    public string Path { get; }

    /// <summary>The newest commit visible to new reads (0 for an empty store).</summary>
    public long LastCommittedSequence => _index.VisibleSequence;

    /// <summary>Whether a journal write or fsync failed: commits fail with <see cref="StoreFaultedException"/> until
    /// the store is reopened; reads keep working.</summary>
    public bool IsFaulted => _merger.IsFaulted;

    internal DocumentStoreOptions Options { get; }

    internal ILogger Logger { get; }

    internal VersionedIndex Index => _index;

    internal TransactionMerger Merger => _merger;

    internal WriteAheadJournal Journal => _journal;

    internal PageStore Pages => _pages;

    /// <summary>Whether the checkpoint loop and the sync timer rest because the store is idle (tests).</summary>
    internal (bool CheckpointLoop, bool SyncTimer) Resting => (_checkpointer.IsResting, _merger.IsSyncTimerResting);

    /// <summary>Whether new commits wait for a checkpoint (tests and diagnostics).</summary>
    internal bool IsCheckpointBehind => _checkpointer.IsBehind;

    /// <summary>The damage checkpoints fail on, while they do (tests and diagnostics).</summary>
    internal StoreCorruptedException? CheckpointsBlockedBy => _checkpointer.BlockedBy;

    /// <summary>Tests only: a background checkpoint that also compacts (see
    /// <see cref="StoreCheckpointer.CheckpointAndCompactAsync"/>).</summary>
    internal Task<long> CheckpointAndCompactAsync(Pages.CompactionRequest compaction) =>
        _checkpointer.CheckpointAndCompactAsync(compaction);

    /// <summary>Tests only: drops from memory the versions the checkpoints so far covered, so reads come from the
    /// trees (see <see cref="StoreCheckpointer.EvictCheckpointedAsync"/>).</summary>
    internal Task<int> EvictCheckpointedAsync() => _checkpointer.EvictCheckpointedAsync();

    /// <summary>The name of the data file (the page store) in the store's folder.</summary>
    internal const string DataFileName = "data.folio";

    /// <summary>The journal's folder inside the store's folder.</summary>
    internal const string JournalFolderName = "journal";

    /// <summary>
    /// Opens (or creates) the store in <paramref name="path"/>: takes the folder's lock, recovers the journal and
    /// replays it into memory.
    /// </summary>
    /// <param name="path">The store's folder; the journal lives in its <c>journal</c> subfolder.</param>
    /// <param name="options">Settings; null means the defaults. The store keeps a copy: later changes to the object do
    /// not reach it.</param>
    /// <returns>The open store.</returns>
    /// <exception cref="StoreLockedException">The folder is open elsewhere (the message names the store's
    /// folder).</exception>
    /// <exception cref="JournalCorruptedException">The journal is damaged beyond a torn tail, or a journal file is
    /// missing.</exception>
    /// <exception cref="IOException">The path is a file, or the store's files cannot be created or read (for example,
    /// the disk is full); the message names the store's folder and the inner exception is the cause.</exception>
    /// <exception cref="StoreUnavailableException">The process cannot create the store's checkpoint thread (out of
    /// threads, memory or file descriptors); nothing is left open.</exception>
    public static DocumentStore Open(string path, DocumentStoreOptions? options = null) =>
        OpenCore(path, options, CancellationToken.None);

    /// <summary><see cref="Open(string, DocumentStoreOptions?)"/>; <paramref name="cancellationToken"/> stops the
    /// checkpoints an open writes for a journal too long for this process's memory, between two of them.</summary>
    internal static DocumentStore OpenCore(string path, DocumentStoreOptions? options,
        CancellationToken cancellationToken)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(path);
        options = (options ?? new DocumentStoreOptions()).ForOpen(); // validated; the caller's object stays theirs
        path = System.IO.Path.GetFullPath(path);
        ILogger logger = Diagnostics.GuardedLogger.Create<DocumentStore>(options.LoggerFactory);
        long started = Stopwatch.GetTimestamp();
        PageStore? pages = null;
        ExceptionDispatchInfo? pagesFailed = null;
        WriteAheadJournal journal;
        long cacheBytes = options.TestCacheBytes > 0 ? options.TestCacheBytes : options.EffectiveCacheSize;
        try
        {
            // Called once the journal holds the folder's lock, so the data file is opened by this store alone; the
            // journal then leaves the records the checkpoint holds unchecked. A data file that cannot be opened fails
            // the open as itself, after the journal's own checks.
            journal = OpenJournal(path, options, () =>
            {
                try
                {
                    pages = PageStore.Open(options.FileSystem, System.IO.Path.Combine(path, DataFileName), logger,
                        cacheBytes, new BufferPoolOptions { MeterFactory = options.MeterFactory },
                        options.RangePrefetch, options.DirectReadsAbove(cacheBytes));
                    pages.PagesPerChunk = options.PagesPerChunk;
                    return new CheckpointOfJournal(pages.Current.Sequence, pages.StoreId, pages.Path);
                }
                catch (InsufficientMemoryException e)
                {
                    long available = GC.GetGCMemoryInfo().TotalAvailableMemoryBytes;
                    pagesFailed = ExceptionDispatchInfo.Capture(ThrowHelper.ArgumentOutOfRange(
                        nameof(DocumentStoreOptions.CacheSize), cacheBytes,
                        $"CacheSize is more than this process can have ({available} bytes available): {e.Message}"));
                    return default;
                }
                catch (Exception e)
                {
                    pagesFailed = ExceptionDispatchInfo.Capture(e);
                    return default;
                }
            });
        }
        catch
        {
            pages?.Dispose();
            throw;
        }

        VersionedIndex? index = null;
        try
        {
            pagesFailed?.Throw();
            pages!.StoreId = journal.StoreId; // the data file's, or the journal's when the data file had none
            BacklogCheckpoints.Run(journal, pages, options.CheckpointMemory, logger, cancellationToken);
            PageCheckpoint mounted = pages.Pin(); // the index owns the pin from here
            // Id filters: up to a sixteenth of the cache each, or 256 KiB (16 MiB, some 8.7 million ids, by default),
            // an eighth in all, or 1 MiB; built at the start for the trees of a data file at most twice the cache (a
            // pass over their leaves; larger ones get none).
            long documentCacheBytes = options.EffectiveDocumentCacheSize(cacheBytes);
            VersionedIndex? counted = null; // the gauges read the index's cache once it exists
            DocumentCacheMetrics? documentCacheMetrics = documentCacheBytes > 0
                ? new DocumentCacheMetrics(options.MeterFactory, () => counted?.DocumentCache?.Count ?? 0,
                    () => counted?.DocumentCache?.Bytes ?? 0)
                : null;
            index = new VersionedIndex(options.MaxSnapshotAge, options.AddedIdsTrimMinimum, options.SnapshotClock,
                options.EffectiveMaxSnapshotRetainedBytes, idFilterBytes: Math.Max(256L << 10, cacheBytes / 16),
                idFilterBuildBytes: 2 * cacheBytes, idFilterTotalBytes: Math.Max(1L << 20, cacheBytes / 8),
                documentCacheBytes, documentCacheMetrics);
            counted = index;
            index.AttachCheckpoint(mounted, pages.Reader);
            (long batches, long bytes, long puts) = JournalReplay.Run(journal, index, mounted.Sequence);
            DocumentIds.GenerateAbove(journal.LastTimestampTicks);
            var store = new DocumentStore(path, options, journal, index, pages, logger, bytes, puts);
            long elapsedMs = (long)Stopwatch.GetElapsedTime(started).TotalMilliseconds;
            StoreLog.Opened(logger, path, mounted.Sequence, index.CheckpointedDocuments, batches, bytes, elapsedMs);
            StoreLog.MemorySized(logger, path, options.AvailableMemory, cacheBytes,
                store._checkpointer.BackpressureThreshold, store._checkpointer.PagesBackpressure,
                options.EffectiveMaxSnapshotRetainedBytes);
            return store;
        }
        catch
        {
            index?.CloseDocumentCache();
            pages?.Dispose();
            journal.Dispose();
            throw;
        }
    }

    /// <summary>Opens the journal in the store's folder, turning failures into messages about the store.</summary>
    private static WriteAheadJournal OpenJournal(string path, DocumentStoreOptions options,
        Func<CheckpointOfJournal> checkpoint)
    {
        if (File.Exists(path))
        {
            throw new IOException($"Cannot open the store '{path}': the path is a file; a store is a folder.");
        }

        string journalPath = System.IO.Path.Combine(path, JournalFolderName);
        try
        {
            return WriteAheadJournal.Open(journalPath, options.ToJournalOptions(), checkpoint);
        }
        catch (StoreLockedException e)
        {
            throw new StoreLockedException(path, System.IO.Path.Combine(journalPath, JournalFormat.LockFileName), e);
        }
        catch (IOException e)
        {
            throw new IOException(OpenFailedMessage(path, e), e);
        }
        catch (UnauthorizedAccessException e)
        {
            throw new IOException($"Cannot open the store '{path}': access to its files was denied ({e.Message}).", e);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static string OpenFailedMessage(string path, IOException e) =>
        Storage.DiskFullError.Matches(e)
            ? $"Cannot open the store '{path}': the disk is full (the journal could not prepare its next segment " +
                $"file). Free space and open it again; nothing was lost."
            : $"Cannot open the store '{path}': {e.Message}";

    /// <summary>Opens the store off the caller's thread; see <see cref="Open"/>.</summary>
    /// <param name="path">The store's folder.</param>
    /// <param name="options">Settings; null means the defaults. The store keeps a copy: later changes to the object do
    /// not reach it.</param>
    /// <param name="cancellationToken">Cancels before the open starts, or between the checkpoints an open writes when
    /// it finds more journal after the data file's checkpoint than this process's memory lets one checkpoint take (what
    /// those wrote stays written, and the next open goes on from there).</param>
    /// <returns>The open store.</returns>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> was cancelled; nothing is
    /// left open.</exception>
    public static async ValueTask<DocumentStore> OpenAsync(string path, DocumentStoreOptions? options = null,
        CancellationToken cancellationToken = default) =>
        await Task.Run(() => OpenCore(path, options, cancellationToken), cancellationToken).ConfigureAwait(false);

    /// <summary>Starts a unit of work. Sessions are cheap; use one per request or operation.</summary>
    /// <returns>A new session.</returns>
    public DocumentSession OpenSession()
    {
        ThrowIfDisposed();
        return new DocumentSession(this);
    }

    /// <summary>Stores raw UTF-8 JSON as document <paramref name="id"/> of <paramref name="collection"/>.</summary>
    /// <param name="collection">The collection.</param>
    /// <param name="id">The id (at most 2 KiB UTF-8, valid UTF-16, no control characters).</param>
    /// <param name="json">A complete JSON value other than <c>null</c>, in valid UTF-8, whose strings are Unicode text
    /// (checked: invalid JSON or UTF-8, the literal <c>null</c> alone (which no typed load reads as an entity), or a
    /// <c>\uD800</c>-style escape of half a surrogate pair alone, throws
    /// <see cref="ArgumentException"/>; objects and arrays nested at most as deep as the store's
    /// <see cref="DocumentStoreOptions.JsonSerializerOptions"/> read, 64 levels by default, see
    /// <see cref="DocumentStoreOptions.MaxJsonDepth"/>), at most
    /// <see cref="DocumentStoreOptions.MaxDocumentSize"/> bytes. Copied before the call returns: the memory may be
    /// reused at once.</param>
    /// <param name="expectedVersion">Null: write unconditionally. Otherwise the document must be at this version (0:
    /// must not exist).</param>
    /// <param name="cancellationToken">Cancels while the write waits for its group.</param>
    /// <returns>The new version of the document.</returns>
    /// <exception cref="ConcurrencyException">The document is not at <paramref name="expectedVersion"/>.</exception>
    /// <exception cref="StoreUnavailableException">The journal could not create its next segment
    /// (<see cref="StoreFullException"/>: the disk is full); nothing was written and the store stays open (retry
    /// once the cause is gone).</exception>
    /// <exception cref="StoreCorruptedException">A page of the data file holding the version a command replaces failed
    /// its checks; nothing was written and the store stays usable.</exception>
    /// <exception cref="DocumentTooLargeException">The JSON is over the size limit.</exception>
    /// <exception cref="ArgumentException">Bad collection, id or JSON.</exception>
    public ValueTask<long> PutAsync(string collection, string id, ReadOnlyMemory<byte> json,
        long? expectedVersion = null, CancellationToken cancellationToken = default)
    {
        // Not an async method: the merger's pending batch is what the caller awaits, so a put allocates no state
        // machine; every exception still reaches the caller through the returned task, as from an async method.
        try
        {
            ThrowIfDisposed();
            DocumentIds.ValidateCollection(collection);
            DocumentIds.Validate(id);
            CheckDocument(collection, id, json.Span, validateJson: true);
            var batch = new CommitBatch(capacity: 1).Put(collection, id, json);
            if (expectedVersion is long expected)
            {
                ArgumentOutOfRangeException.ThrowIfNegative(expected, nameof(expectedVersion));
                batch.Expect(collection, id, expected);
            }

            return CommitSequenceAsync(batch, cancellationToken);
        }
        catch (Exception e)
        {
            return ValueTask.FromException<long>(e);
        }
    }

    /// <summary>
    /// Commits the puts and deletes of <paramref name="batch"/> atomically, as one commit: every command or none, and
    /// none if an expectation (<see cref="CommitBatch.Expect"/>) does not hold. The batch's
    /// <see cref="CommitBatch.Durability"/>, when set, overrides <see cref="DocumentStoreOptions.Durability"/>.
    /// </summary>
    /// <param name="batch">The commands; at least one. Not changed; the call takes its own copy of the batch and of
    /// its documents' bytes before it returns, so the batch and that memory may be reused at once.</param>
    /// <param name="cancellationToken">Cancels while the batch waits for its commit group.</param>
    /// <returns>The commit: its sequence number (the new version of every document it put) and timestamp.</returns>
    /// <exception cref="ConcurrencyException">An expectation failed; nothing was written.</exception>
    /// <exception cref="DocumentTooLargeException">A document is over
    /// <see cref="DocumentStoreOptions.MaxDocumentSize"/>, or the batch is over what one commit holds
    /// (<see cref="DocumentStoreOptions.SegmentSize"/> less about 1 KiB).</exception>
    /// <exception cref="ArgumentException">An empty batch, or a bad collection, id or JSON (as for
    /// <see cref="PutAsync"/>).</exception>
    /// <exception cref="StoreFaultedException">The journal failed; the batch is not durable.</exception>
    /// <exception cref="StoreCorruptedException">A page of the data file holding the version a command replaces failed
    /// its checks; nothing was written and the store stays usable.</exception>
    /// <exception cref="StoreUnavailableException">The journal could not create its next segment
    /// (<see cref="StoreFullException"/>: the disk is full); nothing was written and the store stays open (retry
    /// once the cause is gone).</exception>
    public ValueTask<CommitResult> WriteAsync(CommitBatch batch, CancellationToken cancellationToken = default)
    {
        // Not an async method, like PutAsync: the merger's pending batch is what the caller awaits, and every
        // exception still reaches the caller through the returned task.
        try
        {
            ArgumentNullException.ThrowIfNull(batch);
            ThrowIfDisposed();
            batch = batch.Snapshot(); // validated and committed as it is now, whatever the caller does with it next
            if (batch.Count == 0)
            {
                ThrowHelper.ThrowArgument(nameof(batch), batch.Expectations.IsEmpty
                    ? "A batch holds at least one put or delete."
                    : "A batch holds at least one put or delete: expectations alone write nothing to commit.");
            }

            foreach (BatchCommand command in batch.Commands)
            {
                DocumentIds.ValidateCollection(command.Key.Collection);
                DocumentIds.Validate(command.Key.Id);
                if (command.Kind == ChangeKind.Put)
                {
                    CheckDocument(command.Key.Collection, command.Key.Id, command.Value.Span, validateJson: true);
                }
            }

            foreach ((DocumentKey key, _) in batch.Expectations)
            {
                DocumentIds.ValidateCollection(key.Collection);
                DocumentIds.Validate(key.Id);
            }

            return CommitAsync(batch, cancellationToken);
        }
        catch (Exception e)
        {
            return ValueTask.FromException<CommitResult>(e);
        }
    }

    /// <summary>Commits <paramref name="batch"/> (validated; the raw API's own, holding the caller's memory) once
    /// checkpoints keep up with the writers (<see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/>);
    /// returns its sequence. The merger copies the values before this returns, or, when the commit must wait, this
    /// copies them first, so the caller may reuse its memory at once either way.</summary>
    private ValueTask<long> CommitSequenceAsync(CommitBatch batch, CancellationToken cancellationToken)
    {
        _checkpointer.ThrowIfBlocked();
        _checkpointer.NoteCommit(batch.Count);
        if (_checkpointer.IsBehind)
        {
            return CommitSequenceWhenCaughtUpAsync(batch.CopyValues(), cancellationToken);
        }

        _index.ReadWrittenOver(batch);
        return _merger.CommitSequenceAsync(batch, cancellationToken);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private async ValueTask<long> CommitSequenceWhenCaughtUpAsync(CommitBatch batch,
        CancellationToken cancellationToken)
    {
        await WaitForCheckpointsAsync(cancellationToken).ConfigureAwait(false);
        _index.ReadWrittenOver(batch);
        return await _merger.CommitSequenceAsync(batch, cancellationToken).ConfigureAwait(false);
    }

    /// <summary>Waits until checkpoints keep up with the writers again; the store may have closed meanwhile.</summary>
    private async ValueTask WaitForCheckpointsAsync(CancellationToken cancellationToken)
    {
        await _checkpointer.WaitUntilCaughtUpAsync(cancellationToken).ConfigureAwait(false);
        ThrowIfDisposed();
    }

    /// <summary>Commits <paramref name="batch"/> (validated) once checkpoints keep up with the writers; the sessions'
    /// and <see cref="WriteAsync"/>'s way in. As <see cref="CommitSequenceAsync"/>, the merger copies the values
    /// before this returns, or, when the commit must wait, this copies them first, so a caller's memory may be reused
    /// at once either way.</summary>
    internal ValueTask<CommitResult> CommitAsync(CommitBatch batch, CancellationToken cancellationToken)
    {
        // Not an async method: with checkpoints keeping up, the caller awaits the merger's pending batch itself, and
        // a save allocates no state machine here.
        _checkpointer.ThrowIfBlocked();
        _checkpointer.NoteCommit(batch.Count);
        if (_checkpointer.IsBehind)
        {
            return CommitWhenCaughtUpAsync(batch.CopyValues(), cancellationToken);
        }

        _index.ReadWrittenOver(batch);
        return _merger.CommitAsync(batch, cancellationToken);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private async ValueTask<CommitResult> CommitWhenCaughtUpAsync(CommitBatch batch,
        CancellationToken cancellationToken)
    {
        await WaitForCheckpointsAsync(cancellationToken).ConfigureAwait(false);
        _index.ReadWrittenOver(batch);
        return await _merger.CommitAsync(batch, cancellationToken).ConfigureAwait(false);
    }

    /// <summary>Deletes a document. A delete of a document that does not exist succeeds and still commits: it takes a
    /// sequence number and appears in the change feed as a delete (which leaves a copy as it was); give
    /// <paramref name="expectedVersion"/> to delete only a given version.</summary>
    /// <param name="collection">The collection.</param>
    /// <param name="id">The id.</param>
    /// <param name="expectedVersion">Null: delete unconditionally. Otherwise the document must be at this
    /// version.</param>
    /// <param name="cancellationToken">Cancels while the delete waits for its group.</param>
    /// <returns>The sequence number of the commit.</returns>
    /// <exception cref="StoreUnavailableException">The journal could not create its next segment
    /// (<see cref="StoreFullException"/>: the disk is full); nothing was written and the store stays open (retry
    /// once the cause is gone).</exception>
    /// <exception cref="StoreCorruptedException">A page of the data file holding the version a command replaces failed
    /// its checks; nothing was written and the store stays usable.</exception>
    public ValueTask<long> DeleteAsync(string collection, string id, long? expectedVersion = null,
        CancellationToken cancellationToken = default)
    {
        try
        {
            ThrowIfDisposed();
            DocumentIds.ValidateCollection(collection);
            DocumentIds.Validate(id);
            var batch = new CommitBatch(capacity: 1).Delete(collection, id);
            if (expectedVersion is long expected)
            {
                ArgumentOutOfRangeException.ThrowIfNegative(expected, nameof(expectedVersion));
                batch.Expect(collection, id, expected);
            }

            return CommitSequenceAsync(batch, cancellationToken);
        }
        catch (Exception e)
        {
            return ValueTask.FromException<long>(e);
        }
    }

    /// <summary>The latest committed version of a document, or null. Lock-free; never waits for writers.</summary>
    /// <param name="collection">The collection.</param>
    /// <param name="id">The id.</param>
    /// <returns>The document, or null when it does not exist.</returns>
    public StoredDocument? Get(string collection, string id)
    {
        ThrowIfDisposed();

        // Every key in the index was validated when it was written, so a hit needs no validation; a miss (or a null or
        // empty name, which the index cannot look up) validates, so that an invalid id throws instead of reading as
        // absent.
        if ((string.IsNullOrEmpty(collection) || string.IsNullOrEmpty(id)
            ? null
            : _index.GetLatest(new DocumentKey(collection, id))) is not { } version)
        {
            DocumentIds.ValidateCollection(collection);
            DocumentIds.Validate(id);
            return null;
        }

        return new StoredDocument(collection, id, version.Json, version.Sequence,
            new DateTimeOffset(version.TimestampTicks, TimeSpan.Zero));
    }

    /// <summary>A lock-free snapshot of the store's health: fault state, last commit, fsync latency.</summary>
    /// <returns>The current diagnostics.</returns>
    public StoreDiagnostics GetDiagnostics() => new(
        _merger.IsFaulted,
        _merger.Fault,
        _index.VisibleSequence,
        _merger.SyncCount,
        _merger.LastSyncDuration,
        _merger.AverageSyncDuration)
    {
        DiskFull = _journal.DiskFull,
        SegmentUnavailable = _journal.SegmentUnavailable,
        CheckpointFailure = _checkpointer.LastFailure,
        WritesRefused = _checkpointer.RefusesWritesFor,
    };

    /// <summary>
    /// Closes the store: backups and scrubs in flight are cancelled and waited for, commits already submitted are
    /// finished (written and fsynced) and acknowledged, the journal is synced and the folder's lock released.
    /// Idempotent; later calls on the store throw <see cref="ObjectDisposedException"/>. Called from inside one of
    /// the store's own backups or scrubs (a backup's destination stream, a scrub's progress callback), which cannot
    /// end while the call waits for it, it cancels them and returns at once, and the close completes as soon as they
    /// have ended (<see cref="DisposeAsync"/> from elsewhere awaits that).
    /// </summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) == 0)
        {
            if (InOwnOperation)
            {
                CloseAfterOwnOperation();
                return;
            }

            try
            {
                StopOperationsAsync().GetAwaiter().GetResult(); // backups and scrubs hold pins on the files
                _merger.Dispose();
                _checkpointer.StopAsync(final: Options.CheckpointOnClose && !_merger.IsFaulted).AsTask().GetAwaiter()
                    .GetResult();
                CloseFiles();
            }
            finally
            {
                _disposeCompleted.TrySetResult();
            }
        }
    }

    /// <summary>
    /// Closes the store without blocking a thread: cancels the backups and scrubs in flight and awaits them, awaits the
    /// commits already submitted (finished, fsynced and acknowledged) and the background sync timer, then syncs the
    /// journal and releases the folder's lock. Idempotent: a second call awaits the first. Later calls on the store
    /// throw <see cref="ObjectDisposedException"/>. Called from inside one of the store's own backups or scrubs, it
    /// cancels them and completes at once, as <see cref="Dispose"/> does (awaiting the close there would wait for
    /// the caller itself).
    /// </summary>
    /// <returns>A task that completes when the store is closed (at once when called from inside one of its own
    /// backups or scrubs).</returns>
    public ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return InOwnOperation ? ValueTask.CompletedTask : new ValueTask(_disposeCompleted.Task);
        }

        if (InOwnOperation)
        {
            CloseAfterOwnOperation();
            return ValueTask.CompletedTask;
        }

        return new ValueTask(CloseAsync());
    }

    /// <summary>A close asked for from inside one of the store's own operations: it runs once they have ended, and
    /// nobody awaits it, so a failure is logged.</summary>
    private void CloseAfterOwnOperation() =>
        CloseAsync().ContinueWith(static (close, state) =>
            {
                var store = (DocumentStore)state!;
                StoreLog.DeferredCloseFailed(store.Logger, close.Exception!.GetBaseException(), store.Path);
            }, this, CancellationToken.None, TaskContinuationOptions.OnlyOnFaulted,
            TaskScheduler.Default);

    /// <summary>The close, once the store is marked disposed: waits for the operations in flight (cancelled), the
    /// commits and the checkpointer, then closes the files.</summary>
    private async Task CloseAsync()
    {
        try
        {
            await StopOperationsAsync().ConfigureAwait(false); // backups and scrubs hold pins on the files
            await _merger.DisposeAsync().ConfigureAwait(false);
            await _checkpointer.StopAsync(final: Options.CheckpointOnClose && !_merger.IsFaulted).ConfigureAwait(false);
            CloseFiles();
        }
        finally
        {
            _disposeCompleted.TrySetResult();
        }
    }

    private void CloseFiles()
    {
        long sequence = _journal.CommittedSequence;
        _index.ReleaseCheckpoint();
        _index.CloseDocumentCache();
        _pages.Dispose();
        _journal.Dispose();
        StoreLog.Closed(Logger, Path, sequence);
    }

    /// <summary>
    /// Writes a checkpoint now: every commit visible and durable so far goes into the data file, and the journal
    /// segments it covers are purged, so the next open replays only what follows. The store also checkpoints in the
    /// background (<see cref="DocumentStoreOptions.CheckpointThreshold"/>, <see cref="DocumentStoreOptions
    /// .CheckpointInterval"/>) and at a clean close; commits and reads continue while a checkpoint runs.
    /// </summary>
    /// <param name="cancellationToken">Cancels while the call waits for a checkpoint already running.</param>
    /// <returns>The sequence the data file covers afterwards.</returns>
    /// <exception cref="IOException">A write or fsync of the data file failed; the previous checkpoint stays current
    /// and the journal keeps every commit.</exception>
    public async ValueTask<long> CheckpointAsync(CancellationToken cancellationToken = default)
    {
        ThrowIfDisposed();
        return await _checkpointer.CheckpointAsync(cancellationToken).ConfigureAwait(false);
    }

    internal void ThrowIfDisposed()
    {
        if (Volatile.Read(ref _disposed) != 0)
        {
            ThrowHelper.ThrowObjectDisposed(nameof(DocumentStore));
        }
    }

    /// <summary>Size limit, no document that is JSON <c>null</c>, and, for raw JSON, well-formedness.</summary>
    internal void CheckDocument(string collection, string id, ReadOnlySpan<byte> json, bool validateJson)
    {
        if (json.Length > Options.MaxDocumentSize)
        {
            throw new DocumentTooLargeException(collection, id, json.Length, Options.MaxDocumentSize);
        }

        if (!validateJson)
        {
            // A session's serializer writes JSON; a custom converter can still write an entity as null.
            if (json.SequenceEqual("null"u8))
            {
                ThrowNullEntity(collection, id);
            }
        }
        else
        {
            // Utf8JsonReader checks the JSON grammar but not the UTF-8 inside strings and property names: bytes such as
            // FF, an overlong C0 AF or an encoded surrogate ED A0 80 would be stored, then fail every typed load (and
            // every query of the collection); so would an escaped lone surrogate, checked below.
            if (!System.Text.Unicode.Utf8.IsValid(json))
            {
                ThrowInvalidUtf8(collection, id, json);
            }

            try
            {
                int maxDepth = Options.RawJsonDepth;
                var reader = new Utf8JsonReader(json,
                    new JsonReaderOptions { MaxDepth = DocumentStoreOptions.MaxJsonDepth + 1 });
                while (reader.Read())
                {
                    // Deeper than the store's serializer reads: a typed load or query of it would fail.
                    if (reader.CurrentDepth >= maxDepth
                        && reader.TokenType is JsonTokenType.StartObject or JsonTokenType.StartArray)
                    {
                        ThrowTooDeep(collection, id, json, reader.TokenStartIndex, maxDepth);
                    }

                    // An escaped surrogate without its other half is valid grammar but not text (JsonEscapes).
                    if (reader.ValueIsEscaped
                        && reader.TokenType is JsonTokenType.String or JsonTokenType.PropertyName
                        && JsonEscapes.FindLoneSurrogate(reader.ValueSpan) is >= 0 and int at)
                    {
                        ThrowLoneSurrogate(collection, id, json, (int)reader.TokenStartIndex + 1 + at);
                    }
                }

                if (reader.BytesConsumed != json.Length || reader.TokenType == JsonTokenType.None)
                {
                    throw new ArgumentException($"Document '{collection}/{id}' is not a complete JSON value.",
                        nameof(json));
                }

                // The last token at depth 0 is the whole value unless it closes an object or array.
                if (reader.TokenType == JsonTokenType.Null && reader.CurrentDepth == 0)
                {
                    ThrowNullDocument(collection, id, json);
                }
            }
            catch (JsonException e)
            {
                throw new ArgumentException($"Document '{collection}/{id}' is not valid JSON: {e.Message}",
                    nameof(json), e);
            }
        }
    }

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ThrowTooDeep(string collection, string id, ReadOnlySpan<byte> json, long offset, int maxDepth)
        => throw new ArgumentException(
            $"Document '{collection}/{id}' nests objects and arrays more than {maxDepth} levels deep (at offset " +
            $"{offset}), deeper than the store's JsonSerializerOptions read (MaxDepth; 64 when 0), so a typed load " +
            $"or query of it would fail. Raise JsonSerializerOptions.MaxDepth (the store accepts at most " +
            $"{DocumentStoreOptions.MaxJsonDepth}) to store it; the document is {json.Length} bytes.",
            nameof(json));

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ThrowNullDocument(string collection, string id, ReadOnlySpan<byte> json)
        => throw new ArgumentException(
            $"Document '{collection}/{id}' ({json.Length} bytes) is the JSON literal null, which no typed load can " +
            "read as an entity (it deserializes to no object, so the load and every query of the collection would " +
            "fail). Store an object, an array or a scalar, or delete the document.", nameof(json));

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ThrowNullEntity(string collection, string id)
        => throw new InvalidOperationException(
            $"The entity of document '{collection}/{id}' serialized to the JSON literal null (a converter in the " +
            "store's JsonSerializerOptions wrote it so), which no load could read back; nothing was written.");

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ThrowLoneSurrogate(string collection, string id, ReadOnlySpan<byte> json, int offset)
        => throw new ArgumentException(
            $"Document '{collection}/{id}' is not valid JSON text: the escape " +
            $"{System.Text.Encoding.UTF8.GetString(json.Slice(offset, 6))} at offset {offset} is half of a surrogate " +
            "pair without its other half, which is not Unicode text (System.Text.Json cannot read it as a string). " +
            "Write the character itself, or both halves of its pair.", nameof(json));

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ThrowInvalidUtf8(string collection, string id, ReadOnlySpan<byte> json)
    {
        int at = 0;
        while (at < json.Length
            && System.Text.Rune.DecodeFromUtf8(json[at..], out _,
            out int consumed) == System.Buffers.OperationStatus.Done)
        {
            at += consumed;
        }

        throw new ArgumentException(
            $"Document '{collection}/{id}' is not valid UTF-8 (an invalid byte sequence at offset {at}).",
            nameof(json));
    }
}
