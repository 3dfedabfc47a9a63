using System.Diagnostics;
using Folio.Journal;

namespace Folio.Transactions;

/// <summary>
/// A dedicated thread that runs a commit group's fdatasync while the committer applies the group to the state, so the
/// CPU work of applying overlaps the disk's flush instead of following it.
/// <para>
/// Protocol. One owner: the committer finishing a group (one group at a time: the merger uses this only with one group
/// in flight). It calls <see cref="Start"/> with the group's sync point, does its own work, then <see cref="Wait"/>,
/// which returns the sync's outcome; it never starts a second sync before waiting for the first. The thread owns the
/// request from <see cref="Start"/> until it signals completion. The request fields are written by the committer before
/// <see cref="ManualResetEventSlim.Set"/> of <see cref="_requested"/> and the result fields by the thread before Set of
/// <see cref="_completed"/>; Set is an interlocked write and Wait returns after reading the set state, so each side
/// reads the other's plain fields after a full fence. <see cref="Dispose"/> (after the merger's drain, when no group is
/// in flight) stops the thread and joins it.
/// </para>
/// </summary>
internal sealed class SyncThread : IDisposable
{
    private readonly WriteAheadJournal _journal;
    private readonly Thread _thread;
    private readonly ManualResetEventSlim _requested = new(false, spinCount: 1);
    private readonly ManualResetEventSlim _completed = new(false);
    private JournalSyncPoint _point;
    private Exception? _failure;
    private TimeSpan _elapsed;
    private bool _stopping;

    public SyncThread(WriteAheadJournal journal)
    {
        _journal = journal;
        _thread = DedicatedThread.Start(Run, "Folio group sync");
    }

    /// <summary>Hands <paramref name="point"/>'s fdatasync to the thread (committer only; the previous one was waited
    /// for).</summary>
    public void Start(in JournalSyncPoint point)
    {
        _point = point;
        _failure = null;
        _completed.Reset();
        _requested.Set();
    }

    /// <summary>Waits for the sync started last; returns its failure (null when it succeeded) and its
    /// duration.</summary>
    public Exception? Wait(out TimeSpan elapsed)
    {
        _completed.Wait();
        elapsed = _elapsed;
        return _failure;
    }

    private void Run()
    {
        while (true)
        {
            _requested.Wait();
            _requested.Reset();
            if (Volatile.Read(ref _stopping))
            {
                return;
            }

            long started = Stopwatch.GetTimestamp();
            try
            {
                _journal.CompleteSync(_point);
            }
#pragma warning disable CA1031 // any failure is the group's: the committer fails the group with it
            catch (Exception e)
#pragma warning restore CA1031
            {
                _failure = e;
            }

            _elapsed = Stopwatch.GetElapsedTime(started);
            _completed.Set();
        }
    }

    /// <summary>Stops the thread (no sync may be in flight) and waits for it to end.</summary>
    public void Dispose()
    {
        Volatile.Write(ref _stopping, true);
        _requested.Set();
        _thread.Join();
        _requested.Dispose();
        _completed.Dispose();
    }
}
