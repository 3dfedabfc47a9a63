namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    /// <summary>The size of the journal's segment files (they are preallocated to the segment size).</summary>
    internal long FileBytes()
    {
        long bytes = 0;
        foreach (JournalSegment segment in Segments.Segments)
        {
            bytes += segment.Capacity;
        }

        return bytes;
    }

    /// <summary>The committed bytes of the journal's segments (what <see cref="Verify"/> reads).</summary>
    internal long CommittedBytes()
    {
        long bytes = 0;
        foreach (JournalSegment segment in Segments.Segments)
        {
            bytes += segment.CommittedLength;
        }

        return bytes;
    }

    /// <summary>
    /// Reads every committed record of every segment from the files and checks it (segment header, record shape,
    /// checksum, entry framing, gap-free sequences), whatever readers verified before: a scrub for damage that
    /// happened on disk after the records were written. Lock-free like a reader: it holds a reference on each segment
    /// while it reads it, so a purge meanwhile only skips the segments it removed. Calls
    /// <paramref name="progress"/> with the bytes of each record checked.
    /// </summary>
    /// <returns>The segments and records checked; a segment that fails adds its problem (file and offset) to
    /// <paramref name="problems"/>, and the scrub goes on with the next segment.</returns>
    internal (int Segments, long Records) Verify(Action<long>? progress, List<string> problems,
        CancellationToken cancellationToken)
    {
        ThrowIfDisposed();
        JournalSegment[] segments = Segments.Segments;
        int checkedSegments = 0;
        long records = 0;
        foreach (JournalSegment segment in segments)
        {
            if (!segment.TryAcquire(out int stripe))
            {
                continue; // purged meanwhile
            }

            try
            {
                records += VerifySegment(segment, _storeId, progress, cancellationToken);
                checkedSegments++;
            }
            catch (JournalCorruptedException e)
            {
                problems.Add(e.Message);
                checkedSegments++;
            }
            finally
            {
                segment.Release(stripe);
            }
        }

        return (checkedSegments, records);
    }

    private static long VerifySegment(JournalSegment segment, Guid storeId, Action<long>? progress,
        CancellationToken cancellationToken)
    {
        ReadOnlySpan<byte> segmentHeader = segment.Span(0, JournalFormat.SegmentHeaderSize);
        string? headerError = JournalFormat.ValidateSegmentHeader(segmentHeader, segment.FirstSequence);
        if (headerError is not null)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, 0, headerError);
        }

        if (JournalFormat.ReadSegmentStoreId(segmentHeader) is var id && id != Guid.Empty && id != storeId)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, JournalFormat.SegmentStoreIdOffset,
                $"the segment belongs to another store (store id {id}) than this journal (store id {storeId})");
        }

        long end = segment.CommittedLength;
        long offset = JournalFormat.SegmentHeaderSize;
        long expected = segment.FirstSequence;
        long records = 0;
        while (offset < end)
        {
            cancellationToken.ThrowIfCancellationRequested();
            ReadOnlySpan<byte> available = segment.Span(offset, end - offset);
            if (!JournalFormat.TryReadRecordHeader(available, out JournalFormat.RecordHeader header))
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    "a committed record has a damaged header (magic, length or entry count)");
            }

            ReadOnlySpan<byte> record = available[..header.Length];
            if (!JournalFormat.ChecksumMatches(record) || !JournalFormat.EntriesFillPayload(record, header))
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, "a committed record fails its checksum");
            }

            if (header.FirstSequence != expected)
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                    $"the record starts at sequence {header.FirstSequence}, {expected} was expected");
            }

            expected += header.EntryCount;
            offset += header.Length;
            records++;
            progress?.Invoke(header.Length);
        }

        return records;
    }
}
