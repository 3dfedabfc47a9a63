using System.Collections.Concurrent;
using System.Diagnostics;
using Folio.Diagnostics;
using Folio.Journal;
using Folio.Pages;
using Microsoft.Extensions.Logging;

namespace Folio.Documents;

/// <summary>
/// Writes a document store's checkpoints: the committed state up to a sequence C goes into the data file
/// (<see cref="PageStore"/>), and then the journal segments wholly at or below C are purged.
/// <para>
/// Owners. One checkpoint at a time, because one thread runs them all, the checkpoint thread: from the background
/// loop (when the journal after the last checkpoint passes <see cref="DocumentStoreOptions.CheckpointThreshold"/>, the
/// next checkpoint's pages could pass the checkpoint's memory, or
/// <see cref="DocumentStoreOptions.CheckpointInterval"/> passed with commits since), or for an operator's
/// <see cref="DocumentStore.CheckpointAsync"/> or <see cref="DocumentStore.CompactAsync"/>, which queue a request
/// (<see cref="_requests"/>) the thread runs and complete when it has (so no thread-pool thread blocks in a
/// checkpoint's writes and fsyncs); then, at a clean close, the closing thread, once the checkpoint thread exited
/// (<see cref="_loopExited"/>). A request is started or cancelled once (<see cref="OperatorRequest"/>); the ones the
/// thread did not start when it stops fail with <see cref="ObjectDisposedException"/> (<see cref="StopAsync"/>
/// drains the queue after the thread exited, and a request queued after that drain sees the stop when it re-checks:
/// both sides make the queue operation and the stop flag's store interlocked, so one of them sees the other).
/// <see cref="_lastSequence"/> is written by checkpoints only (interlocked, so any thread may read it). A checkpoint
/// registers a snapshot at C, so the versions it reads are not pruned while commits continue; it covers only commits
/// the journal already made durable (a buffered commit is visible before its fsync: the checkpoint waits for the
/// buffered sync), so the data file is never ahead of the journal, and the journal is purged only once the data
/// file's header naming C is durable. The close's checkpoint does not purge: the journal keeps its segments (for
/// change-feed readers that resume after a restart) until a checkpoint of a running store covers them.
/// <see cref="LastFailure"/> is written by checkpoints only (a release store: the error of an attempt that failed,
/// null once one succeeds) and read by diagnostics on any thread.
/// </para>
/// <para>
/// Backpressure. The documents written since the last checkpoint stay in memory until a checkpoint moves them to the
/// data file (<see cref="VersionedIndex.AdvanceCheckpoint"/>), and the checkpoint that does holds every page they
/// touch in memory at once (decoded, then serialized), so when checkpoints fall behind the writers, commits wait.
/// Every commit that passes a multiple of 32 commands (<see cref="NoteCommit"/>) and every checkpoint attempt (under
/// <see cref="_backpressureLock"/>) compare the journal after the last checkpoint with
/// <see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/>, and the next checkpoint's pages as estimated
/// (<see cref="EstimatedCheckpointBytes"/>) with twice the checkpoint's memory
/// (<see cref="DocumentStoreOptions.CheckpointMemory"/>; past the memory itself the loop is woken to checkpoint
/// early): past either, <see cref="_behind"/> is set (a release store) and the loop checkpoints at once; once a
/// checkpoint brings both below, or a checkpoint fails (the journal still holds everything: a data file that cannot
/// be written must not stop the writers), or the store faults or closes (the loop re-checks on every tick while it is
/// set, and its commits then fail fast), it is cleared (a release store) and then the current signal is swapped for
/// a new one and completed. A writer
/// (<see cref="WaitUntilCaughtUpAsync"/>) reads the signal, then the flag (both acquire): a flag it sees set belongs
/// to that signal or a later one, so the clearing's completion of that signal wakes it; it re-checks after waking.
/// </para>
/// <para>
/// Damage. A checkpoint that fails with <see cref="StoreCorruptedException"/> met a page of the data file it must
/// rewrite and cannot read (a leaf that a write accepted before anything saw the damage must go into): every
/// checkpoint will fail the same way until the store is repaired. The checkpoint thread then sets
/// <see cref="BlockedBy"/> (a release store; cleared by the next checkpoint that succeeds) and tries again after a
/// wait that doubles from a second to a minute, instead of at every tick; writers do not wait for those checkpoints
/// (<see cref="_behind"/> is not set while blocked), and once the journal after the last checkpoint passes the
/// backpressure threshold, or its pages twice the checkpoint's memory, writes fail with that damage
/// (<see cref="ThrowIfBlocked"/>, read by every commit with one acquire load), so the memory and the journal the
/// store cannot checkpoint stay bounded; reads go on. Operator checkpoints run when asked. A checkpoint that also
/// compacted does not block (the damage may be in a page only the compaction read; the next checkpoint runs without).
/// </para>
/// <para>
/// Resting. The loop wakes every tick (at most 100 ms) to see whether a checkpoint, a compaction pass or heads
/// maintenance is due. After a second of wakes with none of those and no new commit, it rests: it waits a longer tick
/// (a second, or less when <see cref="DocumentStoreOptions.CheckpointInterval"/> or the compaction pass interval are
/// short), so an idle store costs a few wakes a second. The first commit after (<see cref="NoteCommit"/>) swaps
/// <see cref="_resting"/> back and sets <see cref="_wake"/>; a commit that reads it just before the loop sets it
/// is seen at the end of the rest, which delays nothing but the loop's own time-based checks by at most that tick.
/// </para>
/// </summary>
internal sealed class StoreCheckpointer : IAsyncDisposable
{
    private readonly PageStore _pages;
    private readonly WriteAheadJournal _journal;
    private readonly VersionedIndex _index;
    private readonly DocumentStoreOptions _options;
    private readonly ILogger _logger;
    private readonly CancellationTokenSource _stop = new();
    private readonly TaskCompletionSource _loopExited = NewSignal();
    private long _commandsNoted; // commands of every commit noted since the open (interlocked; see NoteCommit)
    private long _commandsAtCheckpoint; // _commandsNoted when the last checkpoint's snapshot was taken (interlocked)
    private int _memoryWake; // 1 once a writer woke the loop for the pages' memory, until the next checkpoint
    private long _bytesPerCommand = PageBytesPerCommand; // the checkpoint thread's estimate (release), any reader
    private readonly CheckpointMetrics _metrics;
    private readonly long _backpressureThreshold;
    private readonly long _checkpointThreshold;
    private readonly long _checkpointMemory;
    private readonly long _compactionBytes; // the live bytes one compaction checkpoint rewrites at most
    private readonly Func<bool> _isFaulted;
    private readonly Lock _backpressureLock = new();
    private TaskCompletionSource _caughtUp = NewSignal();
    private long _behindSince;
    private int _behind;
    private long _behindLoggedAt; // under _backpressureLock: when a wait was last logged (0: never)
    private long _behindEpisodes; // under _backpressureLock: waits since the last one logged
    private bool _behindLogged; // under _backpressureLock: whether the current wait was logged

    /// <summary>The least time between two logged waits, in milliseconds (every wait counts in the metrics): writes
    /// at scattered ids into a store larger than memory may wait at every checkpoint, several times a second.</summary>
    private const long BackpressureLogInterval = 10_000;
    private long _lastSequence;
    private Exception? _lastFailure;
    private StoreCorruptedException? _blockedBy; // see "Damage" in the protocol (release; any reader)
    private long _retryAt; // the checkpoint thread's: when a checkpoint blocked by damage is tried again
    private long _retryDelay; // the checkpoint thread's: the wait before that try, in milliseconds
    private long _bytesAtCheckpoint; // the journal's AppendedBytes when the last checkpoint's snapshot was taken
    private long _lastTimestamp;
    private long _lastCompaction; // Environment.TickCount64 of the last compaction pass (on the checkpoint thread)
    private long _compactionIdleAt = -1; // the loop's: the checkpoint a pass that moved nothing ran at

    /// <summary>The most tail moves one <see cref="CompactAsync"/> makes (each is two checkpoints, and moves at most
    /// <see cref="_compactionBytes"/>).</summary>
    private const int MaxTailMoves = 64;
    private int _stopped;
    private readonly ConcurrentQueue<OperatorRequest> _requests = new();
    private readonly AutoResetEvent _wake = new(false);
    private int _resting; // 1 while the loop waits its resting tick (see the protocol)

    /// <summary>Starts the checkpoint thread; <paramref name="isFaulted"/> says whether the store's journal failed
    /// (writers waiting for a checkpoint are then let go, to fail fast as every commit of a faulted store
    /// does); <paramref name="replayedBytes"/> is the journal after the data file's checkpoint that the open
    /// replayed, and <paramref name="replayedPuts"/> the documents it put.</summary>
    public StoreCheckpointer(PageStore pages, WriteAheadJournal journal, VersionedIndex index,
        DocumentStoreOptions options, ILogger logger, Func<bool> isFaulted, long replayedBytes, long replayedPuts = 0)
    {
        _isFaulted = isFaulted;
        _pages = pages;
        _journal = journal;
        _index = index;
        _options = options;
        _logger = logger;
        _lastSequence = pages.Current.Sequence;
        _bytesAtCheckpoint = journal.AppendedBytes - replayedBytes;
        _lastTimestamp = Environment.TickCount64;
        _backpressureThreshold = options.EffectiveBackpressureThreshold;
        _checkpointThreshold = options.EffectiveCheckpointThreshold;
        _checkpointMemory = options.CheckpointMemory;
        _compactionBytes = Math.Max(1L << 20, _checkpointMemory / 4);
        _commandsNoted = replayedPuts;
        _metrics = new CheckpointMetrics(options.MeterFactory,
            () => BytesSinceCheckpoint,
            () => _pages.ChunkCount, () => _pages.LastCheckpoint.FillRate, () => journal.HeldBytes,
            () => journal.LapsedHolds);
        try
        {
            DedicatedThread.Start(RunLoop, "Folio checkpoints");
        }
        catch (OutOfMemoryException)
        {
            _metrics.Dispose();
            throw;
        }
    }

    /// <summary>The sequence the newest checkpoint covers.</summary>
    public long LastSequence => Interlocked.Read(ref _lastSequence);

    /// <summary>The error of the last checkpoint attempt when it failed (a full disk, a damaged page, an I/O error),
    /// or null once one succeeded: until then the journal is not purged.</summary>
    public Exception? LastFailure => Volatile.Read(ref _lastFailure);

    /// <summary>The journal's bytes after the last checkpoint (what the thresholds measure): the records appended since
    /// its snapshot was taken, plus at open those the open replayed. Records a group appended while the snapshot was
    /// taken may count as covered; the next checkpoint covers them.</summary>
    public long BytesSinceCheckpoint => Math.Max(0, _journal.AppendedBytes - Interlocked.Read(ref _bytesAtCheckpoint));

    /// <summary>Commands noted (<see cref="NoteCommit"/>) since the last checkpoint's snapshot: at least the
    /// documents the next checkpoint writes, give or take the commits in flight when it was taken.</summary>
    public long CommandsSinceCheckpoint =>
        Math.Max(0, Interlocked.Read(ref _commandsNoted) - Interlocked.Read(ref _commandsAtCheckpoint));

    /// <summary>
    /// The memory the next checkpoint's pages may take, in bytes (<see cref="EstimatePages"/> of the commands and the
    /// journal since the last checkpoint).
    /// </summary>
    public long EstimatedCheckpointBytes
    {
        get
        {
            long since = BytesSinceCheckpoint;
            return EstimatePages(CommandsSinceCheckpoint, since, Volatile.Read(ref _bytesPerCommand),
                _pages.LiveBytes + since);
        }
    }

    /// <summary>
    /// The memory a checkpoint of <paramref name="commands"/> documents of <paramref name="bytes"/> may take for its
    /// pages: each document it writes may change a page of its own (<see cref="PageBytesPerCommand"/>), a large
    /// document takes twice its bytes (an overflow value of up to 64 KiB is copied into the checkpoint's buffer; a
    /// larger one is written from where it lies in memory, so for those this overstates), and no checkpoint changes
    /// more pages than the trees hold plus the new documents' (twice <paramref name="liveBytes"/>, the data file's live
    /// bytes and the documents'). Scattered writes into a store larger than memory reach the first bound; writes in id
    /// order, or to few documents, touch far fewer pages, so the bytes a document cost the last checkpoint
    /// (<paramref name="bytesPerCommand"/>, <see cref="BytesPerCommand"/>) stand for the first bound's per-document
    /// cost, but no less than a quarter of a page's (a workload that turns to scattered writes then overshoots by at
    /// most four times, once).
    /// </summary>
    internal static long EstimatePages(long commands, long bytes, long bytesPerCommand, long liveBytes)
    {
        long pages = commands > long.MaxValue / bytesPerCommand ? long.MaxValue : commands * bytesPerCommand;
        pages = Math.Max(pages, bytes > long.MaxValue / 2 ? long.MaxValue : bytes * 2);
        return Math.Min(pages, liveBytes > long.MaxValue / 2 ? long.MaxValue : liveBytes * 2);
    }

    /// <summary>The journal after the last checkpoint past which commits wait (the options' threshold,
    /// resolved).</summary>
    public long BackpressureThreshold => _backpressureThreshold;

    /// <summary>The next checkpoint's estimated pages (<see cref="EstimatedCheckpointBytes"/>) past which commits
    /// wait: twice the checkpoint's memory, past which a checkpoint starts.</summary>
    public long PagesBackpressure => 2 * _checkpointMemory;

    /// <summary>What one written document may add to a checkpoint's memory: a page decoded and serialized (16 KiB
    /// each) and its keys' strings. A leaf is held decoded only while the puts fill it and serialized once, as its
    /// encoded bytes (<see cref="Pages.LeafEncoder"/>), so this overstates a leaf by about a page: an upper
    /// bound.</summary>
    internal const long PageBytesPerCommand = (2 * Pages.PageFormat.TargetPageSize) + 4096;

    /// <summary>Whether new commits wait for a checkpoint (acquire): checkpoints fell behind the writers.</summary>
    public bool IsBehind => Volatile.Read(ref _behind) != 0;

    /// <summary>Waits while <see cref="IsBehind"/> (see the protocol).</summary>
    public async ValueTask WaitUntilCaughtUpAsync(CancellationToken cancellationToken)
    {
        while (true)
        {
            Task signal = Volatile.Read(ref _caughtUp).Task;
            if (Volatile.Read(ref _behind) == 0)
            {
                return;
            }

            await signal.WaitAsync(cancellationToken).ConfigureAwait(false);
        }
    }

    /// <summary>Checkpoints everything durable and visible now, on the checkpoint thread; returns the sequence the
    /// data file covers. <paramref name="cancellationToken"/> cancels while the request waits for the thread.</summary>
    public Task<long> CheckpointAsync(CancellationToken cancellationToken) =>
        SubmitAsync(() => CheckpointAndUpdateBackpressure(), cancellationToken);

    /// <summary>Tests only: the checkpoint the background loop runs when compaction is due too (the commits since the
    /// last checkpoint, and the chunks <paramref name="compaction"/> picks), on the checkpoint thread.</summary>
    internal Task<long> CheckpointAndCompactAsync(CompactionRequest compaction) =>
        SubmitAsync(() => CheckpointAndUpdateBackpressure(compaction), CancellationToken.None);

    /// <summary>Tests only: evicts from the heads what the checkpoints so far covered
    /// (<see cref="VersionedIndex.EvictCheckpointed"/>) on the checkpoint thread, the only thread that may, so it
    /// never runs beside a background checkpoint or compaction; returns the keys marked.</summary>
    internal Task<int> EvictCheckpointedAsync() => SubmitAsync(_index.EvictCheckpointed, CancellationToken.None);

    /// <summary>
    /// Compaction on demand, on the checkpoint thread: a checkpoint of the commits since the last one, then
    /// checkpoints that also rewrite the chunks whose share of live pages is below <paramref name="fillBelow"/> (a
    /// bounded amount each), each followed by one that frees them (once no reader pins a checkpoint that reaches
    /// them), then tail moves that give the data file's free end back. The result is measured here, before the thread
    /// runs anything else.
    /// </summary>
    public Task<CompactionResult> CompactAsync(double fillBelow, CancellationToken cancellationToken) =>
        SubmitAsync(() =>
        {
            long before = _pages.FileLength;

            // Compaction passes checkpoint no commits. Without this checkpoint first, the one that next covers the
            // commits already made would supersede pages the passes just packed, and the chunks would be sparse
            // again right after a compaction that reported them dense.
            CheckpointAndUpdateBackpressure();

            // Passes of at most CompactionBytes each (a pass's pages are in memory at once), each followed by a
            // checkpoint that frees what it emptied, until no chunk is below the fill. A pass leaves its pages in
            // dense chunks, so every pass takes chunks no earlier pass wrote, and there are at most as many passes as
            // chunks to begin with.
            int chunks = 0;
            long pages = 0;
            for (int pass = _pages.ChunkCount; pass >= 0; pass--)
            {
                CompactNow(new CompactionRequest(fillBelow, _compactionBytes));
                CheckpointStatistics compacted = _pages.LastCheckpoint;
                chunks += compacted.CompactedChunks;
                pages += compacted.RewrittenPages;
                CompactNow(new CompactionRequest(0, 0));
                if (compacted.CompactedChunks == 0)
                {
                    break;
                }
            }

            // The rewritten chunks were freed where they lay, and the compaction's own chunks may have gone to the
            // end of the file: move the last chunks into the free space before them, a few at a time, so the file's
            // end comes free and is given back.
            for (int pass = 0; pass < MaxTailMoves; pass++)
            {
                long length = _pages.FileLength;
                CompactNow(new CompactionRequest(0, _compactionBytes, MoveTail: true));
                CheckpointStatistics moved = _pages.LastCheckpoint;
                CompactNow(new CompactionRequest(0, 0));
                chunks += moved.CompactedChunks;
                pages += moved.RewrittenPages;
                if (moved.CompactedChunks == 0 || _pages.FileLength >= length)
                {
                    break;
                }
            }

            _lastCompaction = Environment.TickCount64;
            return new CompactionResult(chunks, pages, before, _pages.FileLength, _pages.LastCheckpoint.FillRate);
        }, cancellationToken);

    /// <summary>Queues <paramref name="work"/> for the checkpoint thread and wakes it (see the protocol).</summary>
    private async Task<T> SubmitAsync<T>(Func<T> work, CancellationToken cancellationToken)
    {
        cancellationToken.ThrowIfCancellationRequested();
        var request = new OperatorRequest<T>(work);
        using CancellationTokenRegistration registration = cancellationToken.UnsafeRegister(
            static (state, token) => ((OperatorRequest)state!).TryCancel(token), request);
        _requests.Enqueue(request);
        if (Volatile.Read(ref _stopped) != 0)
        {
            request.TryFail(new ObjectDisposedException(nameof(DocumentStore)));
        }
        else
        {
            SetWake(); // a store that stopped meanwhile failed the request in its drain
        }

        return await request.Completion.ConfigureAwait(false);
    }

    /// <summary>Runs the queued operator requests (on the checkpoint thread).</summary>
    private void RunRequests()
    {
        while (_requests.TryDequeue(out OperatorRequest? request))
        {
            if (!request.TryStart())
            {
                continue; // cancelled while it waited
            }

            request.Run();
        }
    }

    /// <summary>Stops the loop and, when <paramref name="final"/>, writes a last checkpoint (a clean close: the
    /// merger has drained and synced the journal). A failure of that checkpoint is logged, never thrown: the journal
    /// still holds everything.</summary>
    public async ValueTask StopAsync(bool final)
    {
        if (Interlocked.Exchange(ref _stopped, 1) != 0)
        {
            return;
        }

        await _stop.CancelAsync().ConfigureAwait(false);
        await _loopExited.Task.ConfigureAwait(false);
        while (_requests.TryDequeue(out OperatorRequest? request))
        {
            request.TryFail(new ObjectDisposedException(nameof(DocumentStore)));
        }

        _wake.Dispose();
        ReleaseWaiters(); // writers waiting now meet the closed store
        try
        {
            if (final && _index.VisibleSequence > _lastSequence)
            {
                CheckpointNow(purge: false, waitForSync: false);
            }
        }
        catch (Exception error) when (error is IOException or FolioException or UnauthorizedAccessException)
        {
            StoreLog.CheckpointFailed(_logger, error);
        }
        finally
        {
            _metrics.Dispose();
            _stop.Dispose();
        }
    }

    public ValueTask DisposeAsync() => StopAsync(final: false);

    /// <summary>
    /// The checkpoint thread's loop. A thread of its own, not the thread pool's: a checkpoint blocks in its writes and
    /// fsyncs for as long as they take, and writers that commit in a synchronous loop can keep the pool from running a
    /// timer's work (it injects no thread while the processors are busy), which would starve checkpoints and leave
    /// the journal and the memory behind them to grow. Operators' requests run first at every wake.
    /// </summary>
    private void RunLoop()
    {
        TimeSpan tick = _options.CheckpointInterval == Timeout.InfiniteTimeSpan
            ? TimeSpan.FromMilliseconds(100)
            : TimeSpan.FromMilliseconds(Math.Clamp(_options.CheckpointInterval.TotalMilliseconds / 4, 10, 100));
        TimeSpan restingTick = RestingTick(tick);
        WaitHandle[] wakers = [_stop.Token.WaitHandle, _wake];
        TimeSpan wait = tick;
        long quietSince = Environment.TickCount64;
        long seenSequence = -1;
        try
        {
            // Before the first checkpoint: the id filters of the collections the open found (a pass over their trees
            // when the data file is small enough; see VersionedIndex.BuildIdFilters).
            try
            {
                long started = Stopwatch.GetTimestamp();
                long fileBytes = _pages.FileLength;
                int built = _index.BuildIdFilters(fileBytes, _stop.Token);
                long elapsedMs = (long)Stopwatch.GetElapsedTime(started).TotalMilliseconds;
                if (built > 0)
                {
                    StoreLog.IdFiltersBuilt(_logger, built, fileBytes, elapsedMs);
                }
            }
            catch (Exception error) when (error is not OperationCanceledException)
            {
                StoreLog.IdFiltersFailed(_logger, error);
            }

            int woken;
            while ((woken = WaitHandle.WaitAny(wakers, wait)) != 0)
            {
                Volatile.Write(ref _resting, 0);
                wait = tick;
                if (woken == 1)
                {
                    // A commit or a request woke the loop: what it brings may not be visible yet.
                    quietSince = Environment.TickCount64;
                }

                RunRequests();
                if (IsBehind)
                {
                    UpdateBackpressure(failed: false); // a store that faulted meanwhile lets its writers go
                }

                bool due = IsDue();
                bool compact = IsCompactionDue();
                if (!due && !compact && !_index.HasHeadsMaintenance)
                {
                    long visible = _index.VisibleSequence;
                    if (visible != seenSequence || !_requests.IsEmpty)
                    {
                        seenSequence = visible;
                        quietSince = Environment.TickCount64;
                    }
                    else if (restingTick > tick && Environment.TickCount64 - quietSince >= 1000)
                    {
                        Volatile.Write(ref _resting, 1);
                        wait = restingTick;
                    }

                    continue;
                }

                quietSince = Environment.TickCount64;

                _stop.Token.ThrowIfCancellationRequested(); // a close began: no checkpoint starts now
                try
                {
                    if (due)
                    {
                        // When compaction is due too, this checkpoint also rewrites the sparsest chunks (else a
                        // checkpoint due at every tick would never leave compaction a turn).
                        CheckpointAndUpdateBackpressure(compact ? BackgroundCompaction(moveTail: false) : null);
                    }
                    else if (compact)
                    {
                        // A checkpoint of no new commits that rewrites the sparsest chunks. When a quarter of the file
                        // is free space between chunks (new chunks did not fit the holes), it moves the file's last
                        // chunks into that space instead, so the end can be given back.
                        CompactNow(BackgroundCompaction(moveTail: _pages.FreeBytes > _pages.FileLength / 4));
                        if (_pages.LastCheckpoint.CompactedChunks == 0)
                        {
                            // Nothing could move: wait for the next checkpoint of new commits before trying again.
                            _compactionIdleAt = LastSequence;
                        }
                    }
                    else
                    {
                        _index.EvictCheckpointed(); // keys a snapshot held back, once it is gone; outgrown heads
                    }
                }
                catch (Exception error) when (error is not OperationCanceledException)
                {
                    // The journal still holds everything; the next tick tries again.
                    StoreLog.CheckpointFailed(_logger, error);
                }
            }
        }
        catch (OperationCanceledException) when (_stop.IsCancellationRequested)
        {
        }
        finally
        {
            _loopExited.TrySetResult();
        }
    }

    /// <summary>
    /// Every commit calls this before it is submitted, with its <paramref name="commands"/>: one that passes a multiple
    /// of 32 commands re-checks the backpressure, on the writer's thread (the writers are the ones that grow what it
    /// measures, so no timer is needed; a check another thread is running is skipped).
    /// </summary>
    public void NoteCommit(int commands)
    {
        if (Volatile.Read(ref _resting) != 0)
        {
            WakeFromRest();
        }

        long noted = Interlocked.Add(ref _commandsNoted, commands);
        if (((noted - commands) >> 5) != (noted >> 5) && _backpressureLock.TryEnter())
        {
            try
            {
                UpdateBackpressureLocked(failed: false);
            }
            finally
            {
                _backpressureLock.Exit();
            }
        }
    }

    /// <summary>The loop's tick while it rests: a second, but no longer than a quarter of the checkpoint interval or
    /// a compaction pass interval, and never shorter than its <paramref name="tick"/>.</summary>
    private TimeSpan RestingTick(TimeSpan tick)
    {
        TimeSpan rest = TimeSpan.FromSeconds(1);
        if (_options.CheckpointInterval != Timeout.InfiniteTimeSpan && _options.CheckpointInterval / 4 < rest)
        {
            rest = _options.CheckpointInterval / 4;
        }

        if (_options.CompactionFillRate > 0 && _options.CompactionPassInterval < rest)
        {
            rest = _options.CompactionPassInterval;
        }

        return rest > tick ? rest : tick;
    }

    /// <summary>A commit, while the loop rests: wakes it (once, whichever commit swaps the flag).</summary>
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private void WakeFromRest()
    {
        if (Interlocked.Exchange(ref _resting, 0) != 0)
        {
            SetWake();
        }
    }

    /// <summary>Sets the event the loop waits on (its wake clears <see cref="_resting"/>); a store closed meanwhile
    /// disposed it, and then there is no loop to wake.</summary>
    private void SetWake()
    {
        try
        {
            _wake.Set();
        }
        catch (ObjectDisposedException)
        {
            // closed meanwhile
        }
    }

    /// <summary>Whether the loop rests (tests and diagnostics).</summary>
    internal bool IsResting => Volatile.Read(ref _resting) != 0;

    /// <summary>A checkpoint that purges, then the backpressure state for what it left (on the checkpoint
    /// thread).</summary>
    private long CheckpointAndUpdateBackpressure(CompactionRequest? compaction = null)
    {
        long sequence;
        try
        {
            sequence = CheckpointNow(purge: true, waitForSync: true, compaction);
        }
        catch (Exception error)
        {
            if (error is StoreCorruptedException damage)
            {
                _index.NoteDamage(); // writes read the versions they replace themselves from now on

                // Blocked only by a checkpoint that did not compact too: the damage may lie in a page only the
                // compaction read, and the next checkpoint, without compaction (a pass waits its interval), shows
                // whether checkpoints can go on.
                if (compaction is null)
                {
                    _retryDelay = Math.Clamp(_retryDelay * 2, MinDamageRetryDelay, MaxDamageRetryDelay);
                    _retryAt = Environment.TickCount64 + _retryDelay;
                    Volatile.Write(ref _blockedBy, damage);
                }
            }

            UpdateBackpressure(failed: true);
            throw;
        }

        _retryDelay = 0;
        Volatile.Write(ref _blockedBy, null);
        UpdateBackpressure(failed: false);
        return sequence;
    }

    /// <summary>The first wait before a checkpoint blocked by damage is tried again, in milliseconds.</summary>
    internal const long MinDamageRetryDelay = 1000;

    /// <summary>The longest wait before a checkpoint blocked by damage is tried again, in milliseconds.</summary>
    internal const long MaxDamageRetryDelay = 60_000;

    /// <summary>The damage the last checkpoint failed on, while no checkpoint has succeeded since; else null (see
    /// "Damage" in the protocol).</summary>
    public StoreCorruptedException? BlockedBy => Volatile.Read(ref _blockedBy);

    /// <summary>Throws when checkpoints are blocked by damage and the journal after the last checkpoint, or the
    /// pages the next one would rewrite, passed the backpressure thresholds (any writer, before it submits).</summary>
    public void ThrowIfBlocked()
    {
        if (Volatile.Read(ref _blockedBy) is not null)
        {
            ThrowBlocked();
        }
    }

    /// <summary>The damage checkpoints are blocked by, when writes fail for it (the journal after the last checkpoint,
    /// or the pages the next one would rewrite, passed the backpressure thresholds); else null.</summary>
    public StoreCorruptedException? RefusesWritesFor => Volatile.Read(ref _blockedBy) is { } damage
        && (BytesSinceCheckpoint >= _backpressureThreshold || EstimatedCheckpointBytes >= PagesBackpressure)
        ? damage
        : null;

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private void ThrowBlocked()
    {
        if (RefusesWritesFor is { } damage)
        {
            long bytes = BytesSinceCheckpoint;
            throw new StoreCorruptedException(
                $"{damage.Message}. Checkpoints fail on this damage, and the {bytes} bytes of journal written since " +
                "the last one reached the backpressure threshold: the store refuses writes until it is repaired " +
                "(restore a backup, or salvage it: DocumentStore.SalvageFilesAsync); reads go on.", damage.FilePath,
                damage.Offset);
        }
    }

    /// <summary>Sets or clears the backpressure from the journal after the last checkpoint (see the protocol);
    /// <paramref name="failed"/>: a checkpoint attempt just failed, so waiting writers are let go.</summary>
    private void UpdateBackpressure(bool failed)
    {
        lock (_backpressureLock)
        {
            UpdateBackpressureLocked(failed);
        }
    }

    private void UpdateBackpressureLocked(bool failed)
    {
        long bytes = _journal.IsDisposed ? 0 : BytesSinceCheckpoint;
        long pages = _journal.IsDisposed ? 0 : EstimatedCheckpointBytes;
        if (pages >= _checkpointMemory && Interlocked.Exchange(ref _memoryWake, 1) == 0)
        {
            SetWake(); // the loop checkpoints at its next wake; it may rest a second otherwise
        }

        if ((bytes >= _backpressureThreshold || pages >= PagesBackpressure) && !failed
            && Volatile.Read(ref _stopped) == 0 && !_isFaulted() && Volatile.Read(ref _blockedBy) is null)
        {
            if (_behind == 0)
            {
                _behindSince = Environment.TickCount64;
                Volatile.Write(ref _behind, 1);
                _metrics.BackpressureStarted();
                _behindEpisodes++;
                _behindLogged = _behindSince - _behindLoggedAt >= BackpressureLogInterval || _behindLoggedAt == 0;
                if (_behindLogged)
                {
                    StoreLog.BackpressureStarted(_logger, bytes, _backpressureThreshold, pages, PagesBackpressure,
                        _behindEpisodes);
                    _behindLoggedAt = _behindSince;
                    _behindEpisodes = 0;
                }
            }
        }
        else if (_behind != 0)
        {
            ReleaseWaiters();
            if (_behindLogged)
            {
                StoreLog.BackpressureEnded(_logger, bytes, Environment.TickCount64 - _behindSince);
            }
        }
    }

    /// <summary>Clears the flag, then completes the signal writers wait on (see the protocol).</summary>
    private void ReleaseWaiters()
    {
        Volatile.Write(ref _behind, 0);
        Interlocked.Exchange(ref _caughtUp, NewSignal()).TrySetResult();
    }

    private static TaskCompletionSource NewSignal() => new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>A background compaction pass's request (the loop's thread, which counts it against the pass
    /// interval): at most a second's worth of <see cref="DocumentStoreOptions.CompactionBytesPerSecond"/>, and no
    /// more than fits in free space (background compaction never grows the file); the chunks it empties are freed by
    /// the next checkpoint.</summary>
    private CompactionRequest BackgroundCompaction(bool moveTail)
    {
        _lastCompaction = Environment.TickCount64;
        return new CompactionRequest(_options.CompactionFillRate,
            Math.Min(_options.CompactionBytesPerSecond, _compactionBytes), moveTail, WithinFreeSpace: true);
    }

    /// <summary>Whether background compaction should run now: enabled, the data file's live chunks are less full
    /// than <see cref="DocumentStoreOptions.CompactionFillRate"/> (or chunks compaction emptied wait to be freed),
    /// and a pass interval (a second) passed since the last pass (the loop's thread).</summary>
    private bool IsCompactionDue()
    {
        if (_options.CompactionFillRate <= 0 || _journal.IsDisposed || _compactionIdleAt == LastSequence
            || Environment.TickCount64 - _lastCompaction < (long)_options.CompactionPassInterval.TotalMilliseconds)
        {
            return false;
        }

        CheckpointStatistics last = _pages.LastCheckpoint;
        return last.FillRate < _options.CompactionFillRate || last.CompactedChunks > 0
            || _pages.FreeBytes > _pages.FileLength / 4;
    }

    private bool IsDue()
    {
        long last = Interlocked.Read(ref _lastSequence);
        if (_index.VisibleSequence <= last || _journal.IsDisposed
            || (Volatile.Read(ref _blockedBy) is not null && Environment.TickCount64 < _retryAt))
        {
            return false;
        }

        if (BytesSinceCheckpoint >= _checkpointThreshold || EstimatedCheckpointBytes >= _checkpointMemory)
        {
            return true;
        }

        return _options.CheckpointInterval != Timeout.InfiniteTimeSpan
            && Environment.TickCount64 - Interlocked.Read(ref _lastTimestamp)
                >= (long)_options.CheckpointInterval.TotalMilliseconds;
    }

    /// <summary>
    /// A compaction pass (on the checkpoint thread): a checkpoint at the sequence the data file already covers, with
    /// no new commits, that rewrites what <paramref name="request"/> selects (and frees what earlier passes emptied).
    /// It changes no document and no journal position, so checkpoints of commits keep their own rhythm and the journal
    /// its purges.
    /// </summary>
    private void CompactNow(CompactionRequest request)
    {
        var none = new CheckpointChanges([], CoveredReplayed: false, Evictable: []);
        long started = System.Diagnostics.Stopwatch.GetTimestamp();
        try
        {
            _pages.Checkpoint(Interlocked.Read(ref _lastSequence), none.Collections, compaction: request);
        }
        catch (Exception error)
        {
            _metrics.Failed();
            Volatile.Write(ref _lastFailure, error);
            throw;
        }

        _index.AdvanceCheckpoint(_pages.Pin(), none);
        _metrics.Checkpointed(System.Diagnostics.Stopwatch.GetElapsedTime(started), _pages.LastCheckpoint);
    }

    /// <summary>After a checkpoint of <paramref name="commands"/>: learns what a document costs a checkpoint
    /// (<see cref="BytesPerCommand"/>).</summary>
    private void LearnBytesPerCommand(long commands)
    {
        if (BytesPerCommand(_pages.LastCheckpoint, commands) is long cost)
        {
            Volatile.Write(ref _bytesPerCommand, cost);
        }
    }

    /// <summary>What a document cost the checkpoint <paramref name="last"/> of <paramref name="commands"/> in memory
    /// (twice the bytes of its pages other than compaction's, over its documents), within a quarter of a page's cost
    /// and a page's (<see cref="PageBytesPerCommand"/>); null when it wrote no document or no page.</summary>
    internal static long? BytesPerCommand(CheckpointStatistics last, long commands)
    {
        if (commands <= 0 || last.Pages <= 0)
        {
            return null;
        }

        double written = (double)last.Bytes * (last.Pages - last.RewrittenPages) / last.Pages;
        long cost = (long)Math.Min(2 * written / commands, PageBytesPerCommand);
        return Math.Max(PageBytesPerCommand / 4, cost);
    }

    /// <summary>One checkpoint, on the checkpoint thread (or at the close, after it exited), which may block in
    /// fsyncs; with <paramref name="purge"/>, the journal's sealed segments it covers are removed after it. The data
    /// file must never be ahead of the journal: with <paramref name="waitForSync"/> it waits (up to a second past the
    /// buffered-sync interval) for the journal to make the snapshot durable, else it skips a snapshot that is not (at
    /// a close, the merger has already synced whatever it could). With <paramref name="compaction"/>, it also
    /// rewrites the chunks the request selects, in a pass of its own when there are no commits to checkpoint.</summary>
    private long CheckpointNow(bool purge, bool waitForSync, CompactionRequest? compaction = null)
    {
        using IndexSnapshot snapshot = _index.OpenSnapshot();
        long sequence = snapshot.Sequence;
        long appendedBytes = _journal.AppendedBytes; // at least every record up to the snapshot's sequence
        long commands = Interlocked.Read(ref _commandsNoted); // noted before submission: every commit it covers
        long deadline = Environment.TickCount64 + 1000 + (long)_options.BufferedSyncInterval.TotalMilliseconds;
        while (_journal.DurableSequence < sequence)
        {
            if (!waitForSync || Environment.TickCount64 > deadline || _journal.IsDisposed)
            {
                return _lastSequence;
            }

            Thread.Sleep(1);
        }

        if (sequence > _lastSequence)
        {
            CheckpointChanges changes = _index.CollectChanges(sequence, _lastSequence);
            long started = System.Diagnostics.Stopwatch.GetTimestamp();
            try
            {
                // The chains were read under the snapshot; had it outlived MaxSnapshotAge meanwhile, a prune may have
                // cut what the reads needed: then this checkpoint is abandoned (the heads stay) and retried.
                snapshot.ThrowIfExpired();
                for (int attempt = 1; ; attempt++)
                {
                    try
                    {
                        CheckpointInSlices(sequence, changes, compaction);
                        break;
                    }
                    catch (StoreCorruptedException) when (attempt < 4 && _pages.TakeNearlyEmptiedFailure())
                    {
                        // A damaged page in a chunk the checkpoint chose to empty, not in what it had to write: the
                        // page store leaves that chunk alone now, so the same changes, collected again, can land.
                        changes = _index.CollectChanges(sequence, _lastSequence);
                    }
                }
            }
            catch (Exception error)
            {
                _metrics.Failed(); // nothing is evicted: the next checkpoint takes the same heads again
                if (error is not SnapshotExpiredException)
                {
                    Volatile.Write(ref _lastFailure, error); // an expired snapshot is retried, not a failing store
                }

                throw;
            }

            _index.ChangesCheckpointed(changes);
            // Reads move to the new trees and the heads they cover leave memory (the index owns this pin).
            _index.AdvanceCheckpoint(_pages.Pin(), changes);
            _metrics.Checkpointed(System.Diagnostics.Stopwatch.GetElapsedTime(started), _pages.LastCheckpoint);
            Interlocked.Exchange(ref _bytesAtCheckpoint, appendedBytes);
            LearnBytesPerCommand(commands - Interlocked.Exchange(ref _commandsAtCheckpoint, commands));
            Volatile.Write(ref _memoryWake, 0);
            Interlocked.Exchange(ref _lastSequence, sequence);
        }
        else if (compaction is { } request)
        {
            // The commits were checkpointed already (the commits' own checkpoint ran first): the compaction asked
            // for still runs, as a pass of its own.
            CompactNow(request);
        }
        else
        {
            _index.EvictCheckpointed(); // keys a snapshot held back at the last checkpoint
        }

        if (purge)
        {
            try
            {
                using JournalRetention? followers = HoldForFollowers();
                _journal.Purge(_lastSequence + 1);
            }
            catch (Exception error)
            {
                Volatile.Write(ref _lastFailure, error); // the data file has the commits, the journal still holds them
                throw;
            }
        }

        Volatile.Write(ref _lastFailure, null);
        Interlocked.Exchange(ref _lastTimestamp, Environment.TickCount64);
        return sequence;
    }

    /// <summary>
    /// Writes the checkpoint at <paramref name="sequence"/> of <paramref name="changes"/>: whole, or in slices
    /// (<see cref="CheckpointSlicer"/>) when it would supersede more than a slice's share of the live pages. Every
    /// slice but the last is a checkpoint at the sequence already durable whose trees are ahead for the ids it covered
    /// (<see cref="CheckpointPass"/>); the index moves to each (its heads keep every change until the last slice, so
    /// reads answer as before, see <see cref="VersionedIndex"/>), and the next slice frees the pages it replaced.
    /// A failure between slices leaves such a checkpoint current: the journal after its sequence, still held, makes
    /// it complete at the open, and the next checkpoint, written whole, settles it.
    /// </summary>
    private void CheckpointInSlices(long sequence, CheckpointChanges changes, CompactionRequest? compaction)
    {
        PageCheckpoint current = _pages.Current;
        List<CheckpointSlicer.Slice>? slices = null;
        if (_options.CheckpointSlices > 1 && !current.IsPartial)
        {
            try
            {
                slices = CheckpointSlicer.Cut(changes.Collections,
                    collection => _pages.EstimateSupersededBytes(collection, CheckpointSlicer.SampleSize),
                    Math.Max(_options.MinCheckpointSliceBytes, _pages.LiveBytes / _options.CheckpointSlices));
            }
            catch (StoreCorruptedException)
            {
                // A damaged branch the estimate read: the checkpoint goes whole, and meets the damage only if it
                // must read that page to write its changes.
                slices = null;
            }
        }

        if (slices is null)
        {
            _pages.Checkpoint(sequence, changes.Collections, compaction: compaction);
            return;
        }

        foreach (CollectionChanges collection in changes.Collections)
        {
            collection.Applied(); // the slices hold the changes now, each in its own object; the hashes stay
        }

        long durable = current.Sequence;
        for (int i = 0; i < slices.Count - 1; i++)
        {
            if (i > 0)
            {
                _options.TestBeforeSlice?.Invoke(i, slices.Count);
            }

            _pages.Checkpoint(durable, slices[i].Changes, pass: new CheckpointPass(sequence, slices[i].Ahead));
            _index.AdvanceCheckpoint(_pages.Pin(), new CheckpointChanges(slices[i].Changes, false, []));
        }

        _options.TestBeforeSlice?.Invoke(slices.Count - 1, slices.Count);
        _pages.Checkpoint(sequence, slices[^1].Changes, compaction: compaction);
    }

    /// <summary>
    /// A hold on the journal from the oldest position the change-feed readers in other processes pinned
    /// (<see cref="FeedPin"/>), bounded as a stream's own (<see cref="DocumentStoreOptions.MaxChangeFeedLag"/>), for
    /// the purge that follows; null when there is none, the option is 0, or the pins cannot be read (logged).
    /// </summary>
    private JournalRetention? HoldForFollowers()
    {
        if (_options.MaxChangeFeedLag == 0 || _pages.PinFolder is not { } folder)
        {
            return null;
        }

        long? oldest;
        try
        {
            oldest = FeedPin.OldestLive(_options.FileSystem, folder);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            StoreLog.FeedPinsUnreadable(_logger, e, folder);
            return null;
        }

        if (oldest is not long from)
        {
            return null;
        }

        try
        {
            return _journal.Retain(from, _options.MaxChangeFeedLag);
        }
        catch (JournalPositionPurgedException)
        {
            return null; // purged past it already: the reader fails when it reaches the gap
        }
    }

    /// <summary>
    /// An operator's request for the checkpoint thread. Its state goes from pending to started (the thread, which
    /// then runs it and completes it with its result or exception) or to cancelled (the caller's token, or a stop
    /// that fails it), by one compare-and-swap, so exactly one of them completes it.
    /// </summary>
    private abstract class OperatorRequest
    {
        private const int Pending = 0;
        private const int Started = 1;
        private const int Abandoned = 2;
        private int _state;

        public bool TryStart() => Interlocked.CompareExchange(ref _state, Started, Pending) == Pending;

        public void TryCancel(CancellationToken token)
        {
            if (Interlocked.CompareExchange(ref _state, Abandoned, Pending) == Pending)
            {
                SetCanceled(token);
            }
        }

        public void TryFail(Exception error)
        {
            if (Interlocked.CompareExchange(ref _state, Abandoned, Pending) == Pending)
            {
                SetException(error);
            }
        }

        /// <summary>Runs the work and completes the request (after <see cref="TryStart"/>).</summary>
        public abstract void Run();

        protected abstract void SetCanceled(CancellationToken token);

        protected abstract void SetException(Exception error);
    }

    private sealed class OperatorRequest<T>(Func<T> work) : OperatorRequest
    {
        private readonly TaskCompletionSource<T> _completion = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public Task<T> Completion => _completion.Task;

        public override void Run()
        {
            T result;
            try
            {
                result = work();
            }
            catch (Exception error)
            {
                _completion.SetException(error);
                return;
            }

            _completion.SetResult(result);
        }

        protected override void SetCanceled(CancellationToken token) => _completion.SetCanceled(token);

        protected override void SetException(Exception error) => _completion.SetException(error);
    }
}
