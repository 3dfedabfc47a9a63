using System.Buffers.Binary;
using System.Runtime.CompilerServices;

namespace Folio.Journal;

/// <summary>
/// Reads journal entries forward from a sequence number or a timestamp, across segment rotations, seeing only
/// committed (durable) entries, and can wait for new ones without polling.
/// <para>
/// Lock-free. A reader caches the journal's segment list and looks at the journal again only when the journal's
/// segment version moved (rotation, purge). It takes a reference on the segment it reads, so a purge cannot unmap
/// it underneath; it reads through the segment's memory mapping only bytes below the segment's published committed
/// length and entries up to the journal's published committed sequence. Each record's checksum is checked before
/// its first entry is returned, once per record per process (the segment index remembers the verified prefix). It never
/// writes journal or segment state other than reference counts and the shared, reader-built <see cref="SegmentIndex"/>.
/// </para>
/// <para>
/// A reader is used by one consumer at a time (like an enumerator); open one reader per consumer.
/// </para>
/// </summary>
public sealed partial class JournalReader : IDisposable
{
    private readonly WriteAheadJournal _journal;
    private SegmentSet _segments;
    private long _segmentsVersion;
    private JournalSegment? _segment;
    private int _segmentStripe;
    private long _nextSequence;
    private long _nextRecordOffset;
    private long _entryOffset;
    private long _lastEntryDataOffset;
    private long _recordEnd;
    private long _recordTimestamp;
    private long _recordFirstSequence;
    private int _entriesLeft;
    private bool _disposed;

    internal JournalReader(WriteAheadJournal journal, long fromSequence)
    {
        _journal = journal;
        _segments = journal.Segments;
        _segmentsVersion = _segments.Version;
        _nextSequence = fromSequence;
    }

    /// <summary>The sequence number the next successful <see cref="TryRead"/> returns.</summary>
    public long NextSequence => _nextSequence;

    /// <summary>Where the last entry's data lies in the journal (recovery replay locates values by it).</summary>
    internal JournalDataLocation LastEntryLocation => new(_segment!, _lastEntryDataOffset);

    /// <summary>The first sequence number of the record the last entry read belongs to (entries of one record were
    /// appended as one group).</summary>
    public long RecordFirstSequence => _recordFirstSequence;

    /// <summary>
    /// Reads the next committed entry. Returns false when the reader is at the end of the committed entries (call
    /// <see cref="WaitToReadAsync"/> to wait for more). The entry's data is valid until the next call on this reader.
    /// </summary>
    /// <param name="entry">The entry read.</param>
    /// <returns>Whether an entry was read.</returns>
    /// <exception cref="JournalPositionPurgedException">The next entry's segment was purged before the reader reached
    /// it.</exception>
    /// <exception cref="JournalCorruptedException">A committed record fails its checksum.</exception>
    /// <exception cref="ObjectDisposedException">The reader or the journal was disposed.</exception>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public bool TryRead(out JournalEntry entry)
    {
        if (_entriesLeft == 0 && !TryEnterNextRecord())
        {
            entry = default;
            return false;
        }

        ReadOnlySpan<byte> bytes = _segment!.Span(_entryOffset, _recordEnd - _entryOffset);
        uint length = BinaryPrimitives.ReadUInt32LittleEndian(bytes);
        if (length > (uint)(bytes.Length - JournalFormat.EntryHeaderSize))
        {
            ThrowHelper.ThrowJournalCorrupted(_segment.Path, _entryOffset, "an entry runs past the end of its record");
        }

        entry = new JournalEntry(_nextSequence, _recordTimestamp,
            bytes.Slice(JournalFormat.EntryHeaderSize, (int)length));
        _lastEntryDataOffset = _entryOffset + JournalFormat.EntryHeaderSize;
        _entryOffset += JournalFormat.EntryHeaderSize + length;
        _entriesLeft--;
        _nextSequence++;
        return true;
    }

    /// <summary>
    /// Completes with true as soon as an entry can be read (at once when one is committed), or with false when the
    /// journal was disposed. Wakes on commit; never polls.
    /// </summary>
    /// <param name="cancellationToken">Cancels the wait.</param>
    /// <returns>Whether an entry is available.</returns>
    public ValueTask<bool> WaitToReadAsync(CancellationToken cancellationToken = default)
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (_entriesLeft > 0 || _nextSequence <= _journal.CommittedSequence)
        {
            return new ValueTask<bool>(true);
        }

        return WaitSlowAsync(cancellationToken);
    }

    /// <summary>Releases the segment the reader holds (so a purged segment's file can be deleted).
    /// Idempotent.</summary>
    public void Dispose()
    {
        if (!_disposed)
        {
            _disposed = true;
            _segment?.Release(_segmentStripe);
            _segment = null;
            _entriesLeft = 0;
        }
    }

    /// <summary>Positions the reader at the first committed entry stamped at or after
    /// <paramref name="timestampTicks"/>.</summary>
    internal void SeekToTimestamp(long timestampTicks)
    {
        LeaveSegment();
        long committed = _journal.CommittedSequence;
        JournalSegment[] segments = RefreshSegments(force: false).Segments;
        int start = 0;
        for (int i = segments.Length - 1; i >= 0; i--)
        {
            if (segments[i].FirstTimestamp < timestampTicks)
            {
                start = i;
                break;
            }
        }

        for (int i = start; i < segments.Length; i++)
        {
            JournalSegment segment = segments[i];
            if (!segment.TryAcquire(out int stripe))
            {
                continue;
            }

            long committedLength = segment.CommittedLength;
            long offset = segment.Index.FindTimestamp(timestampTicks, committedLength, out bool exact);
            if (exact)
            {
                // The index names the record itself: no walk through the headers before it.
                _segment = segment;
                _segmentStripe = stripe;
                EnterRecordAt(offset);
                return;
            }

            if (offset >= 0)
            {
                ReadOnlySpan<byte> bytes = segment.Span(0, committedLength);
                while (offset < committedLength
                    && JournalFormat.TryReadRecordHeader(bytes[(int)offset..], out JournalFormat.RecordHeader header))
                {
                    if (header.TimestampTicks >= timestampTicks)
                    {
                        _segment = segment;
                        _segmentStripe = stripe;
                        _nextSequence = header.FirstSequence;
                        EnterRecord(offset, header.FirstSequence);
                        return;
                    }

                    offset += header.Length;
                }
            }

            segment.Release(stripe);
        }

        _nextSequence = committed + 1;
    }

    private async ValueTask<bool> WaitSlowAsync(CancellationToken cancellationToken)
    {
        while (true)
        {
            ObjectDisposedException.ThrowIf(_disposed, this);
            Task signal = _journal.CommitSignal;
            if (_journal.IsDisposed)
            {
                return false;
            }

            if (_nextSequence <= _journal.CommittedSequence)
            {
                return true;
            }

            _journal.EnterSignalWait();
            try
            {
                await signal.WaitAsync(cancellationToken).ConfigureAwait(false);
            }
            finally
            {
                _journal.ExitSignalWait();
            }
        }
    }

    private bool TryEnterNextRecord()
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        if (_journal.IsDisposed)
        {
            ThrowHelper.ThrowObjectDisposed(nameof(WriteAheadJournal));
        }

        if (_nextSequence > _journal.CommittedSequence)
        {
            return false;
        }

        if (_segment is null)
        {
            PositionAt(_nextSequence);
            return true;
        }

        while (true)
        {
            if (_nextRecordOffset < _segment.CommittedLength)
            {
                EnterRecord(_nextRecordOffset, _nextSequence);
                return true;
            }

            // The entry is committed but not in this segment: it starts the next one.
            MoveToSegmentOf(_nextSequence);
            _nextRecordOffset = JournalFormat.SegmentHeaderSize;
        }
    }

    /// <summary>Enters the committed record holding <paramref name="sequence"/> and skips to that entry.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void PositionAt(long sequence)
    {
        MoveToSegmentOf(sequence);
        JournalSegment segment = _segment!;
        long committedLength = segment.CommittedLength;
        long offset = segment.Index.FindBySequence(sequence, committedLength);
        ReadOnlySpan<byte> bytes = segment.Span(0, committedLength);
        while (offset >= 0 && offset < committedLength
            && JournalFormat.TryReadRecordHeader(bytes[(int)offset..], out JournalFormat.RecordHeader header))
        {
            if (sequence < header.FirstSequence + header.EntryCount)
            {
                EnterRecord(offset, header.FirstSequence);
                for (long skip = sequence - header.FirstSequence; skip > 0; skip--)
                {
                    uint length = BinaryPrimitives.ReadUInt32LittleEndian(
                        segment.Span(_entryOffset, JournalFormat.EntryHeaderSize));
                    _entryOffset += JournalFormat.EntryHeaderSize + length;
                    _entriesLeft--;
                }

                return;
            }

            offset += header.Length;
        }

        ThrowHelper.ThrowJournalCorrupted(segment.Path, Math.Max(offset, 0),
            $"committed sequence {sequence} is not in the segment that should hold it");
    }

    /// <summary>Enters the committed record at <paramref name="offset"/>, whatever its first sequence (a seek by
    /// time).</summary>
    private void EnterRecordAt(long offset)
    {
        JournalSegment segment = _segment!;
        if (!JournalFormat.TryReadRecordHeader(segment.Span(offset, segment.CommittedLength - offset),
            out JournalFormat.RecordHeader header))
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, "a committed record has an invalid header");
        }

        _nextSequence = header.FirstSequence;
        EnterRecord(offset, header.FirstSequence);
    }

    /// <summary>Checks the record at <paramref name="offset"/> and makes it the current one.</summary>
    private void EnterRecord(long offset, long expectedFirstSequence)
    {
        JournalSegment segment = _segment!;
        long committedLength = segment.CommittedLength;
        ReadOnlySpan<byte> available = segment.Span(offset, committedLength - offset);
        if (!JournalFormat.TryReadRecordHeader(available, out JournalFormat.RecordHeader header))
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, "a committed record has an invalid header");
        }

        if (header.FirstSequence != expectedFirstSequence)
        {
            ThrowHelper.ThrowJournalCorrupted(segment.Path, offset,
                $"the record starts at sequence {header.FirstSequence}, {expectedFirstSequence} was expected");
        }

        if (!segment.Index.IsVerified(offset, offset + header.Length))
        {
            if (!JournalFormat.ChecksumMatches(available[..header.Length]))
            {
                ThrowHelper.ThrowJournalCorrupted(segment.Path, offset, "a committed record fails its checksum");
            }

            segment.Index.MarkVerified(offset, offset + header.Length);
        }

        _recordTimestamp = header.TimestampTicks;
        _recordFirstSequence = header.FirstSequence;
        _entriesLeft = header.EntryCount;
        _entryOffset = offset + header.HeaderSize;
        _recordEnd = offset + header.Length;
        _nextRecordOffset = _recordEnd;
    }

    /// <summary>Makes the segment holding <paramref name="sequence"/> the current one (taking a reference on
    /// it).</summary>
    private void MoveToSegmentOf(long sequence)
    {
        bool force = false;
        while (true)
        {
            SegmentSet set = RefreshSegments(force);
            int index = set.IndexOf(sequence);
            if (index < 0)
            {
                if (_journal.IsDisposed)
                {
                    ThrowHelper.ThrowObjectDisposed(nameof(WriteAheadJournal));
                }

                ThrowHelper.ThrowPositionPurged(sequence, set.Segments.Length > 0 ? set.Segments[0].FirstSequence
                    : sequence);
            }

            JournalSegment segment = set.Segments[index];
            if (ReferenceEquals(segment, _segment))
            {
                if (!force)
                {
                    // A stale list can still name the current segment for an entry that lives in the next one.
                    force = true;
                    continue;
                }

                ThrowHelper.ThrowJournalCorrupted(segment.Path, segment.CommittedLength,
                    $"committed sequence {sequence} is missing from the segment that should hold it");
            }

            if (segment.TryAcquire(out int stripe))
            {
                LeaveSegment();
                _segment = segment;
                _segmentStripe = stripe;
                return;
            }

            // Released (purged) after we cached the list: look again.
            force = true;
        }
    }

    private SegmentSet RefreshSegments(bool force)
    {
        long version = _journal.SegmentsVersion;
        if (force || version != _segmentsVersion)
        {
            _segments = _journal.Segments;
            _segmentsVersion = _segments.Version;
        }

        return _segments;
    }

    private void LeaveSegment()
    {
        _segment?.Release(_segmentStripe);
        _segment = null;
        _entriesLeft = 0;
    }
}
