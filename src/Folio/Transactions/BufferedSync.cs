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
/// </summary>
internal sealed class BufferedSync : IAsyncDisposable, IDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly GroupCommitter _committer;
    private readonly CommitPipeline _pipeline;
    private readonly CommitFault _fault;
    private readonly SyncStatistics _syncs;
    private readonly Timer _timer;
    private int _running;
    private bool _stopped;

    public BufferedSync(WriteAheadJournal journal, GroupCommitter committer, CommitPipeline pipeline, CommitFault fault,
        SyncStatistics syncs, TimeSpan interval)
    {
        _journal = journal;
        _committer = committer;
        _pipeline = pipeline;
        _fault = fault;
        _syncs = syncs;
        _timer = new Timer(static self => ((BufferedSync)self!).OnTick(), this, interval, interval);
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
            SyncBuffered();
            if (!Volatile.Read(ref _stopped) && !_fault.IsFaulted)
            {
                _journal.MarkDurableIfIdle();
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

    private void SyncBuffered()
    {
        if (Volatile.Read(ref _stopped) || _fault.IsFaulted
            || _journal.CommittedSequence >= _committer.BufferedAcknowledged)
        {
            return;
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

            return;
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
    }
}
