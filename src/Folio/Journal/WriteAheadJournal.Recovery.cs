using System.Buffers.Binary;
using System.Diagnostics;
using System.Runtime.ExceptionServices;

namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    /// <summary>
    /// Scans every segment in order and rebuilds the writer's state. Rules: every segment header must be valid;
    /// sequence numbers must continue across records and segments (from the purge watermark, or 1); in a sealed
    /// segment only zeros may follow the last record; in the newest segment, bytes after the last good record are a
    /// torn tail (zeroed and logged) unless something on disk proves them durable: a later valid record whose synced
    /// length reaches past the damage, or the durable mark (<see cref="JournalDurableMark"/>). Then the damage is
    /// corruption. The journal must also reach the mark's sequence and hold the segment it names.
    /// <para>
    /// Records whose entries all lie at or below <paramref name="coveredThrough"/> (a checkpoint holds them, so an open
    /// replays none of them) are walked, not checksummed: their headers must still chain (shape, sequence, time),
    /// and their checksums are checked by the readers that read them. They were durable before the checkpoint was
    /// written, so damage where one is expected is corruption, never a torn tail. This keeps an open's cost to the
    /// journal after the checkpoint, however much history the journal still holds for the change feed.
    /// </para>
    /// <para>
    /// Every segment and the durable mark must carry the id of one store, the one <paramref name="storeId"/> names
    /// when the data file carries one (<paramref name="storeIdSource"/>, its file): a segment or mark of another store
    /// (a file copied from another store's folder) is corruption, found before that segment is scanned. Files written
    /// before stores had ids carry none and match any.
    /// </para>
    /// </summary>
    private void Recover(long coveredThrough, Guid storeId, string? storeIdSource)
    {
        long started = Stopwatch.GetTimestamp();
        foreach (string leftover in _fileSystem.GetFiles(Directory, JournalFormat.TemporarySearchPattern))
        {
            _fileSystem.DeleteFile(leftover);
            JournalLog.LeftoverRemoved(_logger, leftover);
        }

        var found = new List<(long First, string Path)>();
        foreach (string path in _fileSystem.GetFiles(Directory, JournalFormat.SegmentSearchPattern))
        {
            if (JournalFormat.TryParseSegmentFileName(Path.GetFileName(path), out long first))
            {
                found.Add((first, path));
            }
        }

        found.Sort((a, b) => a.First.CompareTo(b.First));
        long watermark;
        long purgedTimestamp;
        JournalCorruptedException? damagedWatermark = null;
        try
        {
            (watermark, purgedTimestamp) = ReadPurgeWatermark(_fileSystem, Directory);
        }
        catch (JournalCorruptedException e) when (coveredThrough > 0)
        {
            // Decided below: harmless if the checkpoint holds everything before the oldest segment.
            (watermark, purgedTimestamp, damagedWatermark) = (0, 0, e);
        }

        bool marked = JournalDurableMark.TryRead(_fileSystem, Directory, out JournalDurableMark mark);
        string markPath = Path.Combine(Directory, JournalDurableMark.FileName);
        var identity = new StoreIdentity(storeId, storeIdSource);
        if (marked && identity.Conflict(mark.StoreId, markPath, "the journal's durable mark") is { } foreignMark)
        {
            ThrowHelper.ThrowJournalCorrupted(markPath, 32, foreignMark);
        }

        // Segments wholly before the watermark survived an interrupted purge: finish it.
        while (found.Count >= 2 && found[1].First <= watermark)
        {
            _fileSystem.DeleteFile(found[0].Path);
            JournalLog.LeftoverRemoved(_logger, found[0].Path);
            found.RemoveAt(0);
        }

        if (found.Count == 0)
        {
            if (damagedWatermark is not null)
            {
                ExceptionDispatchInfo.Throw(damagedWatermark);
            }

            if (watermark > 1)
            {
                ThrowHelper.ThrowJournalCorrupted(Directory, 0,
                    $"no segment file is left, but entries up to {watermark - 1} were written");
            }

            if (marked)
            {
                ThrowHelper.ThrowJournalCorrupted(markPath, 0,
                    $"no segment file is left, but the durable mark says entries up to {mark.Sequence} were written " +
                    $"(segment {mark.SegmentFirstSequence})");
            }

            // A new journal starts at 1, or where the history it continues ends (a restored store's journal starts
            // after its checkpoint): the watermark then says the entries before it are gone on purpose.
            _storeId = identity.Id != Guid.Empty ? identity.Id : Guid.NewGuid();
            long start = Math.Max(1, _newJournalFirstSequence);
            if (start > 1)
            {
                WritePurgeWatermark(start, _newJournalPreviousTimestamp);
                _purgedTimestamp = _newJournalPreviousTimestamp;
                _lastTimestamp = _newJournalPreviousTimestamp;
            }

            _nextSequence = start;
            _active = CreateSegment(start, WaitForPreparedSegment());
            PublishSegments([_active]);
            lock (_writeLock)
            {
                TryWriteMark(CaptureMarkLocked()); // names the first segment: losing its file is detected
            }

            Recovery = new JournalRecoveryInfo(1, 0, 0, 0, 0, Stopwatch.GetElapsedTime(started));
            JournalLog.Recovered(_logger, Directory, 1, 0, 0, 0, start, (long)Recovery.Duration.TotalMilliseconds);
            return;
        }

        long expected = Math.Max(watermark, 1);
        if (found[0].First > expected && found[0].First <= coveredThrough + 1)
        {
            // The segments before the oldest one are gone, but the data file's checkpoint holds every entry they had
            // (a purge removes only what a checkpoint covers): a watermark deleted or damaged by hand loses nothing.
            // Write it again, as the purge that removed them did.
            JournalLog.WatermarkRestored(_logger, Directory, found[0].First,
                damagedWatermark is not null ? "damaged" : watermark == 0 ? "missing" : $"at {watermark}",
                coveredThrough);
            watermark = expected = found[0].First;
            purgedTimestamp = 0; // the time of the entry before it is unknown
            WritePurgeWatermark(watermark, purgedTimestamp);
        }
        else if (damagedWatermark is not null)
        {
            ExceptionDispatchInfo.Throw(damagedWatermark);
        }

        if (found[0].First != expected)
        {
            ThrowHelper.ThrowJournalCorrupted(found[0].Path, 0,
                $"the oldest segment starts at sequence {found[0].First} but {expected} was expected: a segment file " +
                $"is missing");
        }

        var segments = new JournalSegment[found.Count];
        long records = 0;
        long entries = 0;
        long bytes = 0;
        long truncated = 0;
        long lastTimestamp = long.MinValue;
        try
        {
            for (int i = 0; i < found.Count; i++)
            {
                if (found[i].First != expected)
                {
                    ThrowHelper.ThrowJournalCorrupted(found[i].Path, 0,
                        $"the segment starts at sequence {found[i].First} but the previous one ends at {expected - 1}");
                }

                var file = _fileSystem.OpenFile(found[i].Path, FileMode.Open);
                long capacity = file.Length;
                if (capacity < JournalFormat.SegmentHeaderSize)
                {
                    file.Dispose();
                    ThrowHelper.ThrowJournalCorrupted(found[i].Path, 0, "the segment file is shorter than its header");
                }

                segments[i] = new JournalSegment(file, found[i].First, capacity, JournalFormat.SegmentHeaderSize,
                    DeleteSegmentFile, OpenSyncHandle);
                long markedLength = marked && mark.SegmentFirstSequence == found[i].First ? mark.SyncedLength : 0;
                ScanResult scan = ScanSegment(segments[i], isNewest: i == found.Count - 1, markedLength,
                    coveredThrough, ref lastTimestamp, ref identity);
                segments[i].WrittenLength = scan.DataLength;
                segments[i].Index.MarkRecovered(scan.VerifiedFrom, scan.DataLength);
                segments[i].PublishCommittedLength(scan.DataLength);
                segments[i].LastSequence = scan.NextSequence - 1;
                segments[i].LastTimestamp = scan.LastTimestamp;
                if (scan.Records > 0)
                {
                    segments[i].FirstTimestamp = scan.FirstTimestamp;
                }

                if (i < found.Count - 1)
                {
                    segments[i].Seal();
                    segments[i].CloseFile();
                }

                records += scan.Records;
                entries += scan.NextSequence - found[i].First;
                bytes += scan.DataLength - JournalFormat.SegmentHeaderSize;
                truncated += scan.TruncatedBytes;
                expected = scan.NextSequence;
            }
        }
        catch
        {
            foreach (JournalSegment? segment in segments)
            {
                segment?.ReleaseOwner();
            }

            throw;
        }

        // Segments written before stores had ids, and no checkpoint that names one: the store gets its id now.
        _storeId = identity.Id != Guid.Empty ? identity.Id : Guid.NewGuid();
        try
        {
            ReplaceEmptyNewestSegmentOfAnotherSize(segments);
        }
        catch
        {
            foreach (JournalSegment segment in segments)
            {
                segment.ReleaseOwner();
            }

            throw;
        }

        _active = segments[^1];
        try
        {
            if (marked)
            {
                CheckMark(mark, markPath, found, expected - 1, watermark);
            }

            // What a killed process wrote may still be only in the page cache: make it durable before anything is
            // published or appended after it, so that every recovered record counts as synced (the next append is not
            // overlapped, and damage to a recovered record is never mistaken for a torn tail later).
            long filled = FillAfterRecovery(_active);
            _active.File.Sync();
            _active.MarkSynced(_active.WrittenLength);
            _active.FilledLength = filled;
        }
        catch
        {
            foreach (JournalSegment segment in segments)
            {
                segment.ReleaseOwner();
            }

            throw;
        }

        _nextSequence = expected;
        _lastTimestamp = Math.Max(lastTimestamp, purgedTimestamp);
        _purgedTimestamp = watermark > 1 ? purgedTimestamp : 0;
        Volatile.Write(ref _committedSequence, expected - 1);
        Volatile.Write(ref _durableSequence, expected - 1);
        PublishSegments(segments);
        lock (_writeLock)
        {
            _lastMark = marked ? mark : default;
            TryWriteMark(CaptureMarkLocked()); // everything recovered is durable now
        }

        Recovery = new JournalRecoveryInfo(segments.Length, records, entries, bytes, truncated,
            Stopwatch.GetElapsedTime(started));
        JournalLog.Recovered(_logger, Directory, segments.Length, records, entries, bytes, expected,
            (long)Recovery.Duration.TotalMilliseconds);
    }

    private readonly record struct ScanResult(long DataLength, long NextSequence, long Records, long FirstTimestamp,
        long LastTimestamp, long TruncatedBytes, long VerifiedFrom);

    /// <summary>
    /// An empty newest segment created with another segment size (the journal was reopened with a new
    /// <see cref="JournalOptions.SegmentSize"/>) is replaced by one of the configured size: otherwise a record larger
    /// than the old segment would rotate to a new segment of the same name, and every write would fail.
    /// </summary>
    private void ReplaceEmptyNewestSegmentOfAnotherSize(JournalSegment[] segments)
    {
        JournalSegment newest = segments[^1];
        if (newest.WrittenLength != JournalFormat.SegmentHeaderSize || newest.Capacity == _segmentSize)
        {
            return;
        }

        newest.ReleaseOwner(); // unmaps and closes it (no reader exists yet; idempotent if the replacement fails)
        segments[^1] = CreateSegment(newest.FirstSequence, WaitForPreparedSegment(), replace: true);
    }

    /// <summary>
    /// Holds the recovered journal to the durable mark: it must reach the mark's sequence and still hold the segment
    /// the mark names (unless a purge removed it).
    /// </summary>
    private static void CheckMark(in JournalDurableMark mark, string markPath, List<(long First, string Path)> found,
        long lastSequence, long watermark)
    {
        bool segmentFound = false;
        foreach ((long first, _) in found)
        {
            segmentFound |= first == mark.SegmentFirstSequence;
        }

        if (!segmentFound && mark.SegmentFirstSequence >= found[0].First && mark.SegmentFirstSequence >= watermark)
        {
            ThrowHelper.ThrowJournalCorrupted(markPath, 0,
                $"segment {JournalFormat.SegmentFileName(mark.SegmentFirstSequence)} is missing: the durable mark " +
                $"says the journal reached it");
        }

        if (lastSequence < mark.Sequence)
        {
            ThrowHelper.ThrowJournalCorrupted(markPath, 0,
                $"the journal ends at sequence {lastSequence}, but entries up to {mark.Sequence} were durable: the " +
                $"newest segment file is missing or was cut short");
        }
    }

    private ScanResult ScanSegment(JournalSegment segment, bool isNewest, long markedLength, long coveredThrough,
        ref long lastTimestamp, ref StoreIdentity identity)
    {
        ReadOnlySpan<byte> bytes = segment.Span(0, segment.Capacity);
        string? headerError = JournalFormat.ValidateSegmentHeader(bytes, segment.FirstSequence);
        if (headerError is not null)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, 0, headerError);
        }

        // Before anything of the segment is read or changed (a torn tail truncated): a segment of another store.
        if (identity.Conflict(JournalFormat.ReadSegmentStoreId(bytes), segment.Path, "the segment") is { } foreign)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, JournalFormat.SegmentStoreIdOffset, foreign);
        }

        long offset = JournalFormat.SegmentHeaderSize;
        long sequence = segment.FirstSequence;
        long records = 0;
        long firstTimestamp = long.MaxValue;
        long segmentLastTimestamp = long.MinValue;
        long verifiedFrom = -1;
        while (JournalFormat.TryReadRecordHeader(bytes[(int)offset..], out JournalFormat.RecordHeader header)
            && header.FirstSequence == sequence
            && header.TimestampTicks >= lastTimestamp)
        {
            if (sequence + header.EntryCount - 1 > coveredThrough)
            {
                ReadOnlySpan<byte> record = bytes.Slice((int)offset, header.Length);
                if (!JournalFormat.ChecksumMatches(record) || !JournalFormat.EntriesFillPayload(record, header))
                {
                    break;
                }

                if (verifiedFrom < 0)
                {
                    verifiedFrom = offset;
                }
            }

            if (records == 0)
            {
                firstTimestamp = header.TimestampTicks;
            }

            records++;
            lastTimestamp = segmentLastTimestamp = header.TimestampTicks;
            sequence += header.EntryCount;
            offset += header.Length;
        }

        long truncatedBytes = 0;
        ReadOnlySpan<byte> rest = bytes[(int)offset..];
        int lastNonZero = rest.LastIndexOfAnyExcept((byte)0);
        if (lastNonZero >= 0)
        {
            if (!isNewest)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    "a sealed segment holds a damaged record or bytes after its last record");
            }

            if (sequence <= coveredThrough)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    $"the record of sequence {sequence} is damaged, but it was durable: the data file's checkpoint " +
                    $"covers it (up to {coveredThrough})");
            }

            if (offset < markedLength)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    $"a damaged record lies below offset {markedLength}, which the durable mark says was synced");
            }

            long proof = FindDurabilityProof(bytes, offset);
            if (proof >= 0)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    $"a damaged record is followed by a valid record at offset {proof}, written after the damaged " +
                    $"one was durable");
            }

            truncatedBytes = lastNonZero + 1;
            TruncateTail(segment, offset, truncatedBytes);
            JournalLog.TornTailTruncated(_logger, segment.Path, offset, truncatedBytes);
        }

        return new ScanResult(offset, sequence, records, firstTimestamp, segmentLastTimestamp, truncatedBytes,
            verifiedFrom < 0 ? offset : verifiedFrom);
    }

    /// <summary>
    /// The offset of the first complete, checksummed record after <paramref name="damage"/> that proves the damaged
    /// bytes were durable (its synced length, the part of the segment known durable when it was written, reaches past
    /// <paramref name="damage"/>), or -1. Valid records that prove nothing are stepped over whole.
    /// </summary>
    private static long FindDurabilityProof(ReadOnlySpan<byte> segment, long damage)
    {
        // Every record magic starts with "FJR" (little-endian: the low three bytes).
        ReadOnlySpan<byte> prefix = "FJR"u8;
        int searched = (int)damage + 1;
        while (true)
        {
            int at = segment[searched..].IndexOf(prefix);
            if (at < 0)
            {
                return -1;
            }

            int offset = searched + at;
            if (JournalFormat.TryReadRecordHeader(segment[offset..], out JournalFormat.RecordHeader header))
            {
                ReadOnlySpan<byte> record = segment.Slice(offset, header.Length);
                if (JournalFormat.ChecksumMatches(record) && JournalFormat.EntriesFillPayload(record, header))
                {
                    long synced = header.SyncedLength == JournalFormat.SyncedUpToItself ? offset : header.SyncedLength;
                    if (synced > damage)
                    {
                        return offset;
                    }

                    searched = offset + header.Length;
                    continue;
                }
            }

            searched = offset + 1;
        }
    }

    /// <summary>Zeroes a torn tail so the next append starts on clean bytes, and makes that durable.</summary>
    private static void TruncateTail(JournalSegment segment, long offset, long length)
    {
        WriteZeros(segment.File, offset, offset + length);
        segment.File.Sync();
    }
}
