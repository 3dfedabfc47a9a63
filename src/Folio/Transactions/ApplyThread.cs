using System.Diagnostics;

namespace Folio.Transactions;

/// <summary>
/// A dedicated thread that applies a large commit group to the state while the committer runs the group's fdatasync
/// on its own thread, so the CPU work of applying overlaps the disk's flush instead of following it.
/// <para>
/// Why this way round. Waking a sleeping thread costs its waker tens of microseconds on a virtual machine (the
/// wake-up of an idle virtual processor), and so does being woken. The thread that waits for the disk is on the
/// commit's critical path twice per group if the sync is handed off (woken to sync, then waking the committer after
/// it); the apply is not: it is started before the sync, finishes within it, and the committer finds it done.
/// </para>
/// <para>
/// Protocol. One owner: the committer finishing a group (one group at a time: the merger uses this only with one group
/// in flight). It calls <see cref="Start"/> with the group, runs the group's fsync, then <see cref="Wait"/>; it never
/// starts a second group before waiting for the first. The thread owns the group's apply from <see cref="Start"/>
/// until it sets <see cref="_completed"/>. The committer writes <see cref="_group"/> before
/// <see cref="ManualResetEventSlim.Set"/> of <see cref="_requested"/>, and the thread writes the state and the group's
/// apply outcome before Set of <see cref="_completed"/>; Set is an interlocked write and the other side reads the set
/// state before it reads those fields, so each side sees the other's writes after a full fence. The apply callback
/// keeps every failure on the group (<see cref="InFlightGroup.ApplyFailure"/>), and <see cref="_completed"/> is set
/// on every path, so the committer is never left waiting. <see cref="Dispose"/> (after the merger's drain, when no
/// group is in flight) stops the thread and joins it.
/// </para>
/// </summary>
internal sealed class ApplyThread : IDisposable
{
    /// <summary>The thread's name, which tests refuse to start (<see cref="DedicatedThread.Refuse"/>).</summary>
    public const string ThreadName = "Folio group apply";

    /// <summary>How long <see cref="Wait"/> spins (yielding its processor to any thread that is ready) before it
    /// sleeps: 1 ms, in Stopwatch ticks, about the apply of 600 single-document batches. The apply started before the
    /// fsync did and is running, so the wait is short, and a committer that slept would pay a wake-up on top of it
    /// (the largest groups apply for longer than a fast disk's fsync takes).</summary>
    private static readonly long s_spinTicks = Stopwatch.Frequency / 1_000;

    private readonly Action<InFlightGroup> _apply;
    private readonly Thread _thread;
    private readonly ManualResetEventSlim _requested = new(false, spinCount: 1);
    private readonly ManualResetEventSlim _completed = new(false, spinCount: 1);
    private InFlightGroup? _group;
    private bool _stopping;

    /// <summary>Starts the thread; <paramref name="apply"/> applies a group and keeps any failure on it.</summary>
    /// <exception cref="OutOfMemoryException">The process cannot create the thread.</exception>
    public ApplyThread(Action<InFlightGroup> apply)
    {
        _apply = apply;
        _thread = DedicatedThread.Start(Run, ThreadName);
    }

    /// <summary>Hands <paramref name="group"/>'s apply to the thread (committer only; the previous one was waited
    /// for).</summary>
    public void Start(InFlightGroup group)
    {
        _group = group;
        _completed.Reset();
        _requested.Set();
    }

    /// <summary>Waits until the group started last is applied (its outcome is on the group).</summary>
    public void Wait()
    {
        if (_completed.IsSet)
        {
            return;
        }

        long deadline = Stopwatch.GetTimestamp() + s_spinTicks;
        var spin = new SpinWait();
        while (!_completed.IsSet && Stopwatch.GetTimestamp() < deadline)
        {
            spin.SpinOnce(sleep1Threshold: -1);
        }

        _completed.Wait();
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

            try
            {
                _apply(_group!);
            }
            finally
            {
                _group = null;
                _completed.Set();
            }
        }
    }

    /// <summary>Stops the thread (no group may be in flight) and waits for it to end.</summary>
    public void Dispose()
    {
        Volatile.Write(ref _stopping, true);
        _requested.Set();
        _thread.Join();
        _requested.Dispose();
        _completed.Dispose();
    }
}
