using System.Runtime.ExceptionServices;
using Folio.Pages;

namespace Folio.Backups;

/// <summary>
/// Reads and checks the chunks of one checkpoint from disk with one worker per core, at most four (the scrub of
/// <see cref="DocumentStore.VerifyAsync"/> and <see cref="StoreFileVerifier"/>): checking a page's CRC-32C and
/// structure costs about as much as reading it from the page cache, so one thread checks at about half the speed the
/// bytes arrive, and chunks are independent.
/// <para>
/// Protocol. Workers take chunk indexes from one counter (<see cref="Interlocked.Increment(ref int)"/>), so each chunk
/// is checked once, by one worker, with its own buffer (<see cref="PageStore.VerifyChunk"/> rents it), through
/// positional reads that need no lock. A worker writes a failure only into its chunk's slot of an array; the slots are
/// read after every worker has finished (the join is the fence), in chunk order, so problems are listed in the same
/// order whatever the interleaving. Bytes checked are summed with <see cref="Interlocked.Add(ref long, long)"/>, and
/// progress is reported under a lock, one report at a time and never with a smaller count than the report before.
/// Before checking a chunk, a worker asks the kernel to read the chunk the workers will take next after it, so the
/// disk reads ahead while the cores check.
/// </para>
/// </summary>
internal sealed class ChunkScrub
{
    /// <summary>The most workers a scrub uses, whatever the cores: it shares the machine with the store's traffic, and
    /// four cores check faster than most disks read.</summary>
    public const int MaxWorkers = 4;

    private readonly PageStore _pages;
    private readonly IReadOnlyList<ChunkInfo> _chunks;
    private readonly Func<ChunkInfo, bool> _stillCounts;
    private readonly Action<long> _checked;
    private readonly string?[] _problems;
    private readonly object _reportLock = new();
    private int _next = -1;
    private long _pagesChecked;
    private long _bytesChecked;
    private long _bytesReported;

    private ChunkScrub(PageStore pages, IReadOnlyList<ChunkInfo> chunks, Func<ChunkInfo, bool> stillCounts,
        Action<long> bytesChecked)
    {
        _pages = pages;
        _chunks = chunks;
        _stillCounts = stillCounts;
        _checked = bytesChecked;
        _problems = new string?[chunks.Count];
    }

    /// <summary>
    /// Checks every chunk of <paramref name="chunks"/> with one thread per core (at most <see cref="MaxWorkers"/>, and
    /// no more than chunks) and returns the pages checked and the chunks' bytes. A chunk that fails is added to
    /// <paramref name="problems"/> (in chunk order) when <paramref name="stillCounts"/> says it is still part of the
    /// store; <paramref name="bytesChecked"/> receives the bytes of the chunks checked so far, one call at a time, in
    /// increasing order.
    /// </summary>
    public static (long Pages, long Bytes) Run(PageStore pages, IReadOnlyList<ChunkInfo> chunks,
        List<string> problems, Func<ChunkInfo, bool> stillCounts, Action<long> bytesChecked,
        CancellationToken cancellationToken)
    {
        var scrub = new ChunkScrub(pages, chunks, stillCounts, bytesChecked);
        int workers = Math.Clamp(Environment.ProcessorCount, 1, Math.Max(1, Math.Min(MaxWorkers, chunks.Count)));
        if (workers == 1)
        {
            scrub.Work(1, cancellationToken);
        }
        else
        {
            var others = new Task[workers - 1];
            for (int i = 0; i < others.Length; i++)
            {
                others[i] = Task.Run(() => scrub.Work(workers, cancellationToken), CancellationToken.None);
            }

            Exception? failure = null;
            try
            {
                scrub.Work(workers, cancellationToken);
            }
            catch (Exception e)
            {
                failure = e;
                Interlocked.Exchange(ref scrub._next, int.MaxValue / 2); // the others stop after their chunk
            }

            foreach (Task other in others)
            {
                try
                {
                    other.GetAwaiter().GetResult();
                }
                catch (Exception e) when (failure is null)
                {
                    failure = e;
                }
            }

            if (failure is not null)
            {
                ExceptionDispatchInfo.Throw(failure);
            }
        }

        foreach (string? problem in scrub._problems)
        {
            if (problem is not null)
            {
                problems.Add(problem);
            }
        }

        return (scrub._pagesChecked, scrub._bytesChecked);
    }

    private void Work(int workers, CancellationToken cancellationToken)
    {
        while (true)
        {
            cancellationToken.ThrowIfCancellationRequested();
            int index = Interlocked.Increment(ref _next);
            if (index >= _chunks.Count)
            {
                return;
            }

            ChunkInfo chunk = _chunks[index];
            if (index + workers < _chunks.Count)
            {
                ChunkInfo ahead = _chunks[index + workers];
                _pages.AdviseWillNeed(ahead.FileOffset, ahead.Length);
            }

            try
            {
                Interlocked.Add(ref _pagesChecked, _pages.VerifyChunk(chunk));
            }
            catch (StoreCorruptedException e)
            {
                if (_stillCounts(chunk))
                {
                    _problems[index] = e.Message;
                }
            }

            long done = Interlocked.Add(ref _bytesChecked, chunk.Length);
            lock (_reportLock)
            {
                if (done > _bytesReported)
                {
                    _bytesReported = done;
                    _checked(done);
                }
            }
        }
    }
}
