namespace Folio.Buffers;

/// <summary>
/// The buffer pool's eviction policy: a CLOCK whose frames are either on probation or hot (a two-queue CLOCK).
/// A page enters on probation, unreferenced; a pin of a page already cached marks it referenced
/// (<see cref="Touch"/>). When the hand passes a frame on probation, a referenced one is promoted to hot and an
/// unreferenced one is evicted; a hot frame loses its reference mark, and is sent back to probation only when it was
/// not referenced since the hand last passed and hot frames hold more than <see cref="HotShare"/> of the pool. So a
/// long scan, whose pages are pinned once each, cycles through the probation frames and leaves alone the pages point
/// reads keep hot; with <c>scanResistant: false</c> it is plain CLOCK (a loaded page starts referenced, a referenced
/// frame is passed over once), the baseline the choice is measured against.
/// <para>
/// A page loaded by prefetch enters on probation marked <see cref="PrefetchedMark"/>: unreferenced for the hand, and
/// its first pin (<see cref="Touch"/>) counts as the load's own use, not a second one, so a scan that prefetches
/// its leaves still leaves them on probation; only a pin after that marks it referenced.
/// </para>
/// <para>
/// Owners: the hand, the hot marks and the hot count belong to whoever holds the pool's clock lock. Reference marks
/// are set by any pinning thread without a lock (a byte store; a lost mark only makes a page look colder) and
/// cleared under the clock lock. The prefetched mark is set by the frame's loader before the frame is published, and
/// taken by exactly one pin (a compare-and-swap), so each prefetched page counts as used at most once.
/// </para>
/// </summary>
internal sealed class FrameClock
{
    /// <summary>The share of the pool that hot frames may hold before the hand sends unreferenced ones back to
    /// probation.</summary>
    public const double HotShare = 0.75;

    private const byte Unreferenced = 0;
    private const byte Referenced = 1;

    /// <summary>The mark of a page prefetched and not pinned since.</summary>
    private const byte PrefetchedMark = 2;

    private readonly byte[] _referenced;
    private readonly bool[] _hot;
    private readonly bool _scanResistant;
    private readonly int _maxHot;
    private int _hand;
    private int _hotCount;

    public FrameClock(int frames, bool scanResistant)
    {
        _referenced = new byte[frames];
        _hot = new bool[frames];
        _scanResistant = scanResistant;
        _maxHot = Math.Max(1, (int)(frames * HotShare));
    }

    /// <summary>Marks a cached page as used again (any thread; no lock); true when this is the first pin of a
    /// prefetched page (which leaves it unreferenced: the pin the load would have been).</summary>
    public bool Touch(int frame)
    {
        byte mark = _referenced[frame]; // read first: a page pinned by many threads keeps its cache line shared
        if (mark == Referenced)
        {
            return false;
        }

        if (mark == PrefetchedMark)
        {
            return Interlocked.CompareExchange(ref _referenced[frame], Unreferenced, PrefetchedMark) == PrefetchedMark;
        }

        _referenced[frame] = Referenced;
        return false;
    }

    /// <summary>The frame under the hand; moves the hand on (clock lock).</summary>
    public int Advance()
    {
        int frame = _hand;
        _hand = frame + 1 == _referenced.Length ? 0 : frame + 1;
        return frame;
    }

    /// <summary>
    /// Whether the loaded, unpinned <paramref name="frame"/> under the hand should be evicted now (clock lock);
    /// updates its marks either way. With <paramref name="force"/> (a sweep found nothing), any such frame is.
    /// </summary>
    public bool ShouldEvict(int frame, bool force)
    {
        byte mark = _referenced[frame];
        bool referenced = mark == Referenced;
        if (mark == Referenced)
        {
            _referenced[frame] = Unreferenced; // a prefetched mark stays until the page is used or evicted
        }

        if (force)
        {
            return true;
        }

        if (!_scanResistant)
        {
            return !referenced;
        }

        if (!_hot[frame])
        {
            if (!referenced)
            {
                return true;
            }

            _hot[frame] = true;
            _hotCount++;
            return false;
        }

        if (!referenced && _hotCount > _maxHot)
        {
            _hot[frame] = false;
            _hotCount--;
        }

        return false;
    }

    /// <summary>A page was just loaded into <paramref name="frame"/> (clock lock not needed: the frame is owned by
    /// its loader, and the hand skips frames that are not loaded).</summary>
    public void Loaded(int frame) => _referenced[frame] = _scanResistant ? Unreferenced : Referenced;

    /// <summary>A page was just prefetched into <paramref name="frame"/> (its loader, before publishing it): on
    /// probation, unreferenced, waiting for its first pin.</summary>
    public void Prefetched(int frame) => _referenced[frame] = PrefetchedMark;

    /// <summary>The page of <paramref name="frame"/> left it (clock lock); true when it was prefetched and never
    /// pinned.</summary>
    public bool Evicted(int frame)
    {
        if (_hot[frame])
        {
            _hot[frame] = false;
            _hotCount--;
        }

        bool unused = _referenced[frame] == PrefetchedMark;
        _referenced[frame] = Unreferenced;
        return unused;
    }
}
