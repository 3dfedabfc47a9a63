using System.Diagnostics;
using Folio.Journal;

namespace Folio.Transactions;

/// <summary>
/// The buffered-mode timer: every <see cref="TransactionMergerOptions.BufferedSyncInterval"/> it fsyncs the journal
/// when a group was acknowledged before its fsync and is still not durable, publishes the applied groups that sync
/// covers (never a group still in flight: the pipeline owns publication), and lets an idle journal record its durable
/// mark. Durable groups are synced by the committer, so in a store whose commits are all durable the timer never syncs.
/// <para>
/// Owners. The timer's callback, one at a time: a timer does not wait for its previous callback, and each sync in
/// flight holds one of the segment's sync slots (counted for
/// <see cref="TransactionMergerOptions.MaxMaxGroupsInFlight"/> groups, one rotation and one timer sync), so a tick
/// that finds the previous one still running (<see cref="_running"/>, an interlocked flag) does nothing.
/// <see cref="DisposeAsync"/> sets <see cref="_stopped"/> (Volatile) and then waits for a running callback to end.
/// </para>
/// <para>
/// Resting. An idle store needs no tick every interval (each one wakes the thread pool, which spins before it sleeps
/// again), so after a second of ticks that found nothing buffered to sync the timer rests: it ticks once a second (the
/// idle durable mark's own interval) until the committer acknowledges a buffered group and calls <see cref="Wake"/>.
/// The two sides are a store-then-load pair each: the tick sets <see cref="_resting"/> and then reads the committer's
/// <see cref="GroupCommitter.BufferedAcknowledged"/> again; the committer writes that mark and then swaps
/// <see cref="_resting"/> back; both with interlocked operations (full fences), so one of them sees the other and no
/// buffered group waits for a resting tick. The period itself is set only under <see cref="_period"/>'s lock, from
/// <see cref="_resting"/> as read inside it, so the last change wins with the latest state.
/// </para>
/// </summary>
internal sealed class BufferedSync : IAsyncDisposable, IDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly GroupCommitter _committer;
    private readonly CommitPipeline _pipeline;
    private readonly CommitFault _fault;
    private readonly SyncStatistics _syncs;
    private readonly Timer _timer;
    private readonly TimeSpan _interval;
    private readonly TimeSpan _restingInterval;
    private readonly Lock _period = new();
    private int _running;
    private bool _stopped;
    private int _resting; // 1 while the timer ticks at _restingInterval (see the protocol)
    private int _idleTicks; // the callback's: ticks in a row that found nothing buffered

    /// <summary>The period of a resting timer: a second, the idle durable mark's interval.</summary>
    internal static readonly TimeSpan RestingInterval = TimeSpan.FromSeconds(1);

    public BufferedSync(WriteAheadJournal journal, GroupCommitter committer, CommitPipeline pipeline, CommitFault fault,
        SyncStatistics syncs, TimeSpan interval)
    {
        _journal = journal;
        _committer = committer;
        _pipeline = pipeline;
        _fault = fault;
        _syncs = syncs;
        _interval = interval;
        _restingInterval = interval < RestingInterval ? RestingInterval : interval;
        _timer = new Timer(static self => ((BufferedSync)self!).OnTick(), this, interval, interval);
    }

    /// <summary>Whether the timer rests (tests and diagnostics).</summary>
    internal bool IsResting => Volatile.Read(ref _resting) != 0;

    /// <summary>
    /// The committer, after it acknowledged a buffered group (after writing
    /// <see cref="GroupCommitter.BufferedAcknowledged"/>): puts a resting timer back on its interval.
    /// </summary>
    public void Wake()
    {
        if (Interlocked.CompareExchange(ref _resting, 0, 1) == 1)
        {
            SetPeriod();
        }
    }

    /// <summary>Stops the timer without waiting for a callback in progress.</summary>
    public void Dispose()
    {
        Volatile.Write(ref _stopped, true);
        _timer.Dispose();
    }

    /// <summary>Stops the timer and waits until a callback in progress ends.</summary>
    public ValueTask DisposeAsync()
    {
        Volatile.Write(ref _stopped, true);
        return _timer.DisposeAsync();
    }

    private void OnTick()
    {
        if (Interlocked.Exchange(ref _running, 1) != 0)
        {
            return;
        }

        try
        {
            bool idle = SyncBuffered();
            if (!Volatile.Read(ref _stopped) && !_fault.IsFaulted)
            {
                _journal.MarkDurableIfIdle();
                RestIfIdle(idle);
            }
        }
        catch (ObjectDisposedException)
        {
        }
        finally
        {
            Volatile.Write(ref _running, 0);
        }
    }

    /// <summary>The callback: after ticks that found nothing buffered for a second, rests (see the protocol).</summary>
    private void RestIfIdle(bool idle)
    {
        _idleTicks = idle ? _idleTicks + 1 : 0;
        if (_restingInterval == _interval || Volatile.Read(ref _resting) != 0
            || _idleTicks * _interval.Ticks < RestingInterval.Ticks)
        {
            return;
        }

        Interlocked.Exchange(ref _resting, 1);
        if (_journal.CommittedSequence < _committer.BufferedAcknowledged)
        {
            // A buffered group came in meanwhile: stay on the interval, unless its committer's Wake already undid
            // the rest.
            Interlocked.Exchange(ref _resting, 0);
            return;
        }

        SetPeriod();
    }

    /// <summary>Sets the timer's period from <see cref="_resting"/> as it is now.</summary>
    private void SetPeriod()
    {
        lock (_period)
        {
            TimeSpan period = Volatile.Read(ref _resting) != 0 ? _restingInterval : _interval;
            try
            {
                _timer.Change(period, period);
            }
            catch (ObjectDisposedException)
            {
                // closing
            }
        }
    }

    /// <summary>Syncs what buffered groups wrote; returns true when there was nothing to sync.</summary>
    private bool SyncBuffered()
    {
        if (Volatile.Read(ref _stopped) || _fault.IsFaulted)
        {
            return false;
        }

        if (_journal.CommittedSequence >= _committer.BufferedAcknowledged)
        {
            return true;
        }

        TimeSpan elapsed = TimeSpan.Zero;
        bool synced;
        try
        {
            long started = Stopwatch.GetTimestamp();
            synced = _journal.TryBeginSync(out JournalSyncPoint point);
            if (synced)
            {
                _journal.CompleteSync(point);
                elapsed = Stopwatch.GetElapsedTime(started);
            }

            _pipeline.PublishDurable();
        }
        catch (Exception e) when (e is StoreFaultedException or ObjectDisposedException)
        {
            if (e is StoreFaultedException)
            {
                _fault.Set(e.InnerException ?? e);
            }

            return false;
        }

        try
        {
            if (synced)
            {
                _syncs.Record(elapsed);
            }
        }
        catch (Exception e)
        {
            // as in the committer: an unexpected failure faults the store (an exception here would end the process)
            _fault.Set(e);
        }

        return false;
    }
}
