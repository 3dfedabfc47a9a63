using System.Buffers;
using System.Buffers.Binary;
using System.Diagnostics;
using System.IO.Pipelines;
using Folio.Documents;
using Folio.Journal;
using Folio.Pages;

namespace Folio.Backups;

/// <summary>
/// Writes one online backup of a store into a <see cref="PipeWriter"/> (format: <see cref="BackupFormat"/>).
/// <para>
/// Ownership: one backup call owns the writer and its frame buffer; it runs beside commits, reads and checkpoints
/// and takes no store lock. Consistency: it first holds the journal from its first entry on (no purge removes an
/// entry it will copy), then pins the current checkpoint C (no checkpoint frees or reuses a chunk C reaches), then
/// copies C's chunks (immutable once written; each checked page by page before it is copied, so damage fails the
/// backup rather than its restore) and the committed journal entries C + 1 .. S, S being the journal's
/// committed sequence when the copy starts: the backup is the store as of S. Every frame is flushed before the next
/// is built, so a slow destination holds the backup at one frame (at most 256 KiB) plus what the pipe buffers up to
/// its pause threshold; the store's memory never grows with the destination's lag. A backup is paced (the bytes it
/// may send per second, <see cref="DocumentStoreOptions.BackupBytesPerSecond"/>): after each frame it waits until the
/// bytes sent so far are due, so the disk keeps room for the commits' fsyncs.
/// </para>
/// </summary>
internal sealed class BackupWriter : IDisposable
{
    private readonly PipeWriter _destination;
    private readonly CancellationToken _cancellationToken;
    /// <summary>Checkpoints pinned before a journal that keeps being purged under the spool is reported.</summary>
    private const int PinAttempts = 16;

    private const int MaxFrame = BackupFormat.FrameHeaderSize + BackupFormat.MaxPayload + BackupFormat.FrameTrailerSize;

    // The pipe's memory the next frame is built in (GetMemory), valid until it is advanced past: frames are written
    // where the pipe will send them from, never copied.
    private Memory<byte> _frame;
    private uint _index;
    private long _bytes;

    // The entry read from the journal that did not fit the frame being filled (a new record, or a full frame): the
    // reader's span is gone at the next read, so it waits here for the next frame.
    private byte[] _carry = [];
    private int _carryLength = -1;
    private long _carrySequence;
    private long _carryRecord;
    private long _carryTimestamp;

    // The pace: bytes sent per second at most (0: none), measured from the start of the backup.
    private readonly long _bytesPerSecond;
    private readonly long _started = Stopwatch.GetTimestamp();

    private BackupWriter(PipeWriter destination, long bytesPerSecond, CancellationToken cancellationToken)
    {
        _destination = destination;
        _bytesPerSecond = bytesPerSecond;
        _cancellationToken = cancellationToken;
    }

    /// <summary>Writes an incremental backup: the committed journal entries from <paramref name="fromSequence"/> on
    /// (a restore applies it after the backup that ends at <paramref name="fromSequence"/> - 1); does not complete
    /// <paramref name="destination"/>. Throws <see cref="JournalPositionPurgedException"/> when the journal no longer
    /// holds <paramref name="fromSequence"/>.</summary>
    public static async ValueTask<BackupResult> WriteIncrementAsync(WriteAheadJournal journal, long fromSequence,
        PipeWriter destination, long bytesPerSecond, TimeProvider clock, CancellationToken cancellationToken)
    {
        using var writer = new BackupWriter(destination, bytesPerSecond, cancellationToken);
        using JournalRetention retention = journal.Retain(fromSequence);
        long last = journal.CommittedSequence;
        if (fromSequence > last + 1)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(fromSequence), fromSequence,
                $"The store's last commit is {last}; an incremental backup starts at most at {last + 1}.");
        }

        long previousTimestamp = journal.TryGetRecordTimestamp(fromSequence - 1, out long ticks) ? ticks : 0;
        BackupFormat.Begin begin = IncrementBegin(fromSequence, last, previousTimestamp, clock, journal.SegmentSize);
        return await writer.WriteAsync(begin, journal, null, [], clock).ConfigureAwait(false);
    }

    /// <summary>Writes a full backup of the store whose journal and page store these are; does not complete
    /// <paramref name="destination"/>.</summary>
    public static async ValueTask<BackupResult> WriteAsync(WriteAheadJournal journal, PageStore pages,
        PipeWriter destination, long bytesPerSecond, TimeProvider clock, CancellationToken cancellationToken)
    {
        using var writer = new BackupWriter(destination, bytesPerSecond, cancellationToken);
        using JournalRetention retention = journal.RetainAll();
        PageCheckpoint checkpoint = pages.Pin();
        try
        {
            // The journal publishes a group after the index shows it, and a checkpoint covers what the index shows:
            // wait for the journal to publish what the checkpoint holds, so the copy starts at or after it.
            long holds = Math.Max(checkpoint.Sequence, checkpoint.PassSequence); // a slice: what its pass covers
            while (journal.CommittedSequence < holds)
            {
                await Task.Delay(1, cancellationToken).ConfigureAwait(false);
            }

            // The hold keeps the entries from the journal's first on, and the checkpoint that set that first entry
            // covered the entry before it, so the journal holds entry C or the time of the last one it purged.
            List<ChunkInfo> chunks = pages.ReadChunkTable(checkpoint);
            long checkpointTimestamp = journal.TryGetRecordTimestamp(checkpoint.Sequence, out long ticks) ? ticks : 0;
            BackupFormat.Begin begin = FullBegin(checkpoint, chunks, journal.CommittedSequence, checkpointTimestamp,
                clock, journal.SegmentSize);
            BackupResult result = await writer.WriteAsync(begin, journal, pages, chunks, clock).ConfigureAwait(false);
            return RestorableFrom(result, checkpoint);
        }
        finally
        {
            PageStore.Unpin(checkpoint);
        }
    }

    /// <summary>
    /// Writes a backup of the store in <paramref name="folder"/> from its files, without opening it (a store another
    /// process may hold and keep writing): full, or incremental from <paramref name="fromSequence"/>. A full backup
    /// pins the newest checkpoint (<see cref="PinnedCheckpoint"/>), then spools the journal's complete, durable
    /// entries after it (<see cref="SpooledEntrySource"/>; the writer may purge them once it has checkpointed again,
    /// so they are taken first and the attempt starts over if they are already gone), then writes the checkpoint's
    /// chunks and the spooled entries. Does not complete <paramref name="destination"/>.
    /// </summary>
    public static async ValueTask<BackupResult> WriteFromFilesAsync(string folder, PipeWriter destination,
        long? fromSequence, long bytesPerSecond, TimeProvider clock, CancellationToken cancellationToken)
    {
        (string path, string journalFolder) = StoreFileInfoReader.StoreFolders(folder);
        long segmentSize = SegmentSizeOf(journalFolder);
        using var writer = new BackupWriter(destination, bytesPerSecond, cancellationToken);
        if (fromSequence is long first)
        {
            long previousTimestamp = JournalFollower.TryGetRecordTimestamp(journalFolder, first - 1, out long ticks)
                ? ticks
                : 0;
            using SpooledEntrySource increment = SpooledEntrySource.Spool(journalFolder, first, increment: true,
                cancellationToken);
            BackupFormat.Begin begin = IncrementBegin(first, increment.LastSequence, previousTimestamp, clock,
                segmentSize);
            return await writer.WriteAsync(begin, increment, null, [], clock).ConfigureAwait(false);
        }

        for (int attempt = 1; ; attempt++)
        {
            cancellationToken.ThrowIfCancellationRequested();
            using PinnedCheckpoint checkpoint = PinnedCheckpoint.Open(path);
            // Before the spool: if entry C is purged after this, so is C + 1, and the attempt starts over.
            long checkpointTimestamp = JournalFollower.TryGetRecordTimestamp(journalFolder, checkpoint.Sequence,
                out long ticks) ? ticks : 0;
            SpooledEntrySource entries;
            try
            {
                entries = SpooledEntrySource.Spool(journalFolder, checkpoint.Sequence + 1, increment: false,
                    cancellationToken);
            }
            catch (JournalPositionPurgedException) when (attempt < PinAttempts)
            {
                continue; // purged after a newer checkpoint: pin that one
            }

            using (entries)
            {
                PageCheckpoint current = checkpoint.Pages?.Current ?? PageCheckpoint.Empty;
                List<ChunkInfo> chunks = checkpoint.Pages?.ReadChunkTable(current) ?? [];
                BackupFormat.Begin begin = FullBegin(current, chunks, entries.LastSequence, checkpointTimestamp,
                    clock, segmentSize);
                BackupResult result = await writer.WriteAsync(begin, entries, checkpoint.Pages, chunks, clock)
                    .ConfigureAwait(false);
                return RestorableFrom(result, current);
            }
        }
    }

    /// <summary><paramref name="result"/> with the first sequence the backup restores to: a slice of a checkpoint
    /// written in slices holds some documents as of its pass's sequence (<see cref="PageCheckpoint.PassSequence"/>),
    /// so a restore to a point before it is refused, though the journal entries start after the checkpoint's own
    /// sequence.</summary>
    private static BackupResult RestorableFrom(BackupResult result, PageCheckpoint checkpoint) =>
        checkpoint.PassSequence > result.CheckpointSequence
            ? result with { CheckpointSequence = checkpoint.PassSequence }
            : result;

    /// <summary>The Begin frame of a full backup: <paramref name="checkpoint"/>'s header and
    /// <paramref name="chunks"/>, then the entries after it up to <paramref name="lastEntry"/>;
    /// <paramref name="checkpointTimestamp"/> is the time of the record of the checkpoint's last entry (0:
    /// unknown).</summary>
    private static BackupFormat.Begin FullBegin(PageCheckpoint checkpoint, List<ChunkInfo> chunks, long lastEntry,
        long checkpointTimestamp, TimeProvider clock, long segmentSize)
    {
        long chunkBytes = 0;
        foreach (ChunkInfo chunk in chunks)
        {
            chunkBytes += chunk.Length;
        }

        DataFileHeader header = checkpoint.Header.GetValueOrDefault();
        return new BackupFormat.Begin(BackupFormat.FullKind, DataFileHeader.FormatVersion, checkpoint.Generation,
            header.ChunkId, header.ChunkOffset, header.ChunkLength, checkpoint.Sequence, checkpoint.Sequence + 1,
            lastEntry, chunks.Count, chunkBytes, clock.GetUtcNow().UtcTicks, segmentSize, checkpointTimestamp);
    }

    /// <summary>The Begin frame of an incremental backup: no chunks, the entries
    /// <paramref name="firstEntry"/>..<paramref name="lastEntry"/>, following the entry whose record's time is
    /// <paramref name="previousTimestamp"/> (0: unknown).</summary>
    private static BackupFormat.Begin IncrementBegin(long firstEntry, long lastEntry, long previousTimestamp,
        TimeProvider clock, long segmentSize) =>
        new(BackupFormat.IncrementKind, DataFileHeader.FormatVersion, 0, 0, 0, 0, firstEntry - 1, firstEntry,
            lastEntry, 0, 0, clock.GetUtcNow().UtcTicks, segmentSize, previousTimestamp);

    /// <summary>The segment size of the journal in <paramref name="journalFolder"/>: the length of its segment files
    /// (each is made at its full size), or the default when it has none.</summary>
    private static long SegmentSizeOf(string journalFolder)
    {
        long size = 0;
        foreach ((_, long bytes) in JournalFormat.ListSegmentFiles(journalFolder))
        {
            size = Math.Max(size, bytes);
        }

        return size > 0 ? size : JournalOptions.DefaultSegmentSize;
    }

    public void Dispose()
    {
        _frame = default;
        if (_carry.Length > 0)
        {
            ArrayPool<byte>.Shared.Return(_carry);
            _carry = [];
        }
    }

    /// <summary>The stream <paramref name="begin"/> describes: its header, the Begin frame, the chunks, the entries
    /// from its first entry to its last, and the End frame.</summary>
    private async ValueTask<BackupResult> WriteAsync(BackupFormat.Begin begin, WriteAheadJournal journal,
        PageStore? pages, List<ChunkInfo> chunks, TimeProvider clock)
    {
        using JournalReader? reader = begin.LastEntry >= begin.FirstEntry ? journal.OpenReader(begin.FirstEntry) : null;
        return await WriteAsync(begin, reader is null ? null : new JournalEntrySource(reader), pages, chunks, clock)
            .ConfigureAwait(false);
    }

    /// <summary>The stream <paramref name="begin"/> describes, its entries from <paramref name="source"/> (null when
    /// it has none).</summary>
    private async ValueTask<BackupResult> WriteAsync(BackupFormat.Begin begin, IBackupEntrySource? source,
        PageStore? pages, List<ChunkInfo> chunks, TimeProvider clock)
    {
        BackupFormat.WriteStreamHeader(_destination.GetSpan(BackupFormat.StreamHeaderSize), clock.GetUtcNow().UtcTicks);
        await SendAsync(BackupFormat.StreamHeaderSize).ConfigureAwait(false);
        begin.Write(Payload);
        await EmitAsync(BackupFormat.FrameType.Begin, BackupFormat.BeginSize).ConfigureAwait(false);
        foreach (ChunkInfo chunk in chunks)
        {
            await CopyChunkAsync(pages!, chunk).ConfigureAwait(false);
        }

        long entries = 0;
        if (source is not null && begin.LastEntry >= begin.FirstEntry)
        {
            entries = await CopyEntriesAsync(source, begin.LastEntry).ConfigureAwait(false);
        }

        new BackupFormat.End(begin.LastEntry, entries, begin.ChunkBytes, _index).Write(Payload);
        await EmitAsync(BackupFormat.FrameType.End, BackupFormat.EndSize).ConfigureAwait(false);
        return new BackupResult(begin.LastEntry, begin.CheckpointSequence, chunks.Count, entries, _bytes);
    }

    /// <summary>Where the next frame's payload goes: the pipe's memory, taken at the first use after a send.</summary>
    private Span<byte> Payload
    {
        get
        {
            if (_frame.IsEmpty)
            {
                _frame = _destination.GetMemory(MaxFrame);
            }

            return _frame.Span.Slice(BackupFormat.FrameHeaderSize, BackupFormat.MaxPayload);
        }
    }

    /// <summary>Checks the chunk (its metadata and every page it lists, as a scrub does) and copies its bytes. A chunk
    /// that fails its checks fails the backup with <see cref="StoreCorruptedException"/> naming the file and offset:
    /// copied as it is, it would fail the restore instead, and its damage would be found only when the backup is
    /// needed.</summary>
    private async ValueTask CopyChunkAsync(PageStore pages, ChunkInfo chunk)
    {
        pages.VerifyChunk(chunk);
        BinaryPrimitives.WriteUInt32LittleEndian(Payload, chunk.Id);
        BinaryPrimitives.WriteUInt32LittleEndian(Payload[4..], 0);
        BinaryPrimitives.WriteInt64LittleEndian(Payload[8..], chunk.FileOffset);
        BinaryPrimitives.WriteInt64LittleEndian(Payload[16..], chunk.Length);
        await EmitAsync(BackupFormat.FrameType.Chunk, BackupFormat.ChunkSize).ConfigureAwait(false);
        for (long done = 0; done < chunk.Length;)
        {
            int part = (int)Math.Min(BackupFormat.DataPerFrame, chunk.Length - done);
            if (!pages.ReadBytes(Payload[..part], chunk.FileOffset + done))
            {
                ThrowHelper.ThrowStoreCorrupted(pages.Path, chunk.FileOffset + done,
                    $"chunk {chunk.Id} ({chunk.Length} bytes) runs past the end of the data file");
            }

            await EmitAsync(BackupFormat.FrameType.ChunkData, part).ConfigureAwait(false);
            done += part;
        }
    }

    /// <summary>Copies entries up to <paramref name="last"/>: consecutive entries of one record share an Entries
    /// frame; a large entry goes as LargeEntry and EntryData frames.</summary>
    private async ValueTask<long> CopyEntriesAsync(IBackupEntrySource reader, long last)
    {
        long entries = 0;
        while (true)
        {
            int payload = FillEntries(reader, last, out byte[]? large, out int largeLength, out long largeSequence,
                out long largeRecord, out long largeTimestamp, ref entries);
            if (payload > 0)
            {
                await EmitAsync(BackupFormat.FrameType.Entries, payload).ConfigureAwait(false);
            }

            if (large is not null)
            {
                try
                {
                    await CopyLargeEntryAsync(large, largeLength, largeSequence, largeRecord, largeTimestamp)
                        .ConfigureAwait(false);
                }
                finally
                {
                    ArrayPool<byte>.Shared.Return(large);
                }
            }
            else if (payload == 0 && _carryLength < 0)
            {
                return entries;
            }
        }
    }

    /// <summary>Fills the frame buffer with an Entries payload (synchronously: the reader's entries are spans into
    /// the journal, valid until its next read); returns its length, 0 for none. A large entry read meanwhile is
    /// copied out and returned, to be sent after this frame.</summary>
    private int FillEntries(IBackupEntrySource reader, long last, out byte[]? large, out int largeLength,
        out long largeSequence, out long largeRecord, out long largeTimestamp, ref long entries)
    {
        large = null;
        largeLength = 0;
        largeSequence = largeRecord = largeTimestamp = 0;
        Span<byte> payload = Payload;
        int used = BackupFormat.EntriesHeaderSize;
        int count = 0;
        long record = 0;
        long timestamp = 0;
        if (_carryLength >= 0)
        {
            StartEntries(payload, _carryRecord, _carryTimestamp, _carrySequence, out record, out timestamp);
            used = AddEntry(payload, used, _carry.AsSpan(0, _carryLength));
            count = 1;
            entries++;
            _carryLength = -1;
        }

        while (reader.NextSequence <= last)
        {
            long sequence = reader.NextSequence;
            if (!reader.TryRead(out ReadOnlySpan<byte> data, out long entryRecord, out long entryTimestamp))
            {
                ThrowHelper.ThrowInvalidOperation(
                    $"The journal's committed entry {sequence} could not be read for the backup.");
            }

            entries++;
            if (data.Length > BackupFormat.LargeEntryThreshold)
            {
                large = ArrayPool<byte>.Shared.Rent(data.Length);
                data.CopyTo(large);
                largeLength = data.Length;
                largeSequence = sequence;
                largeRecord = entryRecord;
                largeTimestamp = entryTimestamp;
                break;
            }

            if (count > 0 && (entryRecord != record
                || used + 4 + data.Length > BackupFormat.DataPerFrame))
            {
                if (_carry.Length < data.Length)
                {
                    if (_carry.Length > 0)
                    {
                        ArrayPool<byte>.Shared.Return(_carry);
                    }

                    _carry = ArrayPool<byte>.Shared.Rent(Math.Max(data.Length, 1024));
                }

                data.CopyTo(_carry);
                _carryLength = data.Length;
                _carrySequence = sequence;
                _carryRecord = entryRecord;
                _carryTimestamp = entryTimestamp;
                entries--; // counted when it is sent
                break;
            }

            if (count == 0)
            {
                StartEntries(payload, entryRecord, entryTimestamp, sequence, out record, out timestamp);
            }

            used = AddEntry(payload, used, data);
            count++;
        }

        if (count == 0)
        {
            return 0;
        }

        BinaryPrimitives.WriteInt32LittleEndian(payload[24..], count);
        return used;
    }

    private static void StartEntries(Span<byte> payload, long record, long timestamp, long first, out long recordOut,
        out long timestampOut)
    {
        BinaryPrimitives.WriteInt64LittleEndian(payload, record);
        BinaryPrimitives.WriteInt64LittleEndian(payload[8..], timestamp);
        BinaryPrimitives.WriteInt64LittleEndian(payload[16..], first);
        recordOut = record;
        timestampOut = timestamp;
    }

    private static int AddEntry(Span<byte> payload, int used, ReadOnlySpan<byte> data)
    {
        BinaryPrimitives.WriteInt32LittleEndian(payload[used..], data.Length);
        data.CopyTo(payload[(used + 4)..]);
        return used + 4 + data.Length;
    }

    private async ValueTask CopyLargeEntryAsync(byte[] data, int length, long sequence, long record, long timestamp)
    {
        BinaryPrimitives.WriteInt64LittleEndian(Payload, record);
        BinaryPrimitives.WriteInt64LittleEndian(Payload[8..], timestamp);
        BinaryPrimitives.WriteInt64LittleEndian(Payload[16..], sequence);
        BinaryPrimitives.WriteInt32LittleEndian(Payload[24..], length);
        await EmitAsync(BackupFormat.FrameType.LargeEntry, BackupFormat.LargeEntrySize).ConfigureAwait(false);
        for (int done = 0; done < length;)
        {
            int part = Math.Min(BackupFormat.DataPerFrame, length - done);
            data.AsSpan(done, part).CopyTo(Payload);
            await EmitAsync(BackupFormat.FrameType.EntryData, part).ConfigureAwait(false);
            done += part;
        }
    }

    /// <summary>Frames the payload built in the pipe's memory and sends it.</summary>
    private ValueTask EmitAsync(BackupFormat.FrameType type, int payloadLength)
    {
        _ = Payload; // a frame without a payload (none so far) still needs the memory for its header
        return SendAsync(BackupFormat.Seal(_frame.Span, type, _index++, payloadLength));
    }

    /// <summary>Commits the <paramref name="length"/> bytes built in the pipe's memory and flushes: the flush waits
    /// while the pipe holds more than its pause threshold (the destination's backpressure).</summary>
    private async ValueTask SendAsync(int length)
    {
        _cancellationToken.ThrowIfCancellationRequested();
        _destination.Advance(length);
        _frame = default;
        _bytes += length;
        FlushResult result = await _destination.FlushAsync(_cancellationToken).ConfigureAwait(false);
        if (result.IsCanceled)
        {
            throw new OperationCanceledException("The backup's destination canceled the flush.");
        }

        if (result.IsCompleted)
        {
            throw new IOException("The backup's destination stopped reading before the backup was complete.");
        }

        if (_bytesPerSecond > 0)
        {
            // Not before the time the bytes sent so far take at the pace; time a slow destination took counts.
            double ahead = ((double)_bytes / _bytesPerSecond) - Stopwatch.GetElapsedTime(_started).TotalSeconds;
            if (ahead > 0.001)
            {
                await Task.Delay(TimeSpan.FromSeconds(ahead), _cancellationToken).ConfigureAwait(false);
            }
        }
    }
}
