using Folio.Diagnostics;
using Folio.Journal;
using Folio.Pages;
using Microsoft.Extensions.Logging;

namespace Folio.Documents;

/// <summary>
/// Writes a document store's checkpoints: the committed state up to a sequence C goes into the data file
/// (<see cref="PageStore"/>), and then the journal segments wholly at or below C are purged.
/// <para>
/// Owners. One checkpoint at a time (<see cref="_gate"/>): from the background loop (when the journal after the last
/// checkpoint passes <see cref="DocumentStoreOptions.CheckpointThreshold"/>, or
/// <see cref="DocumentStoreOptions.CheckpointInterval"/> passed with commits since), from
/// <see cref="DocumentStore.CheckpointAsync"/>, or at a clean close. <see cref="_lastSequence"/> is written under the
/// gate only (interlocked, so the loop's check may read it outside). A checkpoint registers a snapshot at C, so the
/// versions it reads are not pruned while commits continue; it covers only commits the journal already made durable
/// (a buffered commit is visible before its fsync: the checkpoint waits for the buffered sync), so the data file is
/// never ahead of the journal, and the journal is purged only once the data file's header naming C is durable. The
/// close's checkpoint does not purge: the journal keeps its segments (for change-feed readers that resume after a
/// restart) until a checkpoint of a running store covers them.
/// </para>
/// </summary>
internal sealed class StoreCheckpointer : IAsyncDisposable
{
    private readonly PageStore _pages;
    private readonly WriteAheadJournal _journal;
    private readonly VersionedIndex _index;
    private readonly DocumentStoreOptions _options;
    private readonly ILogger _logger;
    private readonly SemaphoreSlim _gate = new(1, 1);
    private readonly CancellationTokenSource _stop = new();
    private readonly Task _loop;
    private readonly CheckpointMetrics _metrics;
    private long _lastSequence;
    private long _lastTimestamp;
    private int _stopped;

    public StoreCheckpointer(PageStore pages, WriteAheadJournal journal, VersionedIndex index,
        DocumentStoreOptions options, ILogger logger)
    {
        _pages = pages;
        _journal = journal;
        _index = index;
        _options = options;
        _logger = logger;
        _lastSequence = pages.Current.Sequence;
        _lastTimestamp = Environment.TickCount64;
        _metrics = new CheckpointMetrics(options.MeterFactory,
            () => _journal.IsDisposed ? 0 : _journal.BytesInSegmentsAfter(LastSequence),
            () => _pages.ChunkCount, () => _pages.LastCheckpoint.FillRate);
        _loop = Task.Run(RunLoopAsync);
    }

    /// <summary>The sequence the newest checkpoint covers.</summary>
    public long LastSequence => Interlocked.Read(ref _lastSequence);

    /// <summary>Checkpoints everything durable and visible now; returns the sequence the data file covers.</summary>
    public async Task<long> CheckpointAsync(CancellationToken cancellationToken)
    {
        await _gate.WaitAsync(cancellationToken).ConfigureAwait(false);
        try
        {
            return await Task.Run(() => CheckpointNow(purge: true, waitForSync: true), CancellationToken.None)
                .ConfigureAwait(false);
        }
        finally
        {
            _gate.Release();
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
        await _loop.ConfigureAwait(false);
        await _gate.WaitAsync().ConfigureAwait(false);
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
            _gate.Release();
            _metrics.Dispose();
            _stop.Dispose();
        }
    }

    public ValueTask DisposeAsync() => StopAsync(final: false);

    private async Task RunLoopAsync()
    {
        TimeSpan tick = _options.CheckpointInterval == Timeout.InfiniteTimeSpan
            ? TimeSpan.FromMilliseconds(100)
            : TimeSpan.FromMilliseconds(Math.Clamp(_options.CheckpointInterval.TotalMilliseconds / 4, 10, 100));
        using var timer = new PeriodicTimer(tick);
        try
        {
            while (await timer.WaitForNextTickAsync(_stop.Token).ConfigureAwait(false))
            {
                if (!IsDue())
                {
                    continue;
                }

                await _gate.WaitAsync(_stop.Token).ConfigureAwait(false);
                try
                {
                    CheckpointNow(purge: true, waitForSync: true);
                }
                catch (Exception error) when (error is IOException or FolioException or UnauthorizedAccessException)
                {
                    // The journal still holds everything; the next tick tries again.
                    StoreLog.CheckpointFailed(_logger, error);
                }
                finally
                {
                    _gate.Release();
                }
            }
        }
        catch (OperationCanceledException) when (_stop.IsCancellationRequested)
        {
        }
    }

    private bool IsDue()
    {
        long last = Interlocked.Read(ref _lastSequence);
        if (_index.VisibleSequence <= last || _journal.IsDisposed)
        {
            return false;
        }

        if (_journal.BytesInSegmentsAfter(last) >= _options.CheckpointThreshold)
        {
            return true;
        }

        return _options.CheckpointInterval != Timeout.InfiniteTimeSpan
            && Environment.TickCount64 - Interlocked.Read(ref _lastTimestamp)
                >= (long)_options.CheckpointInterval.TotalMilliseconds;
    }

    /// <summary>One checkpoint, under the gate, on a thread that may block (fsyncs); with <paramref name="purge"/>,
    /// the journal's sealed segments it covers are removed after it. The data file must never be ahead of the
    /// journal: with <paramref name="waitForSync"/> it waits (up to a second past the buffered-sync interval) for the
    /// journal to make the snapshot durable, else it skips a snapshot that is not (at a close, the merger has already
    /// synced whatever it could).</summary>
    private long CheckpointNow(bool purge, bool waitForSync)
    {
        using IndexSnapshot snapshot = _index.OpenSnapshot();
        long sequence = snapshot.Sequence;
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
                // cut what the reads needed: then this checkpoint is abandoned (its keys go back) and retried.
                snapshot.ThrowIfExpired();
                _pages.Checkpoint(sequence, changes.Collections);
            }
            catch
            {
                _index.ChangesFailed(changes);
                _metrics.Failed();
                throw;
            }

            _index.ChangesCheckpointed(changes);
            CheckpointStatistics statistics = _pages.LastCheckpoint;
            _metrics.Checkpointed(System.Diagnostics.Stopwatch.GetElapsedTime(started), statistics.Bytes,
                statistics.Pages);
            Interlocked.Exchange(ref _lastSequence, sequence);
        }

        if (purge)
        {
            _journal.Purge(_lastSequence + 1);
        }

        Interlocked.Exchange(ref _lastTimestamp, Environment.TickCount64);
        return sequence;
    }
}
