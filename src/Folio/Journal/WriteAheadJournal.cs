using Folio.Storage;
using Microsoft.Extensions.Logging;

namespace Folio.Journal;

/// <summary>
/// A segmented, checksummed write-ahead journal: records of entries appended by one writer, made durable with one
/// <see cref="Sync"/>, read back by any number of lock-free <see cref="JournalReader"/>s.
/// <para>
/// Protocol. <b>Appends</b> and rotation run under <see cref="_writeLock"/> (the commit path has one writer at a
/// time; the lock makes misuse safe, not fast). A <b>sync</b> captures the active segment's written length and last
/// sequence under the write lock (<see cref="TryBeginSync"/>), fdatasyncs outside it on a file handle no other sync
/// in flight uses (<see cref="CompleteSync"/>; so the next group can be appended, and even synced, while the previous
/// one syncs), then publishes (<see cref="PublishSync"/>), in this order, the segment's committed length and the
/// journal's committed sequence, both as monotonic maxima with release semantics, and wakes tailing readers. A reader
/// that observes committed sequence S (acquire) therefore also observes committed lengths that cover every record up
/// to S. <see cref="Sync"/> does all three steps under <see cref="_syncLock"/>; the transaction merger runs them
/// itself, with as many syncs in flight as its MaxGroupsInFlight, and publishes in commit order only after every
/// earlier sync succeeded and the group was applied to the store's state.
/// </para>
/// <para>
/// Publication has one owner. A completed sync or a rotation only records that bytes are durable
/// (<see cref="JournalSegment.MarkSynced"/>, <see cref="DurableSequence"/>, a sealed segment's
/// <see cref="JournalSegment.SealedLength"/>); nothing but <see cref="Publish"/> (called by <see cref="Sync"/>, or by
/// the transaction merger in commit order) moves what readers see. Publishing a position in a later segment first
/// publishes every earlier sealed segment's full length, so a reader that observes the committed sequence finds every
/// record below it. A rotation that published the sealed segment itself once let a reader see a group whose own
/// fsync was still in flight, before it was applied or acknowledged.
/// </para>
/// <para>
/// The segment list is an immutable <see cref="SegmentSet"/> replaced under <see cref="_segmentsLock"/> (rotation,
/// purge; purge never takes the write lock, so it never stalls appends): the new set is written first, then
/// <see cref="_segmentsVersion"/> is advanced with <see cref="Interlocked.Increment(ref long)"/>. Readers compare
/// that version with the one they cached and re-read the set only when it moved. Lock order: sync, write, segments.
/// </para>
/// <para>
/// Durability. Segments are created at full length as holes and zero-filled ahead of the writer (in the background,
/// a growing piece at a time; see <see cref="JournalSegment"/>), so an fdatasync on the commit path flushes data pages
/// only, while a store's journal takes on disk about what it holds rather than whole segments; a segment is
/// fdatasynced before its successor receives a record, so after a crash only the newest segment can have a torn
/// tail. On ext4, pwrite + fdatasync into a zero-filled file beats an
/// O_DSYNC (write-through) handle with page-aligned writes, appends to a growing file, and fallocate'd files
/// (docs/measurements.md, "Durability technique").
/// </para>
/// </summary>
public sealed partial class WriteAheadJournal : IDisposable, IAsyncDisposable
{
    private readonly IFileSystem _fileSystem;
    private readonly ILogger _logger;
    private readonly TimeProvider _timeProvider;
    private readonly long _segmentSize;
    private readonly long _minFillPiece;
    private readonly long _maxFillPiece;
    private readonly long _newJournalFirstSequence;
    private readonly long _newJournalPreviousTimestamp;
    private readonly IDisposable _directoryLock;
    private readonly string? _lockName; // the lock file's name when it was taken (see FolderLock)
    private readonly Lock _writeLock = new();
    private readonly Lock _syncLock = new();
    private readonly Lock _segmentsLock = new();
    private readonly Lock _markLock = new();
    private JournalDurableMark _lastMark; // under _markLock: the mark on disk
    private long _appendsAtIdleCheck; // under _writeLock
    // under _writeLock: Environment.TickCount64 of the last idle mark
    private long _lastIdleMarkTicks = long.MinValue / 2;

    /// <summary>The least time between two marks written because the store went idle (each costs three
    /// fsyncs).</summary>
    private const long IdleMarkIntervalMilliseconds = 1000;

    /// <summary>After the disk had no room for the next segment, how long rotations fail at once before one tries to
    /// create it again.</summary>
    internal static readonly TimeSpan PreparationRetryInterval = TimeSpan.FromSeconds(1);

    // Published to readers.
    private SegmentSet _segmentSet;
    private long _segmentsVersion;
    private long _committedSequence;
    private long _durableSequence;
    private long _purgedTimestamp; // under _segmentsLock: the record time of entry FirstSequence - 1 (0: unknown)
    private TaskCompletionSource _commitSignal = NewSignal();
    private int _signalWaiters; // tailing readers awaiting _commitSignal (Interlocked)
    private IOException? _diskFull; // written under _writeLock (Volatile), read by diagnostics
    private IOException? _fillDiskFull; // the last zero-fill's "no space" until one succeeds: under _fillLock
    private int _disposed;

    // Writer-owned (under _writeLock).
    private JournalSegment _active;
    private long _nextSequence;
    private long _lastTimestamp;
    private Guid _storeId; // set by recovery, before any segment is created; read-only afterwards
    private Task<string>? _preparedSegment;
    private Exception? _preparationFailure; // the last preparation's failure, until one succeeds (Volatile writes)
    private long _preparationFailedAt; // _timeProvider's timestamp of that failure
    private bool _rotationMarkPending; // a rotation's mark is not written yet (a full disk): written before a record
    private readonly List<JournalSegment> _sealedWithOpenFiles = [];
    private int _syncsInFlight;
    private Exception? _fault;
    private long _appendedRecords;
    private long _appendedBytes;
    private Task? _backgroundFill; // the active segment's fill ahead of the writer, if one was started

    // Held by whoever zero-fills the active segment (see JournalSegment); taken after _writeLock, never before it.
    private readonly Lock _fillLock = new();

    private WriteAheadJournal(string directory, JournalOptions options, IDisposable directoryLock)
    {
        Directory = directory;
        _fileSystem = options.FileSystem;
        _logger = Diagnostics.GuardedLogger.Create<WriteAheadJournal>(options.LoggerFactory);
        _timeProvider = options.TimeProvider;
        _segmentSize = options.SegmentSize;
        _minFillPiece = Math.Max(256, options.MinFillPiece);
        _maxFillPiece = Math.Max(_minFillPiece, options.MaxFillPiece);
        _newJournalFirstSequence = options.NewJournalFirstSequence;
        _newJournalPreviousTimestamp = options.NewJournalPreviousTimestamp;
        _directoryLock = directoryLock;
        _lockName = FolderLock.NameOf(directoryLock);
        _segmentSet = new SegmentSet([], 0);
        _active = null!;
    }

    /// <summary>
    /// Opens the journal in <paramref name="directory"/> (created when missing), recovering what a previous process
    /// left: every segment is checked (magic, checksums, sequence continuity), a torn tail of the newest segment is
    /// truncated and logged, and damage anywhere else throws <see cref="JournalCorruptedException"/>.
    /// </summary>
    /// <param name="directory">The journal folder; it holds one lock file and the segment files.</param>
    /// <param name="options">Settings; null means the defaults.</param>
    /// <returns>The open journal. The folder stays locked until it is disposed.</returns>
    /// <exception cref="StoreLockedException">The folder is already open, in this or another process.</exception>
    /// <exception cref="JournalCorruptedException">The journal holds damage a torn tail cannot explain.</exception>
    public static WriteAheadJournal Open(string directory, JournalOptions? options = null)
        => Open(directory, options, checkpoint: null);

    /// <summary>
    /// Opens the journal of a store whose data file holds its entries up to a checkpoint: once the folder is locked,
    /// <paramref name="checkpoint"/> returns that checkpoint's sequence, and recovery walks the records whose
    /// entries all lie at or below it without checksumming them (readers check them when they read them), and the id
    /// of the store the data file says it belongs to (<see cref="Guid.Empty"/>: none), which every segment must match.
    /// Null: every record is checked.
    /// </summary>
    internal static WriteAheadJournal Open(string directory, JournalOptions? options,
        Func<CheckpointOfJournal>? checkpoint)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(directory);
        options ??= new JournalOptions();
        options.Validate();
        directory = Path.GetFullPath(directory);
        options.FileSystem.CreateDirectory(directory);
        string lockFile = Path.Combine(directory, JournalFormat.LockFileName);
        IDisposable directoryLock;
        try
        {
            directoryLock = options.FileSystem.AcquireExclusiveLock(lockFile);
        }
        catch (IOException e) when (LockConflictError.Matches(e))
        {
            // Only a lock another handle holds: a lock file that cannot be opened (a read-only file system) is that
            // error, not a phantom second instance.
            throw new StoreLockedException(directory, lockFile, e);
        }

        var journal = new WriteAheadJournal(directory, options, directoryLock);
        try
        {
            CheckpointOfJournal covered = checkpoint?.Invoke() ?? default;
            journal.Recover(covered.Sequence, covered.StoreId, covered.StoreIdSource);
            return journal;
        }
        catch
        {
            journal.Dispose();
            throw;
        }
    }

    /// <summary>The full path of the journal folder.</summary>
    public string Directory { get; }

    /// <summary>The id of the store this journal belongs to, written into every segment it creates: the one its
    /// segments (or the data file's checkpoint) carry, or a new one for a journal that had none.</summary>
    internal Guid StoreId => _storeId;

    /// <summary>What recovery found and did when the journal opened.</summary>
    public JournalRecoveryInfo Recovery { get; private set; } = null!;

    /// <summary>
    /// The sequence number of the newest durable entry (0 when the journal has none). Readers never see past it.
    /// </summary>
    public long CommittedSequence => Volatile.Read(ref _committedSequence);

    /// <summary>The error of the last rotation that found the disk full, until a rotation completes: appends that
    /// need a new segment meanwhile fail with <see cref="StoreFullException"/>. Null otherwise.</summary>
    internal IOException? DiskFull => Volatile.Read(ref _diskFull) ?? Volatile.Read(ref _fillDiskFull);

    /// <summary>The error of the last rotation that could not create its next segment for a cause other than a full
    /// disk (no file descriptor or thread to spare, a folder that refuses new files), until a preparation succeeds:
    /// appends that need a new segment meanwhile fail with <see cref="StoreUnavailableException"/>. Null
    /// otherwise.</summary>
    internal Exception? SegmentUnavailable =>
        Volatile.Read(ref _preparationFailure) is { } failure && !DiskFullError.Matches(failure) ? failure : null;

    /// <summary>
    /// The newest sequence number a completed sync (or a rotation's seal) made durable. It may be ahead of
    /// <see cref="CommittedSequence"/>: durable entries are published by their owner, in order.
    /// </summary>
    /// <summary>The size of the segments this journal creates, in bytes.</summary>
    internal long SegmentSize => _segmentSize;

    /// <summary>The time (UTC ticks) of the newest record, or of the newest segment's creation when no record is
    /// left: no later record gets an earlier time (the appender never goes below it). Read after the open, before
    /// appends, or under the write lock.</summary>
    internal long LastTimestampTicks => _lastTimestamp;

    internal long DurableSequence => Volatile.Read(ref _durableSequence);

    /// <summary>The sequence number of the newest appended entry, durable or not (0 when none).</summary>
    public long LastAppendedSequence
    {
        get
        {
            lock (_writeLock)
            {
                return _nextSequence - 1;
            }
        }
    }

    /// <summary>The oldest sequence number still in the journal (entries before it were purged).</summary>
    public long FirstSequence
    {
        get
        {
            JournalSegment[] segments = Volatile.Read(ref _segmentSet).Segments;
            if (segments.Length == 0)
            {
                ThrowHelper.ThrowObjectDisposed(nameof(WriteAheadJournal));
            }

            return segments[0].FirstSequence;
        }
    }

    /// <summary>The number of segment files (tests and diagnostics).</summary>
    public int SegmentCount => Volatile.Read(ref _segmentSet).Segments.Length;

    /// <summary>The largest record a single <see cref="Append(ReadOnlySpan{ReadOnlyMemory{byte}})"/> may write, in
    /// bytes.</summary>
    public long MaxRecordSize => _segmentSize - JournalFormat.SegmentHeaderSize;

    internal bool IsDisposed => Volatile.Read(ref _disposed) != 0;

    /// <summary>Records appended since open (diagnostics and benchmarks: one per commit group).</summary>
    internal long AppendedRecords => Volatile.Read(ref _appendedRecords);

    /// <summary>Bytes of records appended since open (written under the write lock, read with an acquire read from
    /// any thread): the checkpointer measures the journal after its last checkpoint by it.</summary>
    internal long AppendedBytes => Volatile.Read(ref _appendedBytes);

    internal long SegmentsVersion => Volatile.Read(ref _segmentsVersion);

    internal SegmentSet Segments => Volatile.Read(ref _segmentSet);

    /// <summary>Completes at the next commit (or at dispose). Read it before checking
    /// <see cref="CommittedSequence"/>.</summary>
    internal Task CommitSignal => Volatile.Read(ref _commitSignal).Task;

    /// <summary>A tailing reader is about to await <see cref="CommitSignal"/>; it calls
    /// <see cref="ExitSignalWait"/> when the wait ends.</summary>
    internal void EnterSignalWait() => Interlocked.Increment(ref _signalWaiters);

    internal void ExitSignalWait() => Interlocked.Decrement(ref _signalWaiters);

    /// <summary>Opens a reader positioned at <paramref name="fromSequence"/>.</summary>
    /// <param name="fromSequence">The first sequence number to read; at least <see cref="FirstSequence"/>. A number
    /// past the end is allowed: the reader waits until that entry is committed.</param>
    /// <returns>A reader; dispose it to release the segment it holds.</returns>
    /// <exception cref="JournalPositionPurgedException"><paramref name="fromSequence"/> was purged.</exception>
    public JournalReader OpenReader(long fromSequence)
    {
        ThrowIfDisposed();
        if (fromSequence < 1)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(fromSequence), fromSequence,
                "Journal sequence numbers start at 1.");
        }

        long first = FirstSequence;
        if (fromSequence < first)
        {
            ThrowHelper.ThrowPositionPurged(fromSequence, first);
        }

        return new JournalReader(this, fromSequence);
    }

    /// <summary>
    /// The time (UTC ticks) of the record that holds committed entry <paramref name="sequence"/>, for an entry the
    /// journal holds or the last one it purged (the purge watermark keeps its time); false when the journal cannot
    /// tell (an older purge, or no such entry). Backups name the entry they follow by it.
    /// </summary>
    internal bool TryGetRecordTimestamp(long sequence, out long timestampTicks)
    {
        timestampTicks = 0;
        if (sequence < 1 || sequence > CommittedSequence)
        {
            return false;
        }

        lock (_segmentsLock)
        {
            // Under the lock no purge runs, so the entry read below stays in the journal.
            long first = FirstSequence;
            if (sequence < first)
            {
                timestampTicks = sequence == first - 1 ? _purgedTimestamp : 0;
                return timestampTicks != 0;
            }

            using JournalReader reader = OpenReader(sequence);
            try
            {
                if (!reader.TryRead(out JournalEntry entry) || entry.Sequence != sequence)
                {
                    return false;
                }

                timestampTicks = entry.TimestampTicks;
                return true;
            }
            catch (JournalCorruptedException)
            {
                return false; // the entry's record is damaged: its time is unknown (a backup after it copies none)
            }
        }
    }

    /// <summary>
    /// Opens a reader positioned at the first committed entry whose timestamp is at or after
    /// <paramref name="fromTimestamp"/>, or at the end of the committed entries when there is none.
    /// </summary>
    /// <param name="fromTimestamp">The time to seek to.</param>
    /// <returns>A reader; dispose it to release the segment it holds.</returns>
    public JournalReader OpenReader(DateTimeOffset fromTimestamp)
    {
        ThrowIfDisposed();
        var reader = new JournalReader(this, FirstSequence);
        try
        {
            reader.SeekToTimestamp(fromTimestamp.UtcTicks);
            return reader;
        }
        catch
        {
            reader.Dispose();
            throw;
        }
    }

    /// <inheritdoc/>
    public void Dispose()
    {
        lock (_syncLock)
        {
            lock (_writeLock)
            {
                if (Interlocked.Exchange(ref _disposed, 1) != 0)
                {
                    return;
                }

                if (_fault is null && Recovery is not null)
                {
                    // A clean close records how far the journal is durable; a journal whose open failed (Recovery is
                    // set last) writes nothing: its mark is evidence the next open must see again.
                    TryWriteMark(CaptureMarkLocked());
                }

                try
                {
                    _preparedSegment?.Wait();
                }
                catch (AggregateException)
                {
                    // A failed preparation left at most a temporary file; recovery deletes it.
                }

                if (_active is not null) // null when the open failed
                {
                    StopFilling(_active); // waits for a fill in progress, so no fill writes to a file closed below
                }

                lock (_segmentsLock)
                {
                    foreach (JournalSegment segment in _segmentSet.Segments)
                    {
                        segment.ReleaseOwner();
                    }

                    PublishSegments([]);
                }

                _directoryLock.Dispose();
            }
        }

        WakeTailers();
    }

    /// <inheritdoc/>
    public ValueTask DisposeAsync()
    {
        Dispose();
        return ValueTask.CompletedTask;
    }

    private static TaskCompletionSource NewSignal() => new(TaskCreationOptions.RunContinuationsAsynchronously);

    private void ThrowIfDisposed()
    {
        if (Volatile.Read(ref _disposed) != 0)
        {
            ThrowHelper.ThrowObjectDisposed(nameof(WriteAheadJournal));
        }
    }

    /// <summary>Publishes a new segment list: the set first, then the version readers poll. Under the segments
    /// lock.</summary>
    private void PublishSegments(JournalSegment[] segments)
    {
        Volatile.Write(ref _segmentSet, new SegmentSet(segments, _segmentsVersion + 1));
        Interlocked.Increment(ref _segmentsVersion);
    }

    /// <summary>
    /// Publishes durable entries up to <paramref name="position"/> to readers: the full length of every earlier sealed
    /// segment not yet published, then the position's segment length, then the committed sequence, each only ever
    /// growing; wakes tailing readers. The caller owns publication (see the protocol) and knows the bytes are durable.
    /// </summary>
    internal void Publish(in JournalPosition position)
    {
        JournalSegment segment = position.Segment;
        JournalSegment[] segments = Volatile.Read(ref _segmentSet).Segments;
        int at = segments.Length - 1;
        while (at >= 0 && segments[at] != segment)
        {
            at--; // usually the newest: a search from the end stops at once
        }

        for (int i = at - 1; i >= 0; i--)
        {
            JournalSegment sealedSegment = segments[i];
            long sealedLength = sealedSegment.SealedLength;
            if (sealedLength < 0 || sealedSegment.CommittedLength >= sealedLength)
            {
                break; // published already, and so is everything before it
            }

            sealedSegment.PublishCommittedLength(sealedLength);
        }

        PublishCommitted(segment, position.Length, position.Sequence);
    }

    /// <summary>Records that a sync made every entry up to <paramref name="sequence"/> durable (monotonic
    /// maximum).</summary>
    private void AdvanceDurable(long sequence) => AtomicMaximum.TryRaise(ref _durableSequence, sequence);

    /// <summary>Publishes durable progress: segment length before sequence, both only ever growing; wakes
    /// tailers.</summary>
    private void PublishCommitted(JournalSegment segment, long committedLength, long committedSequence)
    {
        segment.PublishCommittedLength(committedLength);
        if (AtomicMaximum.TryRaise(ref _committedSequence, committedSequence))
        {
            WakeTailers();
        }
    }

    /// <summary>
    /// Replaces the commit signal and completes the old one. The publishing thread is usually a caller's own (the
    /// first waiter commits) and goes back to that caller's code next, which may block; a continuation the signal
    /// queued to that thread's local queue would wait for it while other pool threads found work elsewhere. So when
    /// a reader waits (the count is read after the exchange's full fence; a reader that enters after it was read is
    /// still woken, through the local queue), the signal is completed from the pool's global queue.
    /// </summary>
    private void WakeTailers()
    {
        TaskCompletionSource signal = Interlocked.Exchange(ref _commitSignal, NewSignal());
        if (Volatile.Read(ref _signalWaiters) == 0)
        {
            signal.TrySetResult();
        }
        else
        {
            ThreadPool.UnsafeQueueUserWorkItem(static signal => signal.TrySetResult(), signal, preferLocal: false);
        }
    }

    /// <summary>
    /// Writes the durable mark (see <see cref="JournalDurableMark"/>) when nothing was appended since the previous
    /// call and the journal is durable beyond the mark on disk, at most once a second: the store's timer calls it, so
    /// an idle store's last synced records are protected from being mistaken for a torn tail. A failure is logged,
    /// not thrown.
    /// </summary>
    internal void MarkDurableIfIdle()
    {
        JournalDurableMark mark;
        lock (_writeLock)
        {
            long appended = _appendedRecords;
            bool idle = appended == _appendsAtIdleCheck;
            _appendsAtIdleCheck = appended;
            long now = Environment.TickCount64;
            if (!idle || now - _lastIdleMarkTicks < IdleMarkIntervalMilliseconds || _fault is not null
                || Volatile.Read(ref _disposed) != 0)
            {
                return;
            }

            mark = CaptureMarkLocked();
            lock (_markLock) // lock order: write, then mark (as at rotation)
            {
                if (!mark.IsAhead(_lastMark))
                {
                    return;
                }
            }

            _lastIdleMarkTicks = now;
        }

        TryWriteMark(mark);
    }

    /// <summary>
    /// Before a write or delete by path (a new segment, a mark, the purge watermark, a purge): throws, and faults the
    /// journal, when its folder was deleted or moved while it is open (see <see cref="FolderLock"/>), so it never
    /// touches the files of a store another process may have created at the same path since.
    /// </summary>
    private void EnsureFolderIsOurs(string what)
    {
        if (FolderLock.IsStillAt(_directoryLock, _lockName))
        {
            return;
        }

        var error = new IOException($"The folder of journal '{Directory}' was deleted or moved while the journal was " +
            $"open (its lock file is no longer at its path), so it did not {what}: writes by path could touch the " +
            "files of another store made there since. The journal accepts no more writes; what it acknowledged is in " +
            "the files it had open, which are gone with the folder.");
        Fault(error);
        throw new StoreFaultedException(error.Message, error);
    }

    /// <summary>Under the write lock: what is durable now.</summary>
    private JournalDurableMark CaptureMarkLocked()
        => new(Volatile.Read(ref _durableSequence), _active.FirstSequence, _active.SyncedLength, _storeId);

    /// <summary>Writes <paramref name="mark"/> unless the mark on disk says as much; throws on I/O failure.</summary>
    private void WriteMark(in JournalDurableMark mark)
    {
        EnsureFolderIsOurs("write its durable mark"); // before the mark lock: faulting takes the write lock
        lock (_markLock)
        {
            if (mark.IsAhead(_lastMark))
            {
                mark.Write(_fileSystem, Directory);
                _lastMark = mark;
            }
        }
    }

    private void TryWriteMark(in JournalDurableMark mark)
    {
        try
        {
            WriteMark(mark);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException or StoreFaultedException)
        {
            JournalLog.MarkFailed(_logger, Directory, e);
        }
    }

    /// <summary>Opens another handle of a segment file for a concurrent sync
    /// (<see cref="JournalSegment.RentSyncSlot"/>).</summary>
    private Storage.IStorageFile OpenSyncHandle(string path) => _fileSystem.OpenFile(path, FileMode.Open);

    private void DeleteSegmentFile(JournalSegment segment)
    {
        try
        {
            _fileSystem.DeleteFile(segment.Path);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            JournalLog.DeleteFailed(_logger, segment.Path, e);
        }
    }
}
