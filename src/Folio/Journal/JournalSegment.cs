using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// One segment file of the journal, mapped read-only for readers.
/// <para>
/// Protocol. The <b>writer</b> (the journal, under its write lock) appends records with positional writes and owns
/// <see cref="WrittenLength"/>, <see cref="FirstTimestamp"/> and the seal fields. The <b>syncer</b> (the journal,
/// after fdatasync) publishes <see cref="CommittedLength"/> with a release write: every byte below it is durable and
/// never changes again. <b>Readers</b> read <see cref="CommittedLength"/> with an acquire read and then read bytes
/// below it through the mapping: no lock, no system call, and they never write segment state other than the
/// reference count and the reader-owned <see cref="Index"/>.
/// </para>
/// <para>
/// Zero-fill. A segment file is created at its full length as a hole (no blocks), and the active segment is
/// zero-filled and fdatasynced ahead of the writer in pieces, so a record is always written into blocks a completed
/// sync allocated: the commit's fdatasync then flushes data pages only, never block allocations. The fill runs under
/// the journal's fill lock, by the appender (when a record would pass <see cref="FilledLength"/>) or by the
/// journal's background fill; it writes only at and past <see cref="FilledLength"/> and raises it (release) once its
/// sync returned, and the writer writes only below it, so the two never touch the same bytes.
/// <see cref="StopFilling"/> (under the fill lock, at rotation and disposal) ends the fills of a segment.
/// </para>
/// <para>
/// Files. Only the active segment keeps its file open (for writes and fdatasync); a sealed segment's file is closed
/// once it is synced and no sync can still be using it, and readers use only the mapping, which holds no descriptor.
/// </para>
/// <para>
/// Sync slots. Several fdatasyncs of one segment may be in flight at once (the transaction merger overlaps the sync
/// of one group with the next), and each runs on a file handle of its own: slot 0 is the writable file, further
/// slots are handles opened on demand. Linux reports a failed page writeback to the next fsync of every open file
/// description once, so two concurrent syncs on one handle could let one of them consume the error that belongs to
/// the other's pages, which would then report success; on separate handles each sync sees every error raised since
/// its own handle's last sync. Slots are rented and returned, and <see cref="SyncedLength"/> is advanced, under the
/// journal's write lock.
/// </para>
/// <para>
/// Lifetime. The journal's segment list holds the owner reference; readers hold reader references. A reader takes
/// one with <see cref="TryAcquire"/> before touching the mapping and gives it back with <see cref="Release(int)"/>
/// when it moves on. Purge (or dispose) marks the segment for deletion and drops the owner reference
/// (<see cref="ReleaseOwner"/>); whoever drops the last reference unmaps the file, closes it, and then deletes it.
/// A file is therefore never deleted while open or mapped (required on Windows, and it keeps a purged segment
/// readable by the readers already inside it).
/// </para>
/// <para>
/// Reader references are striped: one counter per processor stripe, each on its own 128-byte block, so readers on
/// different cores entering and leaving the segment (every short-range query does both) do not bounce one cache
/// line between cores. A reader releases the stripe it acquired (<see cref="TryAcquire"/> returns it), so no stripe
/// goes below zero. The protocol, all with full fences (<see cref="Interlocked"/>):
/// <list type="bullet">
/// <item>acquire: increment the stripe, then read <c>_closing</c>; if it is set, decrement and fail (a purged
/// segment admits no new reader);</item>
/// <item>release: decrement the stripe, then read <c>_closing</c>; if it is set, try to finalize;</item>
/// <item>owner release: set <c>_closing</c>, then try to finalize;</item>
/// <item>finalize: if every stripe reads zero, the one thread that wins a CAS on <c>_finalized</c> unmaps, closes and
/// deletes.</item>
/// </list>
/// Why a finalizer that reads every stripe as zero is right although it reads them one by one: a reader inside the
/// segment incremented its stripe and then read <c>_closing</c> as clear; the finalizer set <c>_closing</c> and then
/// read the stripes. With full fences on both sides the two cannot both miss the other's write (store-buffering
/// litmus), so the finalizer sees that reader's count unless the reader already released. A reader that increments
/// after the finalizer read its stripe must see <c>_closing</c> set, so it backs out without touching the mapping.
/// </para>
/// </summary>
internal sealed class JournalSegment
{
    private IStorageFile? _file;
    private readonly IStorageFile?[] _syncFiles = new IStorageFile?[MaxSyncSlots]; // slot 0 is _file; [0] stays unused
    private readonly Func<string, IStorageFile> _openSyncHandle;
    private int _busySyncSlots;
    private readonly StorageMapping _mapping;
    private readonly Action<JournalSegment>? _deleteFile;
    // Stripe counters at StripeStride-int spacing, the first one a full stride past the array header.
    private const int StripeStride = 32;
    private static readonly int s_stripeMask = (int)System.Numerics.BitOperations.RoundUpToPowerOf2(
        (uint)Math.Clamp(Environment.ProcessorCount, 1, 64)) - 1;
    private readonly int[] _readerStripes = new int[(s_stripeMask + 2) * StripeStride];
    private int _closing;
    private int _finalized;
    private int _deleteOnRelease;
    private long _committedLength;
    private long _sealedLength = -1;
    private long _firstTimestamp = long.MaxValue;
    private long _filledLength;
    private bool _fillStopped;

    /// <summary>The most syncs of one segment in flight at once (each on its own handle).</summary>
    public const int MaxSyncSlots = 8;

    public JournalSegment(IStorageFile file, long firstSequence, long capacity, long dataLength,
        Action<JournalSegment>? deleteFile, Func<string, IStorageFile>? openSyncHandle = null)
    {
        _file = file;
        _openSyncHandle = openSyncHandle ?? (static path => new PhysicalStorageFile(path, FileMode.Open));
        SyncedLength = dataLength;
        Path = file.Path;
        _deleteFile = deleteFile;
        FirstSequence = firstSequence;
        Capacity = capacity;
        WrittenLength = dataLength;
        _committedLength = dataLength;
        _mapping = file.MapReadOnly(capacity);
        Index = new SegmentIndex(this);
    }

    /// <summary>The full path of the file.</summary>
    public string Path { get; }

    /// <summary>The sequence number of the first entry this segment holds (or will hold).</summary>
    public long FirstSequence { get; }

    /// <summary>The file size: records may use bytes up to here.</summary>
    public long Capacity { get; }

    /// <summary>How far the file is zero-filled and synced from its start: records are written only below it. Raised
    /// under the journal's fill lock (release); read by the writer (acquire).</summary>
    public long FilledLength
    {
        get => Volatile.Read(ref _filledLength);
        set => Volatile.Write(ref _filledLength, value);
    }

    /// <summary>Under the journal's fill lock: whether the segment takes no more fills (sealed, or the journal is
    /// closing).</summary>
    public bool FillStopped => _fillStopped;

    /// <summary>Under the journal's fill lock: no fill of this segment starts after this returns.</summary>
    public void StopFilling() => _fillStopped = true;

    /// <summary>Writer-owned: the end of the last record written (durable or not).</summary>
    public long WrittenLength { get; set; }

    /// <summary>Writer-owned (under the journal's write lock): the end of the bytes a completed sync made
    /// durable.</summary>
    public long SyncedLength { get; private set; }

    /// <summary>Writer-owned after sealing: the sequence number of the last entry, or FirstSequence - 1 when
    /// empty.</summary>
    public long LastSequence { get; set; }

    /// <summary>Writer-owned: the timestamp of the last record, or <see cref="long.MinValue"/> when empty.</summary>
    public long LastTimestamp { get; set; } = long.MinValue;

    /// <summary>The timestamp of the first record, or <see cref="long.MaxValue"/> while the segment is empty. Set
    /// once.</summary>
    public long FirstTimestamp
    {
        get => Volatile.Read(ref _firstTimestamp);
        set => Volatile.Write(ref _firstTimestamp, value);
    }

    /// <summary>
    /// The final length of a sealed segment (synced by the rotation that sealed it), or -1 while it is active. Written
    /// once by the writer before the segment list naming its successor is published; read by whoever publishes a
    /// commit in a later segment, which first publishes this as the sealed segment's committed length.
    /// </summary>
    public long SealedLength => Volatile.Read(ref _sealedLength);

    /// <summary>Writer, at rotation, after the fdatasync that made the segment durable: records its final
    /// length.</summary>
    public void Seal() => Volatile.Write(ref _sealedLength, WrittenLength);

    /// <summary>Bytes below this offset are durable and immutable. Release-written by the syncer, acquire-read by
    /// readers.</summary>
    public long CommittedLength => Volatile.Read(ref _committedLength);

    /// <summary>The lazily built sequence/timestamp index, shared by all readers.</summary>
    public SegmentIndex Index { get; }

    /// <summary>The writable file, for the writer; closed once the segment is sealed (readers use the
    /// mapping).</summary>
    public IStorageFile File => _file
        ?? throw new ObjectDisposedException(Path, "The segment is sealed; its file is closed.");

    /// <summary>Closes the writable file (and the extra sync handles) of a sealed, synced segment. The mapping stays
    /// valid. Idempotent.</summary>
    public void CloseFile()
    {
        Interlocked.Exchange(ref _file, null)?.Dispose();
        for (int slot = 1; slot < _syncFiles.Length; slot++)
        {
            Interlocked.Exchange(ref _syncFiles[slot], null)?.Dispose();
        }
    }

    /// <summary>
    /// Under the journal's write lock: a sync slot no sync in flight uses, its handle opened if it is new. Give it back
    /// with <see cref="ReturnSyncSlot"/>.
    /// </summary>
    /// <exception cref="InvalidOperationException">All <see cref="MaxSyncSlots"/> slots are in use.</exception>
    public int RentSyncSlot()
    {
        int slot = System.Numerics.BitOperations.TrailingZeroCount(~_busySyncSlots);
        if (slot >= MaxSyncSlots)
        {
            throw new InvalidOperationException($"More than {MaxSyncSlots} syncs of segment '{Path}' are in flight.");
        }

        if (slot > 0 && Volatile.Read(ref _syncFiles[slot]) is null)
        {
            _ = File; // a sealed segment whose file is closed has nothing left to sync
            Volatile.Write(ref _syncFiles[slot], _openSyncHandle(Path));
        }

        _busySyncSlots |= 1 << slot;
        return slot;
    }

    /// <summary>The handle of a rented sync slot.</summary>
    public IStorageFile SyncFile(int slot) => slot == 0 ? File : Volatile.Read(ref _syncFiles[slot])
        ?? throw new ObjectDisposedException(Path, "The segment is sealed; its files are closed.");

    /// <summary>Under the journal's write lock: gives a sync slot back.</summary>
    public void ReturnSyncSlot(int slot) => _busySyncSlots &= ~(1 << slot);

    /// <summary>Under the journal's write lock: a sync that captured <paramref name="length"/> succeeded.</summary>
    public void MarkSynced(long length) => SyncedLength = Math.Max(SyncedLength, length);

    /// <summary>Committed bytes, for a reader holding a reference.</summary>
    public ReadOnlySpan<byte> Span(long offset, long length) => _mapping.Span(offset, checked((int)length));

    /// <summary>Publishes a new committed length; only ever grows.</summary>
    /// <remarks>Two publishers may race (a merger group and a caller of Sync): the larger length wins.</remarks>
    public void PublishCommittedLength(long length) => AtomicMaximum.TryRaise(ref _committedLength, length);

    /// <summary>
    /// Takes a reader reference unless the owner reference was dropped (the segment was purged or the journal
    /// disposed). Give it back with <see cref="Release(int)"/> and the returned stripe.
    /// </summary>
    /// <param name="stripe">The stripe to release; meaningful only when the result is true.</param>
    /// <returns>Whether the reference was taken.</returns>
    public bool TryAcquire(out int stripe)
    {
        stripe = Thread.GetCurrentProcessorId() & s_stripeMask;
        Interlocked.Increment(ref StripeCounter(stripe));
        if (Volatile.Read(ref _closing) == 0)
        {
            return true;
        }

        Release(stripe);
        return false;
    }

    /// <summary>Drops a reader reference taken on <paramref name="stripe"/>; the last reference finalizes a closing
    /// segment.</summary>
    /// <param name="stripe">The stripe <see cref="TryAcquire"/> returned.</param>
    public void Release(int stripe)
    {
        Interlocked.Decrement(ref StripeCounter(stripe));
        if (Volatile.Read(ref _closing) != 0)
        {
            TryFinalize();
        }
    }

    /// <summary>Drops the owner (segment list) reference: no new reader gets in; the last one out finalizes.
    /// Idempotent.</summary>
    public void ReleaseOwner()
    {
        Interlocked.Exchange(ref _closing, 1);
        TryFinalize();
    }

    /// <summary>The reader counter of <paramref name="stripe"/>, alone on its 128 bytes.</summary>
    private ref int StripeCounter(int stripe) => ref _readerStripes[(stripe + 1) * StripeStride];

    private void TryFinalize()
    {
        for (int i = 0; i <= s_stripeMask; i++)
        {
            if (Volatile.Read(ref StripeCounter(i)) != 0)
            {
                return;
            }
        }

        if (Interlocked.CompareExchange(ref _finalized, 1, 0) == 0)
        {
            _mapping.Dispose();
            CloseFile();
            if (Volatile.Read(ref _deleteOnRelease) != 0)
            {
                _deleteFile?.Invoke(this);
            }
        }
    }

    /// <summary>Marks the segment so that the last release deletes its file.</summary>
    public void MarkForDeletion() => Volatile.Write(ref _deleteOnRelease, 1);

    /// <summary>The current references: the owner's (until dropped) plus the readers' (tests and diagnostics; not a
    /// snapshot).</summary>
    internal int ReferenceCount
    {
        get
        {
            int count = Volatile.Read(ref _closing) == 0 ? 1 : 0;
            for (int i = 0; i <= s_stripeMask; i++)
            {
                count += Volatile.Read(ref StripeCounter(i));
            }

            return count;
        }
    }

    /// <summary>Whether the last reference was dropped and the mapping released (tests).</summary>
    internal bool IsFinalized => Volatile.Read(ref _finalized) != 0;

    public override string ToString()
        => $"{System.IO.Path.GetFileName(Path)} (committed {CommittedLength} of {Capacity} bytes)";
}
