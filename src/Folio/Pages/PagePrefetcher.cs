using System.Diagnostics;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>Reads one prefetch request's pages into the cache (<see cref="PageCache"/>), calling
/// <paramref name="shouldStop"/> before each read; returns how many pages it left unread.</summary>
internal delegate int PrefetchReader(PagePosition[] pages, Func<bool> shouldStop);

/// <summary>
/// The one background worker that reads pages ahead of range cursors (seed 004's prefetch executor): a dedicated
/// thread at the lowest scheduling priority the process may set, fed by a small bounded queue that drops its oldest
/// request when full, and that yields to writes.
/// <para>
/// Protocol. Cursors (any thread) call <see cref="Request"/>: it enqueues under <see cref="_gate"/> and returns at
/// once; when the queue holds <see cref="QueueCapacity"/> requests the oldest is dropped (the cursor that made it has
/// most likely read past it), and its pages count as dropped. The worker, started by the first request (when the
/// process cannot create it, the queue is dropped and a later request tries again), takes requests under the gate and
/// reads with no lock held. Before each page read it asks <see cref="ShouldYield"/>:
/// while a checkpoint is writing its chunk (<see cref="WritePriority"/>, set by the checkpoint's thread around its
/// writes and fsyncs, a volatile flag), or while commits are in the journal's write path
/// (<see cref="YieldToCommits"/>), the rest of the request is dropped, so a started prefetch aborts and the disk
/// serves the write. Foreground reads never wait for this worker: they pin through the buffer pool as always, and the
/// only wait is for a page the worker is reading at that moment (the pool's loading gate), whose I/O is already under
/// way. <see cref="Dispose"/> stops the worker and waits for its read in progress, so the pool's frames outlive every
/// write into them.
/// </para>
/// </summary>
internal sealed class PagePrefetcher : IDisposable
{
    /// <summary>Requests the queue holds before it drops the oldest.</summary>
    public const int QueueCapacity = 4;

    private readonly object _gate = new();
    private readonly Queue<PagePosition[]> _queue = new(QueueCapacity);
    private readonly PrefetchReader _reader;
    private readonly Action<int> _dropped;
    private readonly Func<bool> _shouldYield;
    private Func<bool>? _commitsBusy;
    private Thread? _thread;
    private bool _stopping;
    private bool _busy;
    private int _writePriority;
    private long _droppedPages;
    private long _requests;

    /// <summary>A worker that reads with <paramref name="reader"/> and reports pages it drops to
    /// <paramref name="dropped"/>.</summary>
    public PagePrefetcher(PrefetchReader reader, Action<int> dropped)
    {
        _reader = reader;
        _dropped = dropped;
        _shouldYield = () => ShouldYield;
    }

    /// <summary>Set while a checkpoint writes (its thread): prefetch reads stop until it is cleared.</summary>
    public bool WritePriority
    {
        get => Volatile.Read(ref _writePriority) != 0;
        set => Volatile.Write(ref _writePriority, value ? 1 : 0);
    }

    /// <summary>Whether the worker must abandon the request it is reading: a checkpoint writes, commits are being
    /// written or synced (<see cref="YieldToCommits"/>), or it is stopping.</summary>
    public bool ShouldYield => Volatile.Read(ref _writePriority) != 0 || Volatile.Read(ref _stopping)
        || (Volatile.Read(ref _commitsBusy) is { } busy && busy());

    /// <summary>Makes the worker yield, like it does to a checkpoint, whenever <paramref name="commitsBusy"/> says
    /// commits are being written or synced (seed 004's write-priority gate: read-ahead I/O queued beside a commit's
    /// fsync slows every writer waiting for it). Set once, by the store that owns the cache.</summary>
    public void YieldToCommits(Func<bool> commitsBusy) => Volatile.Write(ref _commitsBusy, commitsBusy);

    /// <summary>Pages asked for and never read: dropped from a full queue, abandoned for a write, or left without a
    /// frame.</summary>
    public long DroppedPages => Interlocked.Read(ref _droppedPages);

    /// <summary>Requests waiting in the queue now (tests).</summary>
    public int Queued
    {
        get
        {
            lock (_gate)
            {
                return _queue.Count;
            }
        }
    }

    /// <summary>Requests accepted into the queue.</summary>
    public long Requests => Interlocked.Read(ref _requests);

    /// <summary>Queues <paramref name="pages"/> (in the order they should be read) and returns at once.</summary>
    public void Request(PagePosition[] pages)
    {
        int dropped = 0;
        lock (_gate)
        {
            if (_stopping)
            {
                return;
            }

            if (_queue.Count == QueueCapacity)
            {
                dropped = _queue.Dequeue().Length;
            }

            _queue.Enqueue(pages);
            Interlocked.Increment(ref _requests);
            if (_thread is not null || TryStartWorker())
            {
                Monitor.Pulse(_gate);
            }
            else
            {
                // No thread to be had: prefetch is only a speed-up, so the queue is dropped and the next request
                // tries again.
                while (_queue.TryDequeue(out PagePosition[]? unread))
                {
                    dropped += unread.Length;
                }
            }
        }

        if (dropped > 0)
        {
            Dropped(dropped);
        }
    }

    /// <summary>Waits until the queue is empty and the worker idle (tests), up to <paramref name="timeout"/>; true when
    /// it got there.</summary>
    public bool WaitIdle(TimeSpan timeout)
    {
        long deadline = Stopwatch.GetTimestamp() + (long)(timeout.TotalSeconds * Stopwatch.Frequency);
        lock (_gate)
        {
            while (_queue.Count > 0 || _busy)
            {
                int left = (int)((deadline - Stopwatch.GetTimestamp()) * 1000 / Stopwatch.Frequency);
                if (left <= 0)
                {
                    return false;
                }

                Monitor.Wait(_gate, Math.Min(left, 50));
            }
        }

        return true;
    }

    /// <summary>Stops the worker: queued requests are dropped, the read in progress is abandoned at its next page, and
    /// the call returns once the worker has exited. Idempotent.</summary>
    public void Dispose()
    {
        Thread? worker;
        lock (_gate)
        {
            if (_stopping)
            {
                return;
            }

            _stopping = true;
            _queue.Clear();
            worker = _thread;
            Monitor.PulseAll(_gate);
        }

        if (worker is not null && worker != Thread.CurrentThread)
        {
            worker.Join();
        }
    }

    /// <summary>Under the gate: starts the worker; false when the process cannot create a thread.</summary>
    private bool TryStartWorker()
    {
        try
        {
            // The priority is honoured on Windows; on Linux the worker lowers its own nice value.
            _thread = DedicatedThread.Start(Run, "Folio prefetch", ThreadPriority.Lowest);
            return true;
        }
        catch (OutOfMemoryException)
        {
            return false;
        }
    }

    private void Run()
    {
        NativeMethods.LowerCurrentThreadPriority();
        while (true)
        {
            PagePosition[] pages;
            lock (_gate)
            {
                _busy = false;
                Monitor.PulseAll(_gate); // WaitIdle
                while (_queue.Count == 0 && !_stopping)
                {
                    Monitor.Wait(_gate);
                }

                if (_stopping)
                {
                    return;
                }

                pages = _queue.Dequeue();
                _busy = true;
            }

            int unread;
            try
            {
                unread = ShouldYield ? pages.Length : _reader(pages, _shouldYield);
            }
            catch (Exception)
            {
                unread = pages.Length; // best effort: the pin that needs a page reads it and reports its failure
            }

            if (unread > 0)
            {
                Dropped(unread);
            }
        }
    }

    private void Dropped(int pages)
    {
        Interlocked.Add(ref _droppedPages, pages);
        _dropped(pages);
    }
}
