using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Folio.Diagnostics;

namespace Folio.Buffers;

/// <summary>Reads page <paramref name="page"/> into <paramref name="frame"/> (the whole frame is the loader's); throws
/// when the page cannot be read or fails its checks.</summary>
internal delegate void PageLoader(long page, Span<byte> frame);

/// <summary>
/// A bounded cache of pages in fixed-size frames of native, page-aligned memory that the garbage collector neither
/// scans nor moves, with a page table from page number to frame. A reader pins a page (<see cref="Pin"/>), reads its
/// bytes in place, and unpins it (<see cref="PageHandle.Dispose"/>); a page is loaded by the first pin that misses
/// and evicted only while nobody pins it, by the CLOCK of <see cref="FrameClock"/>.
/// <para>
/// Protocol. Each frame has one 64-bit word (<see cref="FrameWord"/>: readers, state, generation), on a cache line
/// of its own, changed only by compare-and-swap or by the frame's owner, and a page number
/// (<see cref="_pages"/>). States: Free, Loading (owned by the pin that claimed it), Loaded, Evicting (owned by the
/// clock).
/// <list type="bullet">
/// <item>Pin fast path (lock-free, the design of seed 002): look the page up in the table; read the word (acquire);
/// if the frame is Loaded with readers above zero and still names the page, add a reader by compare-and-swap of the
/// whole word. Readers above zero keep the clock off the frame, and the generation in the word makes the swap fail
/// if the frame was evicted and reloaded after the word was read (DuckDB #15893: a frame evicted between the check
/// and the pin), so a successful swap pins the page that was checked. The page number is read after the word: a
/// claimer writes it before the word that publishes its generation (release), so a page number read while the
/// generation the swap proves held is that generation's.</item>
/// <item>Pin slow path: the same swap from zero readers (eviction's swap needs zero readers too, so exactly one of the
/// two wins); a frame that is Loading for the page is waited for on its gate (a monitor: the loader publishes the
/// outcome under it and pulses); a miss claims a frame from the clock (under <see cref="_clockLock"/>: a Free frame,
/// or a Loaded one with zero readers swapped to Evicting, its table entry removed), writes the page number, publishes
/// Loading with the next generation, enters the table (a racing pin of the same page that entered first wins: the
/// frame goes back to Free), loads the bytes with no lock held, and publishes Loaded with one reader (release, under
/// the gate). A failed load removes the entry and publishes Free. No lock is held while a loader runs and the clock
/// lock never waits for a frame, so loads and evictions cannot deadlock (DuckDB #12391).</item>
/// <item>Pin at a remembered frame (<see cref="TryPinAt"/>): the swap of a pin found through the table, from any
/// reader count, at a frame the caller kept from an earlier pin instead of one the table gives. The table's answer
/// can be just as stale (the frame evicted and reloaded after the lookup), so the checks that make that swap pin the
/// page it names (Loaded, the page number, the generation) make this one safe too; a frame that holds another page
/// now fails them and the caller pins through the table.</item>
/// <item>Prefetch (<see cref="Prefetch"/>): a load like a miss's, by the prefetch worker, that claims only what the
/// clock's normal search gives (never waits, never forces) and publishes Loaded with zero readers; pins waiting on
/// the gate meanwhile then pin it from zero like any cached page.</item>
/// <item>Unpin: an atomic decrement; above zero it returns at once. The last unpin (slow path) updates the
/// pinned-frames count, wakes pins waiting for a frame when every frame was pinned, and with
/// <see cref="BufferPoolOptions.EvictOnLastUnpin"/> evicts the page at once.</item>
/// <item>The pinned-frames count (a pin from zero readers adds one, the last unpin takes it back) is a
/// <see cref="StripedCounter"/>: every read of a page that no one else pins changes it twice, so one shared field
/// would be a cache line the cores pass back and forth on every read.</item>
/// <item>Disposal (<see cref="Dispose"/>) may race every pin, unpin and load: the frames' memory is freed only when
/// no frame has readers and no load or eviction is in progress, by whichever comes last of the disposal, the last
/// unpin and the end of a slow operation (<see cref="ReleaseMemoryIfUnused"/>, once: <see cref="_memoryReleased"/>).
/// Every operation that claims, loads or evicts a frame (<see cref="PinSlow"/>, <see cref="Prefetch"/>, an eviction
/// on the last unpin) counts itself in <see cref="_operations"/> with an interlocked increment and only then reads
/// <see cref="_disposed"/>; the disposal sets <see cref="_disposed"/> with an interlocked exchange and only then reads
/// <see cref="_operations"/>. Both are full fences, so either the operation sees the disposal and touches no frame,
/// or the disposal sees the operation and leaves the memory to it. A pin outside those operations (the fast path,
/// <see cref="TryPinAt"/>) swaps first and reads <see cref="_disposed"/> after the swap (a full fence), so either the
/// disposal's scan of the words sees its reader, or it sees the disposal and unpins before it reads a byte: no pin
/// made after the disposal reads the frames, and one made before keeps them until its unpin.</item>
/// </list>
/// The frames' memory is page aligned; with <see cref="BufferPoolOptions.HugePages"/> (off by default) it is 2 MiB
/// aligned and advised for transparent huge pages, so that the few lines a random read touches in a random frame miss
/// the TLB less often. The clock hands out free frames in order, so a filling pool claims frames at the end of the
/// memory touched so far: a claim past <see cref="_populated"/> (only grows, raised by compare-and-swap) faults in the
/// memory from there to a step past its frame with one <c>madvise(MADV_POPULATE_WRITE)</c> instead of a fault per
/// page as the load writes it. Only the claimer whose swap raised the mark populates; population changes no byte, so
/// it may overlap loads into frames of the same range, and it runs inside the claimer's counted operation, so the
/// disposal never frees the memory under it.
/// With <see cref="BufferPoolOptions.Scribble"/> (Debug builds), an evicted frame is filled with
/// <see cref="ScribbleByte"/> so a span used after its unpin reads garbage (DuckDB #5263).
/// </para>
/// </summary>
internal sealed unsafe class BufferPool : IDisposable
{
    /// <summary>What a scribbled frame holds.</summary>
    public const byte ScribbleByte = 0xDD;

    private const int WordStride = 8; // longs between two frames' words: one 64-byte cache line each
    private const nuint HugePageSize = 2 * 1024 * 1024;
    private const long PopulateStep = 1024 * 1024; // frame memory faulted in at once as the claims reach it

    private readonly byte* _memory;
    private readonly int _frameSize;
    private readonly int _frameCount;
    private readonly long[] _words;
    private readonly long[] _pages;
    private readonly object[] _gates;
    private readonly ConcurrentDictionary<long, int> _table;
    private readonly FrameClock _clock;
    private readonly Lock _clockLock = new();
    private readonly object _unpinned = new();
    private readonly BufferPoolOptions _options;
    private readonly BufferPoolMetrics _metrics;
    private readonly StripedCounter _pinnedFrames = new();
    private int _exhaustedWaiters;
    private long _misses;
    private long _evictions;
    private long _prefetched;
    private long _prefetchUsed;
    private long _prefetchUnused;
    private int _disposed;
    private int _operations; // slow operations that may touch a frame's bytes, in progress (see the protocol)
    private long _populated; // bytes from the start of the frames faulted in, or being faulted in (only grows)
    private int _memoryReleased;

    /// <summary>A pool of <paramref name="frameCount"/> frames of <paramref name="frameSize"/> bytes (a multiple of
    /// 4 KiB).</summary>
    public BufferPool(int frameCount, int frameSize, BufferPoolOptions? options = null)
    {
        if (frameCount < 1)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(frameCount), frameCount, "A pool needs at least one frame.");
        }

        if (frameSize < 4096 || frameSize % 4096 != 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(frameSize), frameSize,
                "A frame is a positive multiple of 4 KiB.");
        }

        _options = options ?? new BufferPoolOptions();
        _frameSize = frameSize;
        _frameCount = frameCount;
        nuint bytes = (nuint)frameCount * (nuint)frameSize;
        if ((long)frameCount * WordStride > Array.MaxLength)
        {
            throw new InsufficientMemoryException($"A buffer pool of {frameCount} frames is more than one pool holds "
                + $"({Array.MaxLength / WordStride}).");
        }

        // The frames' memory first (a cache larger than the machine fails here, at once), then the tables; if those
        // fail, the memory is freed before the failure is reported.
        try
        {
            _memory = (byte*)NativeMemory.AlignedAlloc(bytes, _options.HugePages && bytes >= HugePageSize
                ? HugePageSize : 4096);
            _words = new long[frameCount * WordStride];
            _pages = new long[frameCount];
            _gates = new object[frameCount];
            for (int i = 0; i < frameCount; i++)
            {
                _pages[i] = -1;
                _gates[i] = new object();
            }

            _table = new ConcurrentDictionary<long, int>(Environment.ProcessorCount, frameCount);
            _clock = new FrameClock(frameCount, _options.ScanResistant);
        }
        catch (OutOfMemoryException e)
        {
            if (_memory != null)
            {
                NativeMemory.AlignedFree(_memory);
                _memory = null;
            }

            throw new InsufficientMemoryException($"There is no memory for a buffer pool of {bytes} bytes.", e);
        }

        if (_options.HugePages && bytes >= HugePageSize)
        {
            Folio.Storage.NativeMethods.AdviseHugePages(_memory, bytes & ~(HugePageSize - 1));
        }

        _metrics = new BufferPoolMetrics(_options.MeterFactory, () => PinnedFrames,
            () => (long)_table.Count * _frameSize);
    }

    /// <summary>The bytes of one frame.</summary>
    public int FrameSize => _frameSize;

    /// <summary>The number of frames.</summary>
    public int FrameCount => _frameCount;

    /// <summary>Frames pinned now.</summary>
    public int PinnedFrames => Math.Max(0, _pinnedFrames.Sum()); // a sum taken while pins change may dip below 0

    /// <summary>Pins that loaded their page.</summary>
    public long Misses => Interlocked.Read(ref _misses);

    /// <summary>Pages evicted to make room.</summary>
    public long Evictions => Interlocked.Read(ref _evictions);

    /// <summary>Pages loaded by <see cref="Prefetch"/>.</summary>
    public long Prefetched => Interlocked.Read(ref _prefetched);

    /// <summary>Prefetched pages pinned afterwards (each counted once).</summary>
    public long PrefetchUsed => Interlocked.Read(ref _prefetchUsed);

    /// <summary>Prefetched pages evicted before any pin.</summary>
    public long PrefetchUnused => Interlocked.Read(ref _prefetchUnused);

    /// <summary>The pool's instruments (the prefetcher records its own counts on them too).</summary>
    internal BufferPoolMetrics Metrics => _metrics;

    /// <summary>Called by a fast-path pin between reading a frame's word and swapping it (tests only: it lets a test
    /// evict and reload the frame at exactly that point).</summary>
    internal Action<int>? BeforeFastPathSwap { get; set; }

    /// <summary>Whether <paramref name="page"/> is loaded in a frame now (tests and diagnostics; a racy
    /// answer).</summary>
    public bool IsCached(long page) => _table.TryGetValue(page, out int frame)
        && FrameWord.State(Volatile.Read(ref Word(frame))) == FrameWord.Loaded
        && Volatile.Read(ref _pages[frame]) == page;

    /// <summary>
    /// Pins <paramref name="page"/> (a non-negative number), loading it with <paramref name="loader"/> when it is not
    /// cached. Waits, up to <see cref="BufferPoolOptions.ExhaustedWait"/>, while every frame is pinned.
    /// </summary>
    /// <returns>The pin; dispose it once.</returns>
    /// <exception cref="InvalidOperationException">Every frame stayed pinned for the whole wait.</exception>
    /// <exception cref="ObjectDisposedException">The pool was disposed.</exception>
    public PageHandle Pin(long page, PageLoader loader)
    {
        if (_options.FastPath && _table.TryGetValue(page, out int frame) && TryPinShared(frame, page)
            && KeptAfterDisposalCheck(frame))
        {
            _metrics.Hit();
            return new PageHandle(this, frame);
        }

        PinSlow(page, loader, out PageHandle handle);
        return handle;
    }

    /// <summary>Pins <paramref name="page"/> if a frame holds it (waiting while another pin loads it); false, and no
    /// pin, when it is not cached. A caller that must learn something before it loads a page (its size) tries this
    /// first.</summary>
    public bool TryPin(long page, out PageHandle handle)
    {
        if (_options.FastPath && _table.TryGetValue(page, out int frame) && TryPinShared(frame, page)
            && KeptAfterDisposalCheck(frame))
        {
            _metrics.Hit();
            handle = new PageHandle(this, frame);
            return true;
        }

        return PinSlow(page, loader: null, out handle);
    }

    /// <summary>Pins <paramref name="page"/> in <paramref name="frame"/> if that frame holds it, loaded, now (a frame
    /// a caller remembered from an earlier pin: no page-table lookup); false, and no pin, otherwise (the caller pins
    /// through the table). The same swap as a pin through the table, which proves the frame held the page.</summary>
    public bool TryPinAt(int frame, long page, out PageHandle handle)
    {
        if ((uint)frame < (uint)_frameCount && Volatile.Read(ref _disposed) == 0
            && (_options.FastPath ? TryPinCached(frame, page) : PinLocked(frame, page)) == CachedPin.Pinned
            && KeptAfterDisposalCheck(frame))
        {
            _metrics.Hit();
            handle = new PageHandle(this, frame);
            return true;
        }

        handle = default;
        return false;
    }

    /// <summary>
    /// Loads <paramref name="page"/> with <paramref name="loader"/> into a frame, unpinned, on probation, unless it is
    /// cached or loading already; never waits for a frame: it takes only a free frame or one the clock would evict
    /// now (no forced pass), so a prefetch never pushes out a page in use. A loader that throws leaves no trace (the
    /// page is read again, and its failure reported, by the pin that needs it).
    /// </summary>
    /// <returns>What became of the request.</returns>
    public PrefetchOutcome Prefetch(long page, PageLoader loader)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(page);
        Interlocked.Increment(ref _operations); // then the disposal's flag: see the protocol
        try
        {
            return Volatile.Read(ref _disposed) != 0 ? PrefetchOutcome.NoFrame : PrefetchLoad(page, loader);
        }
        finally
        {
            EndOperation();
        }
    }

    private PrefetchOutcome PrefetchLoad(long page, PageLoader loader)
    {
        if (_table.ContainsKey(page))
        {
            return PrefetchOutcome.Cached;
        }

        int claimed;
        lock (_clockLock)
        {
            claimed = Sweep(page, force: false);
        }

        if (claimed < 0)
        {
            return PrefetchOutcome.NoFrame;
        }

        Populate(claimed);

        if (!_table.TryAdd(page, claimed))
        {
            Abandon(claimed, page, entered: false); // a pin of the page entered first
            return PrefetchOutcome.Cached;
        }

        try
        {
            loader(page, FrameBytes(claimed));
        }
        catch (Exception)
        {
            Abandon(claimed, page, entered: true);
            return PrefetchOutcome.Failed;
        }

        _clock.Prefetched(claimed);
        Interlocked.Increment(ref _prefetched);
        _metrics.PrefetchIssued();
        Publish(claimed, FrameWord.Loaded, readers: 0);
        return PrefetchOutcome.Loaded;
    }

    /// <summary>Releases one pin of <paramref name="frame"/> (<see cref="PageHandle.Dispose"/>).</summary>
    public void Unpin(int frame)
    {
        long after = _options.FastPath ? Interlocked.Decrement(ref Word(frame)) : DecrementLocked(frame);
        int readers = FrameWord.Readers(after);
        if (readers == 0)
        {
            LastUnpin(frame);
        }
        else if (readers == FrameWord.MaxReaders)
        {
            ThrowUnbalanced(frame);
        }
    }

    /// <summary>The bytes of <paramref name="frame"/>.</summary>
    public Span<byte> FrameBytes(int frame) => new(_memory + ((long)frame * _frameSize), _frameSize);

    /// <summary>Refuses every later pin (<see cref="ObjectDisposedException"/>) and prefetch, and frees the frames'
    /// memory once no page is pinned and no load is in progress: now, or at the last unpin or load that ends later
    /// (a pinned span never points into freed memory). Idempotent.</summary>
    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
        {
            return;
        }

        _metrics.Dispose();
        ReleaseMemoryIfUnused(); // after the exchange, a full fence: see the protocol
    }

    /// <summary>Whether the frames' memory was freed (tests).</summary>
    internal bool IsMemoryReleased => Volatile.Read(ref _memoryReleased) != 0;

    /// <summary>After a pin's swap (a full fence): keeps the pin unless the pool was disposed, else unpins it
    /// before anything reads the frame, so no pin made after the disposal reads a byte.</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private bool KeptAfterDisposalCheck(int frame)
    {
        if (Volatile.Read(ref _disposed) == 0)
        {
            return true;
        }

        Unpin(frame);
        return false;
    }

    /// <summary>Ends an operation counted in <see cref="_operations"/>; the last one to end after the disposal frees
    /// the memory if nothing else holds it.</summary>
    private void EndOperation()
    {
        if (Interlocked.Decrement(ref _operations) == 0 && Volatile.Read(ref _disposed) != 0)
        {
            ReleaseMemoryIfUnused();
        }
    }

    /// <summary>
    /// After the disposal: frees the frames' memory (once) if no operation that may touch it is in progress and no
    /// frame has readers. Each caller read <see cref="_disposed"/> as set after a full fence, so an operation or pin
    /// that begins after this check sees the disposal and touches no frame (the protocol); one in progress, or a
    /// reader still pinned, is seen here, and its own end calls this again.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void ReleaseMemoryIfUnused()
    {
        if (Volatile.Read(ref _operations) != 0)
        {
            return;
        }

        for (int frame = 0; frame < _frameCount; frame++)
        {
            if (FrameWord.Readers(Volatile.Read(ref Word(frame))) != 0)
            {
                return;
            }
        }

        if (Interlocked.Exchange(ref _memoryReleased, 1) == 0)
        {
            NativeMemory.AlignedFree(_memory);
        }
    }

    private ref long Word(int frame) => ref _words[frame * WordStride];

    /// <summary>The fast path: a reader more for a frame that is Loaded with readers and holds
    /// <paramref name="page"/>.</summary>
    private bool TryPinShared(int frame, long page)
    {
        ref long word = ref Word(frame);
        long seen = Volatile.Read(ref word);
        while (FrameWord.State(seen) == FrameWord.Loaded
            && FrameWord.Readers(seen) is > 0 and < FrameWord.MaxReaders - 1
            && Volatile.Read(ref _pages[frame]) == page)
        {
            BeforeFastPathSwap?.Invoke(frame);
            long found = Interlocked.CompareExchange(ref word, seen + 1, seen);
            if (found == seen)
            {
                if (_clock.Touch(frame))
                {
                    RecordPrefetchUsed();
                }

                return true;
            }

            seen = found;
        }

        return false;
    }

    private enum CachedPin
    {
        Pinned,
        Loading,
        Moved,
    }

    /// <summary>A reader more for a frame that holds <paramref name="page"/>, from any reader count; says when the
    /// page is still loading, or the frame moved on.</summary>
    private CachedPin TryPinCached(int frame, long page)
    {
        ref long word = ref Word(frame);
        long seen = Volatile.Read(ref word);
        while (true)
        {
            if (Volatile.Read(ref _pages[frame]) != page)
            {
                return CachedPin.Moved;
            }

            int state = FrameWord.State(seen);
            if (state == FrameWord.Loading)
            {
                return CachedPin.Loading;
            }

            if (state != FrameWord.Loaded)
            {
                return CachedPin.Moved;
            }

            if (FrameWord.Readers(seen) == FrameWord.MaxReaders - 1)
            {
                ThrowHelper.ThrowInvalidOperation($"Page {page} has {FrameWord.MaxReaders - 1} pins already.");
            }

            long found = Interlocked.CompareExchange(ref word, seen + 1, seen);
            if (found == seen)
            {
                if (FrameWord.Readers(seen) == 0)
                {
                    _pinnedFrames.Increment();
                }

                if (_clock.Touch(frame))
                {
                    RecordPrefetchUsed();
                }

                return CachedPin.Pinned;
            }

            seen = found;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private bool PinSlow(long page, PageLoader? loader, out PageHandle handle)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(page);
        Interlocked.Increment(ref _operations); // then the disposal's flag: see the protocol
        try
        {
            return PinCounted(page, loader, out handle);
        }
        finally
        {
            EndOperation();
        }
    }

    /// <summary><see cref="PinSlow"/>, counted in <see cref="_operations"/>.</summary>
    private bool PinCounted(long page, PageLoader? loader, out PageHandle handle)
    {
        long deadline = 0; // set when a pin first has to wait for a frame
        while (true)
        {
            ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);
            if (_table.TryGetValue(page, out int frame))
            {
                CachedPin outcome = _options.FastPath ? TryPinCached(frame, page) : PinLocked(frame, page);
                if (outcome == CachedPin.Pinned)
                {
                    _metrics.Hit();
                    handle = new PageHandle(this, frame);
                    return true;
                }

                if (outcome == CachedPin.Loading)
                {
                    WaitWhileLoading(frame, page);
                }

                continue; // loaded, failed or moved on meanwhile: look again
            }

            if (loader is null)
            {
                handle = default;
                return false;
            }

            int claimed = Claim(page, ref deadline);
            Populate(claimed);
            if (!_table.TryAdd(page, claimed))
            {
                Abandon(claimed, page, entered: false); // a racing pin of the page entered first
                continue;
            }

            try
            {
                loader(page, FrameBytes(claimed));
            }
            catch
            {
                Abandon(claimed, page, entered: true);
                throw;
            }

            _clock.Loaded(claimed);
            _pinnedFrames.Increment();
            Interlocked.Increment(ref _misses);
            _metrics.Miss();
            Publish(claimed, FrameWord.Loaded, readers: 1);
            handle = new PageHandle(this, claimed);
            return true;
        }
    }

    /// <summary>The locked baseline of a pin of a cached page: the same swap, under the frame's gate.</summary>
    private CachedPin PinLocked(int frame, long page)
    {
        lock (_gates[frame])
        {
            return TryPinCached(frame, page);
        }
    }

    /// <summary>The locked baseline of an unpin: the same decrement, under the frame's gate.</summary>
    private long DecrementLocked(int frame)
    {
        lock (_gates[frame])
        {
            return Interlocked.Decrement(ref Word(frame));
        }
    }

    /// <summary>Waits on the frame's gate while it is loading <paramref name="page"/>.</summary>
    private void WaitWhileLoading(int frame, long page)
    {
        object gate = _gates[frame];
        lock (gate)
        {
            while (FrameWord.State(Volatile.Read(ref Word(frame))) == FrameWord.Loading
                && Volatile.Read(ref _pages[frame]) == page)
            {
                Monitor.Wait(gate);
            }
        }
    }

    /// <summary>The owner of a Loading frame publishes its outcome (release) and wakes the pins waiting for
    /// it.</summary>
    private void Publish(int frame, int state, int readers)
    {
        object gate = _gates[frame];
        lock (gate)
        {
            long generation = FrameWord.Generation(Volatile.Read(ref Word(frame)));
            Volatile.Write(ref Word(frame), FrameWord.Make(state, generation, readers));
            Monitor.PulseAll(gate);
        }
    }

    /// <summary>Before a load into <paramref name="frame"/> (inside a counted operation): when the frame lies past the
    /// memory populated so far, faults in everything from there to a step past the frame with one system call, which
    /// the claimer that raises <see cref="_populated"/> makes (see the protocol).</summary>
    private void Populate(int frame)
    {
        long end = ((long)frame + 1) * _frameSize;
        long populated = Volatile.Read(ref _populated);
        if (end <= populated)
        {
            return;
        }

        long to = Math.Min((long)_frameCount * _frameSize, end + PopulateStep);
        if (AtomicMaximum.TryRaise(ref _populated, to))
        {
            // From the claimed frame on: memory a claim skipped (none while free frames are handed out in order) is
            // faulted in by its own loads, and one call never spans more than a frame and a step.
            long from = Math.Max(populated, end - _frameSize);
            Folio.Storage.NativeMethods.PopulateForWrite(new Span<byte>(_memory + from, (int)(to - from)));
        }
    }

    /// <summary>
    /// A frame for <paramref name="page"/>, Loading with the next generation and owned by the caller: a Free frame or
    /// the clock's victim. Waits for an unpin while every frame is pinned, until <paramref name="deadline"/> (a
    /// timestamp; 0: set it from <see cref="BufferPoolOptions.ExhaustedWait"/> when the first wait starts).
    /// </summary>
    private int Claim(long page, ref long deadline)
    {
        while (true)
        {
            lock (_clockLock)
            {
                // A normal search first, then one pass that takes any unpinned page: the policy must never leave a
                // pin without a frame while one is free to take.
                int frame = Sweep(page, force: false);
                if (frame >= 0 || (frame = Sweep(page, force: true)) >= 0)
                {
                    return frame;
                }
            }

            if (deadline == 0)
            {
                deadline = Stopwatch.GetTimestamp()
                    + (long)(_options.ExhaustedWait.TotalSeconds * Stopwatch.Frequency);
            }

            WaitForUnpin(deadline);
        }
    }

    /// <summary>Under the clock lock: one sweep of the hand that claims a frame for <paramref name="page"/>, or -1: the
    /// normal search passes each frame about twice; with <paramref name="force"/> one pass takes any unpinned
    /// page.</summary>
    private int Sweep(long page, bool force)
    {
        int steps = force ? _frameCount : (2 * _frameCount) + 1;
        for (int step = 0; step < steps; step++)
        {
            int frame = _clock.Advance();
            long seen = Volatile.Read(ref Word(frame));
            int state = FrameWord.State(seen);
            if ((state == FrameWord.Free || (state == FrameWord.Loaded && FrameWord.Readers(seen) == 0
                && _clock.ShouldEvict(frame, force)))
                && TryTake(frame, seen, page, FrameWord.Loading))
            {
                return frame;
            }
        }

        return -1;
    }

    /// <summary>Gives back a frame claimed for <paramref name="page"/> that will not hold it (its load failed, or
    /// another pin entered the page first): out of the table if it <paramref name="entered"/> it, then Free.</summary>
    private void Abandon(int frame, long page, bool entered)
    {
        if (entered)
        {
            _table.TryRemove(KeyValuePair.Create(page, frame));
        }

        Volatile.Write(ref _pages[frame], -1);
        Publish(frame, FrameWord.Free, readers: 0);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void RecordPrefetchUsed()
    {
        Interlocked.Increment(ref _prefetchUsed);
        _metrics.PrefetchUsed();
    }

    /// <summary>
    /// Under the clock lock: takes <paramref name="frame"/>, Free or Loaded with no readers as <paramref name="seen"/>
    /// says, by swapping it to Evicting (a pin or claim that came first makes the swap fail: false); a Loaded frame's
    /// page leaves the table; then the frame names <paramref name="page"/> and is published in <paramref name="state"/>
    /// with the next generation.
    /// </summary>
    private bool TryTake(int frame, long seen, long page, int state)
    {
        ref long word = ref Word(frame);
        long evicting = FrameWord.Make(FrameWord.Evicting, FrameWord.Generation(seen), 0);
        if (Interlocked.CompareExchange(ref word, evicting, seen) != seen)
        {
            return false;
        }

        if (FrameWord.State(seen) == FrameWord.Loaded)
        {
            Evicted(frame);
        }

        Volatile.Write(ref _pages[frame], page);
        Volatile.Write(ref word, FrameWord.Make(state, FrameWord.Generation(seen) + 1, 0));
        return true;
    }

    /// <summary>The clock took a Loaded frame (now Evicting, owned by the clock): its page leaves the table.</summary>
    private void Evicted(int frame)
    {
        _table.TryRemove(KeyValuePair.Create(Volatile.Read(ref _pages[frame]), frame));
        if (_clock.Evicted(frame))
        {
            Interlocked.Increment(ref _prefetchUnused);
        }

        if (_options.Scribble)
        {
            FrameBytes(frame).Fill(ScribbleByte);
        }

        Interlocked.Increment(ref _evictions);
        _metrics.Evicted();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void WaitForUnpin(long deadline)
    {
        if (Stopwatch.GetTimestamp() > deadline)
        {
            ThrowHelper.ThrowInvalidOperation(
                $"All {_frameCount} cache frames stayed pinned for " +
                $"{_options.ExhaustedWait.TotalMilliseconds:F0} ms: the cache is too small for the pages read at " +
                $"once.");
        }

        Interlocked.Increment(ref _exhaustedWaiters);
        try
        {
            lock (_unpinned)
            {
                if (_pinnedFrames.Sum() >= _frameCount)
                {
                    Monitor.Wait(_unpinned, 10);
                }
            }
        }
        finally
        {
            Interlocked.Decrement(ref _exhaustedWaiters);
        }
    }

    /// <summary>The slow path of an unpin that took the readers to zero.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void LastUnpin(int frame)
    {
        _pinnedFrames.Decrement();
        if (_options.EvictOnLastUnpin)
        {
            Interlocked.Increment(ref _operations); // an eviction may scribble the frame: counted, as a load is
            try
            {
                if (Volatile.Read(ref _disposed) == 0)
                {
                    EvictIfUnpinned(frame);
                }
            }
            finally
            {
                EndOperation();
            }
        }

        if (Volatile.Read(ref _exhaustedWaiters) > 0)
        {
            lock (_unpinned)
            {
                Monitor.PulseAll(_unpinned);
            }
        }

        // The readers reached zero by an interlocked decrement (a full fence), then this read: see the protocol.
        if (Volatile.Read(ref _disposed) != 0)
        {
            ReleaseMemoryIfUnused();
        }
    }

    /// <summary>Evicts the page of <paramref name="frame"/> unless it was pinned again meanwhile.</summary>
    private void EvictIfUnpinned(int frame)
    {
        lock (_clockLock)
        {
            long seen = Volatile.Read(ref Word(frame));
            if (FrameWord.State(seen) == FrameWord.Loaded && FrameWord.Readers(seen) == 0)
            {
                TryTake(frame, seen, -1, FrameWord.Free);
            }
        }
    }

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void ThrowUnbalanced(int frame)
    {
        Interlocked.Increment(ref Word(frame));
        throw new InvalidOperationException($"Frame {frame} was unpinned more often than it was pinned.");
    }
}
