using System.Buffers;
using System.Buffers.Binary;
using System.Diagnostics;
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
/// <para>
/// Reading past damage (a salvage, with a damage handler). Where the follower would throw
/// <see cref="JournalCorruptedException"/>, it reports the commits the damage took and reads on from the next intact
/// record: a damaged record is skipped to the next complete record of its segment with later sequences (found by its
/// magic and checked as any record is; before it is taken, the damaged one is read again, so a record that was only
/// being written when first read is taken, not reported); a segment whose header is damaged or names another store is
/// skipped whole, up to the next segment's first sequence; a gap of sequences between two intact records, or a
/// missing segment the purge watermark does not cover, is reported as it stands. What a purge removed is still a
/// <see cref="JournalPositionPurgedException"/>, and damage at the end of the newest segment with nothing intact after
/// it is the end of the data, as a torn tail is, unless the durable mark says otherwise (below).
/// </para>
/// <para>
/// The durable mark. Before its first read the follower reads the journal's durable mark: every entry up to its
/// sequence was durable then, so the files hold it (the writer only appends, and a purge is told apart by its
/// watermark). Data that ends before it is damage to the newest segment's last records: a
/// <see cref="JournalCorruptedException"/>, or reported. A damaged mark leaves the end unchecked, so at the end of
/// the data it is thrown, as the store's open throws it (unless the writer has replaced it by then), or, with a
/// damage handler, whatever may follow the last record read is reported as possibly lost.
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
    private readonly Action<long, long, JournalCorruptedException>? _onDamage; // null: damage throws
    private long _durableAtStart = -1; // the durable mark's sequence before the first read (-1: not read yet)
    private JournalCorruptedException? _damagedMark; // the durable mark failed its checks
    private bool _headerOnly; // the record TryReadRecord last returned was passed on its header alone
    private bool _disposed;

    /// <summary>The most bytes of entries one <see cref="ReadAvailable"/> copies unless told otherwise: 4 MiB (past it
    /// by the last record's entries at most), so a journal of large documents is read a few at a time, not a thousand
    /// at a time.</summary>
    public const long DefaultReadBytes = 4 << 20;
    private StoreIdentity _identity; // the store the segments read so far name; every later one must name it too

    /// <param name="journalDirectory">The journal's folder (a store's <c>journal</c> folder).</param>
    /// <param name="fromSequence">The first entry to return; 1 or more.</param>
    /// <param name="onDamage">Null: damage throws <see cref="JournalCorruptedException"/>. Otherwise the follower
    /// reads past it and calls this with the first and last sequence the damage took (the last is
    /// <see cref="long.MaxValue"/> when nothing after the damage tells where it ends) and the damage itself, before it
    /// returns any entry after it. Each damage is reported once, which needs every read to allow its sync (none is
    /// taken back), as a reader that does not follow reads.</param>
    public JournalFollower(string journalDirectory, long fromSequence,
        Action<long, long, JournalCorruptedException>? onDamage = null)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        _directory = journalDirectory;
        _nextSequence = fromSequence;
        _onDamage = onDamage;
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
        Debug.Assert(allowSync || _onDamage is null, "a follower reading past damage takes back no record");
        if (_durableAtStart < 0)
        {
            _durableAtStart = ReadDurableMark(); // before any segment is read: what the files must hold
        }

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
                if (!_headerOnly) // an unchecked header's synced length proves nothing
                {
                    _durableEnd = Math.Max(_durableEnd,
                        header.SyncedLength == JournalFormat.SyncedUpToItself ? _offset : header.SyncedLength);
                }

                // Those before the starting sequence are skipped (all of a record taken on its header alone).
                int taken = _headerOnly ? 0 : TakeEntries(header, entries);
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
                CheckEndAgainstDurableMark();
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
                if (FirstRetained() > _nextSequence)
                {
                    throw new JournalPositionPurgedException(_nextSequence, oldest);
                }

                var missing = new JournalCorruptedException(
                    Path.Combine(_directory, JournalFormat.SegmentFileName(oldest)), 0,
                    $"the segments holding sequences {_nextSequence} to {oldest - 1}, before this one, are missing, "
                    + "and no purge removed them");
                if (_onDamage is null)
                {
                    throw missing;
                }

                ReportDamage(_nextSequence, oldest - 1, missing);
                continue;
            }

            if (TryOpenSegmentOrSkip(chosen) is bool opened)
            {
                if (opened)
                {
                    return true;
                }

                continue; // purged meanwhile: list again
            }

            return false; // the only segments left are damaged ones, reported
        }
    }

    /// <summary>Opens segment <paramref name="first"/> as <see cref="TryOpenSegment"/> does (false: the file is gone).
    /// With a damage handler, a damaged segment is reported and skipped: the next segment is opened instead, and null
    /// is returned when none is left.</summary>
    private bool? TryOpenSegmentOrSkip(long first)
    {
        while (true)
        {
            try
            {
                return TryOpenSegment(first);
            }
            catch (JournalCorruptedException damage) when (_onDamage is not null)
            {
                long next = ListSegments(first).Above;
                ReportDamage(first, next == 0 ? long.MaxValue : next - 1, damage);
                if (next == 0)
                {
                    return null;
                }

                first = next;
            }
        }
    }

    /// <summary>The sequence up to which the journal's durable mark says every entry was durable (0 when there is no
    /// mark, or it is damaged: then it tells nothing, and a follower with a damage handler keeps the damage for
    /// <see cref="CheckEndAgainstDurableMark"/>).</summary>
    private long ReadDurableMark()
    {
        try
        {
            _damagedMark = null;
            return JournalDurableMark.TryRead(PhysicalFileSystem.Instance, _directory, out JournalDurableMark mark)
                ? mark.Sequence : 0;
        }
        catch (JournalCorruptedException damage)
        {
            _damagedMark = damage;
            return 0;
        }
    }

    /// <summary>
    /// At the end of the data: the entries up to the durable mark read before the first read were durable then, so
    /// the files must hold them (the writer only appends; a purge is found before this). Ending before them means
    /// the records holding them are damaged or missing at the end of the newest segment, where damage otherwise looks
    /// like an append a crash tore: a <see cref="JournalCorruptedException"/>, or, with a damage handler, reported.
    /// A damaged mark leaves the end unchecked: the mark's damage is thrown as the store's open throws it (unless the
    /// writer has replaced the mark since: then this follower goes on without one), or, with a damage handler, what
    /// may follow the last record read is reported as possibly lost.
    /// </summary>
    private void CheckEndAgainstDurableMark()
    {
        long next = Math.Max(_segmentNext, _nextSequence);
        if (_segment is not null && _damagedMark is not null && next < long.MaxValue)
        {
            if (_onDamage is null)
            {
                // A mark that reads whole now was written after the reads began: it bounds nothing they could see,
                // and the re-read forgets the damage (its sequence is not kept).
                ReadDurableMark();
                if (_damagedMark is { } stillDamaged)
                {
                    throw stillDamaged;
                }

                return;
            }

            // Nothing tells whether the end is a torn append or damage to durable records: what may follow is
            // reported as possibly lost, once.
            ReportDamage(next, long.MaxValue, new JournalCorruptedException(_segmentPath, _offset,
                $"the journal's durable mark is damaged ({_damagedMark.Message}), so whether commits from {next} on "
                + "were durable, and lost to damage at the end of the newest segment, is unknown"));
            return;
        }

        if (_segment is null || next > _durableAtStart)
        {
            return;
        }

        var damage = new JournalCorruptedException(_segmentPath, _offset,
            $"the journal's durable mark says commits up to {_durableAtStart} were durable, but the records holding "
            + $"{next} to {_durableAtStart} are damaged or missing");
        if (_onDamage is null)
        {
            throw damage;
        }

        ReportDamage(next, _durableAtStart, damage);
    }

    /// <summary>The first sequence the purge watermark says the journal keeps (0 when there is none, or it is
    /// damaged: then it tells nothing).</summary>
    private long FirstRetained()
    {
        try
        {
            return WriteAheadJournal.ReadPurgeWatermark(PhysicalFileSystem.Instance, _directory).FirstRetained;
        }
        catch (JournalCorruptedException)
        {
            return 0;
        }
    }

    /// <summary>Tells the damage handler that the damage at <paramref name="offset"/> of <paramref name="path"/> took
    /// commits <paramref name="from"/> to <paramref name="to"/>.</summary>
    private void ReportDamage(long from, long to, string path, long offset, string reason)
        => ReportDamage(from, to, new JournalCorruptedException(path, offset, reason));

    /// <summary>Reports the commits from <paramref name="from"/> to <paramref name="to"/> the follower was to return
    /// (those before <see cref="NextSequence"/> it was not, so a damage that took only those is not reported), and
    /// moves past them.</summary>
    private void ReportDamage(long from, long to, JournalCorruptedException damage)
    {
        from = Math.Max(from, _nextSequence);
        if (to >= from && from < long.MaxValue) // past a damage that reached the end, nothing is left to report
        {
            _onDamage!(from, to, damage);
            _nextSequence = to == long.MaxValue ? to : to + 1;
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
    /// (<see cref="ReadOnOrPastMissingSegment"/>).
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
            return ReadOnOrPastMissingSegment(next);
        }

        // With a damage handler, non-zero bytes here held no commit: the next segment starts right after the last
        // record read, and the records skipped to get here were reported.
        if (_onDamage is null && !RestIsZero())
        {
            ThrowHelper.ThrowJournalCorrupted(_segmentPath, _offset,
                "a damaged record where the writer has moved on to the next segment");
        }

        return MoveTo(next);
    }

    /// <summary>Leaves the current segment for segment <paramref name="next"/> (syncing the current one first when
    /// this call took records from it that no header covers); false when it is gone, or when it is damaged and
    /// skipped with nothing after it.</summary>
    private bool MoveTo(long next)
    {
        if (_taken.Count > 0 && _taken[^1].End > _durableEnd)
        {
            Sync(); // what this call took from the segment it leaves is durable before it is returned
        }

        _taken.Clear();
        switch (TryOpenSegmentOrSkip(next))
        {
            case true:
                return true;
            case false:
                return PastMissingSegment(next);
            default:
                return false;
        }
    }

    /// <summary>Tests only: called when the segment after the current one is not there, before the follower looks for
    /// later ones (a test has the writer finish a record and rotate there).</summary>
    internal Action? AfterNextSegmentMissing { get; set; }

    /// <summary>
    /// The segment starting at <paramref name="next"/> is not there: the end of the data for now (false), unless a
    /// later segment exists. Then the writer has moved on from the current segment, and may have completed records
    /// in it since the follower found none at its end (it finished the record being written, then rotated, and the
    /// next segment is named after those records): when the current segment has a complete record now, true, and the
    /// caller reads it. Otherwise, see <see cref="PastMissingSegment"/>.
    /// </summary>
    private bool ReadOnOrPastMissingSegment(long next)
    {
        if (ListSegments(next) is not { Above: > 0 })
        {
            return false;
        }

        if (_segment is not null && TryReadRecord(out _))
        {
            return true;
        }

        return PastMissingSegment(next);
    }

    /// <summary>
    /// The segment starting at <paramref name="next"/> is not there: the end of the data for now (false), unless a
    /// later segment exists. Then either the writer purged it (a checkpoint covered it) before the follower got to it,
    /// which the purge watermark says (a purge writes it before it deletes a segment):
    /// <see cref="JournalPositionPurgedException"/>; or no purge removed it, and the records holding the sequences
    /// from <paramref name="next"/> to the later segment are damaged (the current segment's last ones) or missing:
    /// <see cref="JournalCorruptedException"/>, or, with a damage handler, reported and skipped (true: moved to the
    /// later segment).
    /// </summary>
    private bool PastMissingSegment(long next)
    {
        if (ListSegments(next) is not { Above: > 0 } segments)
        {
            return false;
        }

        long needed = Math.Max(_nextSequence, next);
        if (FirstRetained() > needed)
        {
            throw new JournalPositionPurgedException(needed, segments.Above);
        }

        var damage = new JournalCorruptedException(_segmentPath, _offset,
            $"the records holding sequences {next} to {segments.Above - 1} are damaged or missing, and no purge "
            + "removed them");
        if (_onDamage is null)
        {
            throw damage;
        }

        ReportDamage(next, segments.Above - 1, damage);
        return MoveTo(segments.Above);
    }

    /// <summary>Reads the record at the current offset into the buffer; false unless it is complete and
    /// next.</summary>
    private bool TryReadRecord(out JournalFormat.RecordHeader header)
    {
        _headerOnly = false;
        if (_onDamage is not null)
        {
            return TryReadRecordSkippingDamage(out header);
        }

        if (!TryReadWholeRecord(_offset, out header, out bool hasShape))
        {
            if (hasShape && TakeOnHeaderAlone(header))
            {
                return true;
            }

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
    /// <see cref="TryReadRecord"/> for a follower with a damage handler: an incomplete or damaged record at the current
    /// offset is skipped to the next complete record of the segment that holds later sequences, if there is one, and a
    /// record that starts after the sequence expected is taken; the commits in between are reported. A record of
    /// sequences already read is skipped without a report.
    /// </summary>
    private bool TryReadRecordSkippingDamage(out JournalFormat.RecordHeader header)
    {
        while (true)
        {
            if (!TryReadWholeRecord(_offset, out header, out bool hasShape))
            {
                if (hasShape && TakeOnHeaderAlone(header))
                {
                    return true;
                }

                if (!TryFindRecord(_offset + 1, out long found))
                {
                    return false; // the end of the data, or damage at the end of the segment
                }

                // The writer appends in order: a record complete after this one means this one was written whole
                // before it, so unless it is complete now (it was being written at the first read), it is damaged.
                if (!TryReadWholeRecord(_offset, out header, out _))
                {
                    long damaged = _offset;
                    _offset = found;
                    TryReadWholeRecord(_offset, out header, out _); // found complete: it still is
                    ReportDamage(_segmentNext, header.FirstSequence - 1, _segmentPath, damaged,
                        $"a damaged record holding sequences {_segmentNext} to {header.FirstSequence - 1}");
                    _segmentNext = header.FirstSequence;
                    return true;
                }
            }

            if (header.FirstSequence >= _segmentNext)
            {
                ReportDamage(_segmentNext, header.FirstSequence - 1, _segmentPath, _offset,
                    $"sequences {_segmentNext} to {header.FirstSequence - 1} are missing before this record");
                _segmentNext = header.FirstSequence;
                return true;
            }

            _offset += header.Length; // sequences read already: not this journal's next record
        }
    }

    /// <summary>
    /// Whether a record that failed its checks may be passed on its header alone, as the store's open passes the
    /// records its checkpoint holds: every entry of it lies before <see cref="NextSequence"/>, so none is returned,
    /// and its header (magic, length within the segment, entry count) names the sequence expected, so the next record
    /// is found where it says. Then <see cref="_headerOnly"/> is set: its entries are not read, and its synced length
    /// counts for nothing. A reader that starts at a later sequence does not fail on damage in history it skips.
    /// </summary>
    private bool TakeOnHeaderAlone(in JournalFormat.RecordHeader header)
    {
        if (header.FirstSequence != _segmentNext || header.FirstSequence + header.EntryCount > _nextSequence)
        {
            return false;
        }

        _headerOnly = true;
        return true;
    }

    /// <summary>Finds the first complete record of the current segment at or after <paramref name="from"/> that starts
    /// at the expected sequence or later (a record's magic, then the checks of
    /// <see cref="TryReadWholeRecord"/>).</summary>
    private bool TryFindRecord(long from, out long found)
    {
        const int Block = 1 << 20;
        byte[] block = ArrayPool<byte>.Shared.Rent(Block + 2);
        try
        {
            for (long at = from; at + JournalFormat.LegacyRecordHeaderSize <= _segmentLength; at += Block)
            {
                int read = RandomAccess.Read(_segment!, block.AsSpan(0, (int)Math.Min(Block + 2,
                    _segmentLength - at)), at);
                ReadOnlySpan<byte> bytes = block.AsSpan(0, read);
                for (int i = bytes.IndexOf(RecordMagicPrefix); i >= 0 && i < Block;)
                {
                    // The record's buffer is the follower's own, which the block does not share.
                    if (TryReadWholeRecord(at + i, out JournalFormat.RecordHeader header, out _)
                        && header.FirstSequence >= _segmentNext)
                    {
                        found = at + i;
                        return true;
                    }

                    int next = bytes[(i + 1)..].IndexOf(RecordMagicPrefix);
                    i = next < 0 ? -1 : i + 1 + next;
                }

                if (read < Block)
                {
                    break;
                }
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(block);
        }

        found = 0;
        return false;
    }

    /// <summary>The first three bytes of every record's magic (<c>FJR</c>).</summary>
    private static ReadOnlySpan<byte> RecordMagicPrefix => "FJR"u8;

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
