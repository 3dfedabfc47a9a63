using System.Buffers.Binary;
using System.Diagnostics;

namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    /// <summary>
    /// Scans every segment in order and rebuilds the writer's state. Rules: every segment header must be valid;
    /// sequence numbers must continue across records and segments (from the purge watermark, or 1); in a sealed
    /// segment only zeros may follow the last record; in the newest segment, bytes after the last good record are a
    /// torn tail (zeroed and logged) when no later valid record follows or every later valid record is overlapped
    /// (written while the damaged one was not yet known durable, so none of them was acknowledged as durable), while a
    /// later record that is not overlapped means the damaged one had been made durable: corruption.
    /// </summary>
    private void Recover()
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
        long watermark = ReadPurgeWatermark();

        // Segments wholly before the watermark survived an interrupted purge: finish it.
        while (found.Count >= 2 && found[1].First <= watermark)
        {
            _fileSystem.DeleteFile(found[0].Path);
            JournalLog.LeftoverRemoved(_logger, found[0].Path);
            found.RemoveAt(0);
        }

        if (found.Count == 0)
        {
            if (watermark > 1)
            {
                ThrowHelper.ThrowJournalCorrupted(Directory, 0, $"no segment file is left, but entries up to {watermark - 1} were written");
            }

            _nextSequence = 1;
            _active = CreateSegment(1);
            PublishSegments([_active]);
            Recovery = new JournalRecoveryInfo(1, 0, 0, 0, 0, Stopwatch.GetElapsedTime(started));
            JournalLog.Recovered(_logger, Directory, 1, 0, 0, 0, 1, (long)Recovery.Duration.TotalMilliseconds);
            return;
        }

        long expected = Math.Max(watermark, 1);
        if (found[0].First != expected)
        {
            ThrowHelper.ThrowJournalCorrupted(found[0].Path, 0, $"the oldest segment starts at sequence {found[0].First} but {expected} was expected: a segment file is missing");
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
                    ThrowHelper.ThrowJournalCorrupted(found[i].Path, 0, $"the segment starts at sequence {found[i].First} but the previous one ends at {expected - 1}");
                }

                var file = _fileSystem.OpenFile(found[i].Path, FileMode.Open);
                long capacity = file.Length;
                if (capacity < JournalFormat.SegmentHeaderSize)
                {
                    file.Dispose();
                    ThrowHelper.ThrowJournalCorrupted(found[i].Path, 0, "the segment file is shorter than its header");
                }

                segments[i] = new JournalSegment(file, found[i].First, capacity, JournalFormat.SegmentHeaderSize, DeleteSegmentFile, OpenSyncHandle);
                ScanResult scan = ScanSegment(segments[i], isNewest: i == found.Count - 1, ref lastTimestamp);
                segments[i].WrittenLength = scan.DataLength;
                segments[i].Index.MarkVerified(JournalFormat.SegmentHeaderSize, scan.DataLength);
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

        _active = segments[^1];
        try
        {
            // What a killed process wrote may still be only in the page cache: make it durable before anything is
            // published or appended after it, so that every recovered record counts as synced (the next append is not
            // overlapped, and damage to a recovered record is never mistaken for a torn tail later).
            _active.File.Sync();
            _active.MarkSynced(_active.WrittenLength);
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
        _lastTimestamp = lastTimestamp;
        Volatile.Write(ref _committedSequence, expected - 1);
        Volatile.Write(ref _durableSequence, expected - 1);
        PublishSegments(segments);
        Recovery = new JournalRecoveryInfo(segments.Length, records, entries, bytes, truncated, Stopwatch.GetElapsedTime(started));
        JournalLog.Recovered(_logger, Directory, segments.Length, records, entries, bytes, expected, (long)Recovery.Duration.TotalMilliseconds);
    }

    private readonly record struct ScanResult(long DataLength, long NextSequence, long Records, long FirstTimestamp, long LastTimestamp, long TruncatedBytes);

    private ScanResult ScanSegment(JournalSegment segment, bool isNewest, ref long lastTimestamp)
    {
        ReadOnlySpan<byte> bytes = segment.Span(0, segment.Capacity);
        string? headerError = JournalFormat.ValidateSegmentHeader(bytes, segment.FirstSequence);
        if (headerError is not null)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, 0, headerError);
        }

        long offset = JournalFormat.SegmentHeaderSize;
        long sequence = segment.FirstSequence;
        long records = 0;
        long firstTimestamp = long.MaxValue;
        long segmentLastTimestamp = long.MinValue;
        while (JournalFormat.TryReadRecordHeader(bytes[(int)offset..], out JournalFormat.RecordHeader header)
            && header.FirstSequence == sequence
            && header.TimestampTicks >= lastTimestamp)
        {
            ReadOnlySpan<byte> record = bytes.Slice((int)offset, header.Length);
            if (!JournalFormat.ChecksumMatches(record) || !JournalFormat.EntriesFillPayload(record, header.EntryCount))
            {
                break;
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
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, "a sealed segment holds a damaged record or bytes after its last record");
            }

            long valid = FindDurableRecord(rest[1..]);
            if (valid >= 0)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, $"a damaged record is followed by a valid record at offset {offset + 1 + valid}, written after the damaged one was durable");
            }

            truncatedBytes = lastNonZero + 1;
            TruncateTail(segment, offset, truncatedBytes);
            JournalLog.TornTailTruncated(_logger, segment.Path, offset, truncatedBytes);
        }

        return new ScanResult(offset, sequence, records, firstTimestamp, segmentLastTimestamp, truncatedBytes);
    }

    /// <summary>
    /// The offset of the first complete, checksummed record in <paramref name="bytes"/> that is not overlapped (its
    /// writer knew every earlier record durable), or -1. Overlapped valid records are stepped over whole.
    /// </summary>
    private static long FindDurableRecord(ReadOnlySpan<byte> bytes)
    {
        // Both magics start with "FJR" (little-endian: the low three bytes).
        ReadOnlySpan<byte> prefix = "FJR"u8;
        int searched = 0;
        while (true)
        {
            int at = bytes[searched..].IndexOf(prefix);
            if (at < 0)
            {
                return -1;
            }

            int offset = searched + at;
            if (JournalFormat.TryReadRecordHeader(bytes[offset..], out JournalFormat.RecordHeader header))
            {
                ReadOnlySpan<byte> record = bytes.Slice(offset, header.Length);
                if (JournalFormat.ChecksumMatches(record) && JournalFormat.EntriesFillPayload(record, header.EntryCount))
                {
                    if (!header.Overlapped)
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
        byte[] zeros = new byte[(int)Math.Min(length, 1 << 20)];
        for (long done = 0; done < length; done += zeros.Length)
        {
            segment.File.Write(zeros.AsSpan(0, (int)Math.Min(zeros.Length, length - done)), offset + done);
        }

        segment.File.Sync();
    }
}
