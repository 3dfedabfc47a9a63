using System.Buffers;
using System.Buffers.Binary;
using Folio.Storage;
using Microsoft.Win32.SafeHandles;

namespace Folio.Journal;

/// <summary>
/// Reads a journal's committed entries from its segment files, without opening the journal: no lock, no mapping, no
/// shared state, so it works while the journal is open for writing in another process (or in this one).
/// <para>
/// Owners. One consumer at a time (like an enumerator). The writer, elsewhere, only appends records behind the end of
/// its data, renames a prepared segment into place when it rotates (the new file's header is written and synced
/// before the rename), and deletes whole segments when it purges; it never rewrites a record a reader may have read,
/// except a torn tail its recovery discards after a crash.
/// </para>
/// <para>
/// What is returned. A record is returned only once it is complete: its header has the right shape, its checksum
/// matches, its entries fill it, and it starts where the record before it ended (the segment's first sequence for its
/// first record); entries before the sequence the follower started at are skipped. A record that is not complete yet
/// (the writer is still writing it, or crashed in the middle) ends what <see cref="ReadAvailable"/> returns, and is
/// read again at the next call. The segment ends where no further record is; the follower moves to the segment named
/// after the sequence that follows the segment's last record once that file exists. Damage at a place the writer has
/// moved past (the next segment exists, or a complete record names other sequences than those that follow) is a
/// <see cref="JournalCorruptedException"/>. A next segment that is missing while later ones exist was purged before
/// the follower got to it (a <see cref="JournalPositionPurgedException"/>, not an endless wait), unless its own
/// segment has a complete record by then: the writer may finish the record the follower found incomplete and rotate
/// between the follower's look at its segment and its look at the folder, and the next file is then named after
/// those records, so the follower reads on in its segment first. Every segment that
/// names a store id must name the one the first such segment named: a segment of another store is a
/// <see cref="JournalCorruptedException"/> too.
/// Only durable records are returned, so no consumer sees a change a power loss could take back: a record a later
/// record's header covers (its synced length: what the writer's fdatasync had made durable when it wrote that
/// record), or one the follower made durable itself (fdatasync of the segment, on Linux) when the caller allows it.
/// </para>
/// </summary>
internal sealed class JournalFollower : IDisposable
{
    private readonly string _directory;
    private long _nextSequence; // the next entry to return
    private SafeFileHandle? _segment;
    private string _segmentPath = "";
    private long _segmentLength;
    private long _offset; // where the next record of _segment starts
    private byte[] _buffer = [];
    private long _segmentNext; // the first sequence of the current segment's next record
    private long _durableEnd; // the current segment's bytes a record header says a writer's fdatasync covered
    private readonly List<TakenRecord> _taken = []; // records of the current segment the current call took from
    private bool _disposed;

    /// <summary>The most bytes of entries one <see cref="ReadAvailable"/> copies unless told otherwise: 4 MiB (past it
    /// by the last record's entries at most), so a journal of large documents is read a few at a time, not a thousand
    /// at a time.</summary>
    public const long DefaultReadBytes = 4 << 20;
    private StoreIdentity _identity; // the store the segments read so far name; every later one must name it too

    /// <param name="journalDirectory">The journal's folder (a store's <c>journal</c> folder).</param>
    /// <param name="fromSequence">The first entry to return; 1 or more.</param>
    public JournalFollower(string journalDirectory, long fromSequence)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        _directory = journalDirectory;
        _nextSequence = fromSequence;
    }

    /// <summary>
    /// The time (UTC ticks) of the record that holds entry <paramref name="sequence"/> in the journal folder's files,
    /// or of the last entry a purge removed (its watermark keeps that time); false when the files cannot tell (the
    /// entry is purged further back, not durable yet, or the watermark was written by an older build).
    /// </summary>
    public static bool TryGetRecordTimestamp(string journalDirectory, long sequence, out long timestampTicks)
    {
        timestampTicks = 0;
        if (sequence < 1)
        {
            return false;
        }

        var entries = new List<JournalEntryCopy>();
        for (int attempt = 0; attempt < 4; attempt++)
        {
            long firstRetained;
            long purgedTimestamp;
            try
            {
                (firstRetained, purgedTimestamp) =
                    WriteAheadJournal.ReadPurgeWatermark(PhysicalFileSystem.Instance, journalDirectory);
            }
            catch (JournalCorruptedException)
            {
                // A damaged watermark tells nothing (the store's next open writes it again); the segments may.
                (firstRetained, purgedTimestamp) = (0, 0);
            }

            if (sequence < firstRetained)
            {
                timestampTicks = sequence == firstRetained - 1 ? purgedTimestamp : 0;
                return timestampTicks != 0;
            }

            try
            {
                using var follower = new JournalFollower(journalDirectory, sequence);
                entries.Clear();
                if (follower.ReadAvailable(entries, 1) == 0 || entries[0].Sequence != sequence)
                {
                    return false;
                }

                timestampTicks = entries[0].TimestampTicks;
                return true;
            }
            catch (JournalPositionPurgedException)
            {
                // Purged between the watermark's read and the segment's: the new watermark may name it.
            }
            catch (JournalCorruptedException)
            {
                return false; // the entry's record is damaged: its time is unknown (a backup after it copies none)
            }
        }

        return false;
    }

    /// <summary>The sequence of the next entry <see cref="ReadAvailable"/> returns.</summary>
    public long NextSequence => _nextSequence;

    /// <summary>The sequence that follows the last complete record read so far, whether or not its entries were
    /// returned (those before the starting sequence are skipped): where the journal's records end, as far as the
    /// follower has read; 0 before it found a segment.</summary>
    public long RecordsEnd => _segment is null ? 0 : _segmentNext;

    /// <summary>
    /// Appends to <paramref name="entries"/> the complete records' entries from <see cref="NextSequence"/> on, as many
    /// as the files hold now (at least one record's worth when one is there, then up to
    /// <paramref name="maxEntries"/>), each with its own copy of its bytes, and only durable ones. A record is known
    /// durable when a later record's header says the writer's fdatasync covered it; for the records at the end that
    /// none covers yet, the follower syncs the segment itself when <paramref name="allowSync"/>, and otherwise leaves
    /// them for a later call (by then the writer's next record usually covers them, so a follower that keeps up with a
    /// busy writer rarely adds a sync of its own). It stops early once the entries it appended hold
    /// <paramref name="maxBytes"/> (<see cref="HitLimit"/> then says so). Returns how many it appended: 0 when no
    /// durable complete record follows yet.
    /// </summary>
    /// <exception cref="JournalPositionPurgedException">The next sequence is older than the oldest segment, or the
    /// writer purged a segment the follower had not reached.</exception>
    /// <exception cref="JournalCorruptedException">A segment or a record the writer moved past is damaged.</exception>
    public int ReadAvailable(List<JournalEntryCopy> entries, int maxEntries, bool allowSync = true,
        long maxBytes = DefaultReadBytes)
    {
        HitLimit = false;
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (_segment is null && !OpenFirstSegment())
        {
            return 0;
        }

        _taken.Clear();
        int added = 0;
        long bytes = 0;
        while (added < maxEntries && bytes < maxBytes)
        {
            if (TryReadRecord(out JournalFormat.RecordHeader header))
            {
                var mark = new TakenRecord(entries.Count, _offset, _segmentNext, _nextSequence,
                    _offset + header.Length);
                _durableEnd = Math.Max(_durableEnd,
                    header.SyncedLength == JournalFormat.SyncedUpToItself ? _offset : header.SyncedLength);
                int taken = TakeEntries(header, entries); // those before the starting sequence are skipped
                if (taken > 0)
                {
                    _taken.Add(mark);
                    added += taken;
                    for (int i = entries.Count - taken; i < entries.Count; i++)
                    {
                        bytes += entries[i].Data.Length;
                    }
                }

                _offset += header.Length;
                _segmentNext = header.FirstSequence + header.EntryCount;
                continue;
            }

            // No complete record here: the end of the data for now, or of this segment if the next one exists.
            if (!TryMoveToNextSegment())
            {
                break;
            }
        }

        HitLimit = added >= maxEntries || bytes >= maxBytes;

        if (_taken.Count > 0 && _taken[^1].End > _durableEnd)
        {
            if (allowSync)
            {
                Sync();
            }
            else
            {
                // Leave the records no header covers yet for a later call: back to the first of them.
                int first = 0;
                while (_taken[first].End <= _durableEnd)
                {
                    first++;
                }

                TakenRecord back = _taken[first];
                HitLimit = false;
                added -= entries.Count - back.EntriesBefore;
                entries.RemoveRange(back.EntriesBefore, entries.Count - back.EntriesBefore);
                _offset = back.Offset;
                _segmentNext = back.SegmentNext;
                _nextSequence = back.NextSequence;
            }
        }

        return added;
    }

    /// <summary>Whether the last <see cref="ReadAvailable"/> stopped at its entries or bytes rather than at the end of
    /// what the files held: more may follow at once.</summary>
    public bool HitLimit { get; private set; }

    /// <summary>The follower's own fdatasyncs so far (tests).</summary>
    internal int SyncCount { get; private set; }

    public void Dispose()
    {
        if (!_disposed)
        {
            _disposed = true;
            _segment?.Dispose();
            _segment = null;
            if (_buffer.Length > 0)
            {
                ArrayPool<byte>.Shared.Return(_buffer);
                _buffer = [];
            }
        }
    }

    /// <summary>Opens the segment holding <see cref="NextSequence"/>: the newest whose first sequence is at or below
    /// it. False when the journal has no segment yet. A segment purged between the listing and the open is listed
    /// again.</summary>
    private bool OpenFirstSegment()
    {
        while (true)
        {
            (long oldest, long chosen, _) = ListSegments(_nextSequence);
            if (oldest == 0)
            {
                return false;
            }

            if (_nextSequence < oldest)
            {
                throw new JournalPositionPurgedException(_nextSequence, oldest);
            }

            if (TryOpenSegment(chosen))
            {
                return true;
            }
        }
    }

    /// <summary>The first sequences of the segments on disk: the oldest, the newest at or below
    /// <paramref name="sequence"/>, and the oldest above it (0 for none).</summary>
    private (long Oldest, long AtOrBelow, long Above) ListSegments(long sequence)
    {
        long oldest = 0;
        long atOrBelow = 0;
        long above = 0;
        foreach (string path in Directory.EnumerateFiles(_directory, JournalFormat.SegmentSearchPattern))
        {
            if (!JournalFormat.TryParseSegmentFileName(Path.GetFileName(path), out long first))
            {
                continue;
            }

            oldest = oldest == 0 ? first : Math.Min(oldest, first);
            if (first <= sequence)
            {
                atOrBelow = Math.Max(atOrBelow, first);
            }
            else
            {
                above = above == 0 ? first : Math.Min(above, first);
            }
        }

        return (oldest, atOrBelow, above);
    }

    /// <summary>Opens segment <paramref name="first"/> and checks its header; false when the file is gone.</summary>
    private bool TryOpenSegment(long first)
    {
        string path = Path.Combine(_directory, JournalFormat.SegmentFileName(first));
        SafeFileHandle handle;
        try
        {
            handle = File.OpenHandle(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete);
        }
        catch (FileNotFoundException)
        {
            return false;
        }

        Span<byte> header = stackalloc byte[JournalFormat.SegmentHeaderSize];
        int read = RandomAccess.Read(handle, header, 0);
        if (JournalFormat.ValidateSegmentHeader(header[..read], first) is { } problem)
        {
            handle.Dispose();
            ThrowHelper.ThrowJournalCorrupted(path, 0, problem);
        }

        // Segments of one journal carry one store's id (or none, written before ids): a segment of another store
        // copied into the folder is corruption, not more of this store's history.
        if (_identity.Conflict(JournalFormat.ReadSegmentStoreId(header), path, "the segment") is { } foreign)
        {
            handle.Dispose();
            ThrowHelper.ThrowJournalCorrupted(path, JournalFormat.SegmentStoreIdOffset, foreign);
        }

        _segment?.Dispose();
        _segment = handle;
        _segmentPath = path;
        _segmentLength = RandomAccess.GetLength(handle);
        _offset = JournalFormat.SegmentHeaderSize;
        _segmentNext = first;
        _durableEnd = JournalFormat.SegmentHeaderSize; // the writer syncs a segment's header before it names it
        return true;
    }

    /// <summary>
    /// Moves to the segment that starts after the current one's last record, if it exists (syncing the current one
    /// first when this call took records from it that no header covers). Damage left behind in the current segment,
    /// non-zero bytes where no complete record is, is a corruption once the writer has moved on. Also true, without
    /// moving, when a later segment exists and the current one has a record completed since it was last read
    /// (<see cref="ReadOnOrThrowIfPurgedPast"/>).
    /// </summary>
    private bool TryMoveToNextSegment()
    {
        long next = _segmentNext; // not the next to return: a follower that starts ahead skips whole segments
        string nextPath = Path.Combine(_directory, JournalFormat.SegmentFileName(next));

        // A segment is named by its first sequence, so while no record of the current one is complete, the name of
        // the next is the current one's own: the writer has not moved on (its first record is still being written).
        if (string.Equals(nextPath, _segmentPath, StringComparison.Ordinal) || !File.Exists(nextPath))
        {
            AfterNextSegmentMissing?.Invoke();
            return ReadOnOrThrowIfPurgedPast(next);
        }

        if (!RestIsZero())
        {
            ThrowHelper.ThrowJournalCorrupted(_segmentPath, _offset,
                "a damaged record where the writer has moved on to the next segment");
        }

        if (_taken.Count > 0 && _taken[^1].End > _durableEnd)
        {
            Sync(); // what this call took from the segment it leaves is durable before it is returned
        }

        _taken.Clear();
        if (!TryOpenSegment(next))
        {
            ThrowIfPurgedPast(next);
            return false;
        }

        return true;
    }

    /// <summary>Tests only: called when the segment after the current one is not there, before the follower looks for
    /// later ones (a test has the writer finish a record and rotate there).</summary>
    internal Action? AfterNextSegmentMissing { get; set; }

    /// <summary>
    /// The segment starting at <paramref name="next"/> is not there: the end of the data for now (false), unless a
    /// later segment exists. Then the writer has moved on from the current segment, and may have completed records
    /// in it since the follower found none at its end (it finished the record being written, then rotated, and the
    /// next segment is named after those records): when the current segment has a complete record now, true, and the
    /// caller reads it. Otherwise the writer purged the segment the follower needs (a checkpoint covered it) before
    /// the follower got to it.
    /// </summary>
    private bool ReadOnOrThrowIfPurgedPast(long next)
    {
        if (ListSegments(next) is not { Above: > 0 })
        {
            return false;
        }

        if (_segment is not null && TryReadRecord(out _))
        {
            return true;
        }

        ThrowIfPurgedPast(next);
        return false;
    }

    /// <summary>
    /// The segment starting at <paramref name="next"/> is not there: the end of the data for now, unless a later
    /// segment exists, which means the writer purged it (a checkpoint covered it) before the follower got to it.
    /// </summary>
    private void ThrowIfPurgedPast(long next)
    {
        if (ListSegments(next) is { Above: > 0 } segments)
        {
            throw new JournalPositionPurgedException(Math.Max(_nextSequence, next), segments.Above);
        }
    }

    /// <summary>Reads the record at the current offset into the buffer; false unless it is complete and
    /// next.</summary>
    private bool TryReadRecord(out JournalFormat.RecordHeader header)
    {
        if (!TryReadWholeRecord(_offset, out header, out bool hasShape))
        {
            // Incomplete, or damaged: the writer appends in order, so a complete record right after this one, with
            // the sequences that follow it, means this one was written whole and is damaged.
            if (hasShape && TryReadWholeRecord(_offset + header.Length, out JournalFormat.RecordHeader next, out _)
                && next.FirstSequence == header.FirstSequence + header.EntryCount)
            {
                ThrowHelper.ThrowJournalCorrupted(_segmentPath, _offset,
                    "a record fails its checksum where the writer has written the next one");
            }

            return false;
        }

        // Gap-free: every record starts where the one before it ended (the segment's first sequence for its first).
        if (header.FirstSequence != _segmentNext)
        {
            ThrowHelper.ThrowJournalCorrupted(_segmentPath, _offset,
                $"a record holds sequences {header.FirstSequence} to {header.FirstSequence + header.EntryCount - 1} " +
                $"where sequence {_segmentNext} is next");
        }

        return true;
    }

    /// <summary>
    /// Reads the record at <paramref name="offset"/> of the current segment into the buffer (its length field first,
    /// so the whole record is read in one call); true when it is complete: its header has the right shape (then
    /// <paramref name="hasShape"/>, and <paramref name="header"/> holds it), its checksum matches and its entries fill
    /// it, as recovery checks a record.
    /// </summary>
    private bool TryReadWholeRecord(long offset, out JournalFormat.RecordHeader header, out bool hasShape)
    {
        header = default;
        hasShape = false;
        long available = _segmentLength - offset;
        if (available < JournalFormat.LegacyRecordHeaderSize)
        {
            return false;
        }

        Span<byte> head = stackalloc byte[JournalFormat.LegacyRecordHeaderSize];
        if (RandomAccess.Read(_segment!, head, offset) < head.Length)
        {
            return false;
        }

        uint claimed = BinaryPrimitives.ReadUInt32LittleEndian(head[8..]);
        if (claimed < JournalFormat.LegacyRecordHeaderSize || claimed > available)
        {
            return false;
        }

        EnsureBuffer((int)claimed);
        Span<byte> record = _buffer.AsSpan(0, (int)claimed);
        if (RandomAccess.Read(_segment!, record, offset) != record.Length
            || !JournalFormat.TryReadRecordHeader(record, out header))
        {
            return false;
        }

        hasShape = true;
        return JournalFormat.ChecksumMatches(record) && JournalFormat.EntriesFillPayload(record, header);
    }

    /// <summary>Copies the record's entries at or after the next sequence; returns how many.</summary>
    private int TakeEntries(in JournalFormat.RecordHeader header, List<JournalEntryCopy> entries)
    {
        ReadOnlySpan<byte> record = _buffer.AsSpan(0, header.Length);
        int at = header.HeaderSize;
        int taken = 0;
        for (int i = 0; i < header.EntryCount; i++)
        {
            int length = (int)BinaryPrimitives.ReadUInt32LittleEndian(record[at..]);
            long sequence = header.FirstSequence + i;
            if (sequence >= _nextSequence)
            {
                entries.Add(new JournalEntryCopy(sequence, header.TimestampTicks,
                    record.Slice(at + JournalFormat.EntryHeaderSize, length).ToArray(), header.FirstSequence));
                _nextSequence = sequence + 1;
                taken++;
            }

            at += JournalFormat.EntryHeaderSize + length;
        }

        return taken;
    }

    /// <summary>Whether the current segment holds only zero bytes from the current offset to its end.</summary>
    private bool RestIsZero()
    {
        EnsureBuffer(64 * 1024);
        for (long at = _offset; at < _segmentLength;)
        {
            int read = RandomAccess.Read(_segment!, _buffer.AsSpan(0, (int)Math.Min(_buffer.Length,
                _segmentLength - at)), at);
            if (read <= 0)
            {
                return true;
            }

            if (_buffer.AsSpan(0, read).ContainsAnyExcept((byte)0))
            {
                return false;
            }

            at += read;
        }

        return true;
    }

    private void EnsureBuffer(int length)
    {
        if (_buffer.Length < length)
        {
            if (_buffer.Length > 0)
            {
                ArrayPool<byte>.Shared.Return(_buffer);
            }

            _buffer = ArrayPool<byte>.Shared.Rent(length);
        }
    }

    /// <summary>Makes what was read from the current segment durable (fdatasync on Linux; elsewhere a read-only
    /// handle cannot be flushed, and records are returned as written).</summary>
    private void Sync()
    {
        if (!OperatingSystem.IsLinux() || _segment is null)
        {
            return;
        }

        NativeMethods.DataSync(_segment, _segmentPath);
        SyncCount++;
    }

    /// <summary>Where a record the current call took entries from began, and the state before it (to leave it for a
    /// later call), and where it ends.</summary>
    private readonly record struct TakenRecord(int EntriesBefore, long Offset, long SegmentNext, long NextSequence,
        long End);
}
