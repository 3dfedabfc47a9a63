using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    /// <summary>The watermark this build writes: the first retained sequence, the time of the last purged record
    /// and a checksum. Older builds wrote the first 8 bytes and a checksum (12 bytes).</summary>
    private const int PurgeWatermarkSize = 20;
    private const int LegacyPurgeWatermarkSize = 12;
    private readonly List<JournalRetention> _retentions = []; // under _segmentsLock
    private long _heldBytes; // written by purges under _segmentsLock, read by metrics without it
    private long _lapsedHolds; // likewise

    /// <summary>Bytes of sealed segments the last purge kept only because a hold (<see cref="Retain"/>) still needed
    /// them: what change-feed readers and backups cost the disk beyond the checkpoint's own rule.</summary>
    internal long HeldBytes => Volatile.Read(ref _heldBytes);

    /// <summary>Holds purges gave up so far (<see cref="JournalRetention.IsLapsed"/>).</summary>
    internal long LapsedHolds => Volatile.Read(ref _lapsedHolds);

    /// <summary>
    /// Removes every sealed segment whose entries all precede <paramref name="beforeSequence"/>. The active segment
    /// is never removed, so entries at or after <paramref name="beforeSequence"/> always stay and some before it may
    /// too. Readers inside a removed segment keep reading it; its file is deleted after the last of them leaves.
    /// Purge does not block appends or syncs (only a concurrent rotation, briefly).
    /// </summary>
    /// <param name="beforeSequence">Entries below this number may be removed.</param>
    /// <returns>The number of segments removed.</returns>
    /// <exception cref="StoreFaultedException">The journal's folder was deleted or moved while it was open (it then
    /// deletes nothing by path).</exception>
    public int Purge(long beforeSequence)
        => Purge(static (segment, next, limit) => next.FirstSequence <= limit, beforeSequence);

    /// <summary>
    /// Removes every sealed segment whose entries are all older than <paramref name="before"/>; see
    /// <see cref="Purge(long)"/>.
    /// </summary>
    /// <param name="before">Entries stamped before this time may be removed.</param>
    /// <returns>The number of segments removed.</returns>
    public int Purge(DateTimeOffset before)
        => Purge(static (segment, next, limit) => segment.LastTimestamp < limit, before.UtcTicks);

    /// <summary>
    /// Keeps every entry from <paramref name="fromSequence"/> on from purges until the returned hold is disposed (an
    /// online backup copies them meanwhile; a change-feed stream advances its hold as it reads). Purges still remove
    /// segments wholly before it. A purge that would keep more than <paramref name="maxHeldBytes"/> of sealed segments
    /// for this hold alone lapses it instead (see <see cref="JournalRetention"/>).
    /// </summary>
    /// <param name="fromSequence">The first sequence to keep.</param>
    /// <param name="maxHeldBytes">The bound of the hold; null for a hold that never lapses, not even while the disk
    /// is full.</param>
    /// <exception cref="JournalPositionPurgedException"><paramref name="fromSequence"/> is already purged.</exception>
    internal JournalRetention Retain(long fromSequence, long? maxHeldBytes = null)
    {
        lock (_segmentsLock)
        {
            ThrowIfDisposed();
            long first = FirstSequence;
            if (fromSequence < first)
            {
                ThrowHelper.ThrowPositionPurged(fromSequence, first);
            }

            var retention = new JournalRetention(this, fromSequence, maxHeldBytes);
            _retentions.Add(retention);
            return retention;
        }
    }

    /// <summary>Keeps every entry the journal holds now from purges until the returned hold is disposed.</summary>
    /// <param name="maxHeldBytes">The bound of the hold; null for a hold that never lapses.</param>
    internal JournalRetention RetainAll(long? maxHeldBytes = null)
    {
        lock (_segmentsLock)
        {
            // The lock is reentrant: no purge runs between the read and the hold.
            return Retain(FirstSequence, maxHeldBytes);
        }
    }

    /// <summary>Ends a hold taken by <see cref="Retain"/> (its Dispose).</summary>
    internal void Release(JournalRetention retention)
    {
        lock (_segmentsLock)
        {
            _retentions.Remove(retention);
        }
    }

    private int Purge(Func<JournalSegment, JournalSegment, long, bool> removable, long limit)
    {
        EnsureFolderIsOurs("purge segments"); // before the segments lock: faulting takes the write lock
        lock (_segmentsLock)
        {
            ThrowIfDisposed();
            JournalSegment[] current = _segmentSet.Segments;
            int allowed = 0; // what the limit alone lets go
            while (allowed < current.Length - 1 && removable(current[allowed], current[allowed + 1], limit))
            {
                allowed++;
            }

            long retained = long.MaxValue;
            bool diskFull = DiskFull is not null;
            for (int i = _retentions.Count - 1; i >= 0; i--)
            {
                JournalRetention retention = _retentions[i];
                long from = retention.FromSequence;
                if (retention.MaxHeldBytes is long maxHeld)
                {
                    long held = BytesHeldFrom(current, allowed, from);
                    if (held > 0 && (diskFull || held > maxHeld))
                    {
                        retention.Lapse(diskFull
                            ? "The disk was full, so the journal it had not read was purged to make room."
                            : $"It fell more than MaxChangeFeedLag ({maxHeld} bytes) of journal " +
                            "behind the last checkpoint, so the journal it had not read was purged.");
                        _retentions.RemoveAt(i);
                        Volatile.Write(ref _lapsedHolds, _lapsedHolds + 1);
                        JournalLog.RetentionLapsed(_logger, from, held, maxHeld, diskFull);
                        continue;
                    }
                }

                retained = Math.Min(retained, from);
            }

            int count = 0;
            while (count < allowed && current[count + 1].FirstSequence <= retained)
            {
                count++;
            }

            Volatile.Write(ref _heldBytes, SealedBytes(current, count, allowed));

            if (count == 0)
            {
                return 0;
            }

            // Durable watermark first: if only some files get deleted before a crash, recovery knows the rest are
            // leftovers and not a gap.
            long purgedTimestamp = current[count - 1].LastTimestamp;
            WritePurgeWatermark(current[count].FirstSequence, purgedTimestamp);
            _purgedTimestamp = purgedTimestamp;
            PublishSegments(current[count..]);
            for (int i = 0; i < count; i++)
            {
                current[i].MarkForDeletion();
                current[i].ReleaseOwner();
            }

            JournalLog.Purged(_logger, count, current[count].FirstSequence);
            return count;
        }
    }

    /// <summary>The bytes of the first <paramref name="allowed"/> segments that a hold from
    /// <paramref name="from"/> keeps (those holding an entry at or after it).</summary>
    private static long BytesHeldFrom(JournalSegment[] segments, int allowed, long from)
    {
        int first = allowed;
        while (first > 0 && segments[first].FirstSequence > from)
        {
            first--;
        }

        return SealedBytes(segments, first, allowed);
    }

    /// <summary>The bytes of the sealed segments <paramref name="start"/> to <paramref name="end"/>
    /// (excluded).</summary>
    private static long SealedBytes(JournalSegment[] segments, int start, int end)
    {
        long bytes = 0;
        for (int i = start; i < end; i++)
        {
            bytes += segments[i].SealedLength;
        }

        return bytes;
    }

    private void WritePurgeWatermark(long firstRetained, long purgedTimestamp)
    {
        string path = Path.Combine(Directory, JournalFormat.PurgeWatermarkFileName);
        string temporary = path + ".tmp";
        Span<byte> bytes = stackalloc byte[PurgeWatermarkSize];
        BinaryPrimitives.WriteInt64LittleEndian(bytes, firstRetained);
        BinaryPrimitives.WriteInt64LittleEndian(bytes[8..], purgedTimestamp);
        BinaryPrimitives.WriteUInt32LittleEndian(bytes[16..], Crc32C.Compute(bytes[..16]));
        _fileSystem.DeleteFile(temporary);
        using (Storage.IStorageFile file = _fileSystem.OpenFile(temporary, FileMode.CreateNew))
        {
            file.Write(bytes, 0);
            file.Sync();
        }

        _fileSystem.MoveFile(temporary, path, overwrite: true);
        _fileSystem.SyncDirectory(Directory);
    }

    /// <summary>The first sequence kept by the last purge (0 when the journal was never purged) and the time (UTC
    /// ticks) of the record that held the entry before it (0 when unknown: a watermark written by an older build).
    /// </summary>
    internal static (long FirstRetained, long PurgedTimestamp) ReadPurgeWatermark(IFileSystem fileSystem,
        string directory)
    {
        string path = Path.Combine(directory, JournalFormat.PurgeWatermarkFileName);
        if (!fileSystem.FileExists(path))
        {
            return (0, 0);
        }

        using Storage.IStorageFile file = fileSystem.OpenFileForReading(path);
        Span<byte> bytes = stackalloc byte[PurgeWatermarkSize + 1];
        int length = file.Read(bytes, 0);
        int checksummed = length - 4;
        if (length is not (PurgeWatermarkSize or LegacyPurgeWatermarkSize)
            || BinaryPrimitives.ReadUInt32LittleEndian(bytes[checksummed..]) != Crc32C.Compute(bytes[..checksummed]))
        {
            ThrowHelper.ThrowJournalCorrupted(path, 0, "the purge watermark file is damaged");
        }

        return (BinaryPrimitives.ReadInt64LittleEndian(bytes),
            length == PurgeWatermarkSize ? BinaryPrimitives.ReadInt64LittleEndian(bytes[8..]) : 0);
    }
}
