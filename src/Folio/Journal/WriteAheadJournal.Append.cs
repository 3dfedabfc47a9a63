using System.Buffers;
using System.Buffers.Binary;
using Folio.Storage;

namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    private const string PreparedSegmentFileName = "next-segment.tmp";

    /// <summary>
    /// Appends <paramref name="entries"/> as one record and returns the sequence number of the first; entry i gets
    /// that number plus i. The record is written to the file but is not durable, nor visible to readers, until
    /// <see cref="Sync"/> returns.
    /// </summary>
    /// <param name="entries">One or more entries, each of any length (including 0); the record must fit in a segment
    /// (<see cref="MaxRecordSize"/>, counting a 40-byte record header and 4 bytes per entry).</param>
    /// <returns>The sequence number of the first entry.</returns>
    /// <exception cref="ArgumentException">No entries, or the record does not fit in a segment. The journal stays
    /// usable.</exception>
    /// <exception cref="StoreFaultedException">An earlier write or sync failed; reopen to recover.</exception>
    public long Append(params ReadOnlySpan<ReadOnlyMemory<byte>> entries) => Append(entries, out _);

    /// <summary>Appends entries as one record; also returns the record's timestamp (UTC ticks).</summary>
    internal long Append(ReadOnlySpan<ReadOnlyMemory<byte>> entries, out long timestampTicks)
        => Append(entries, out timestampTicks, out _);

    /// <summary>Appends entries as one record; also returns the record's timestamp (UTC ticks) and its end.</summary>
    internal long Append(ReadOnlySpan<ReadOnlyMemory<byte>> entries, out long timestampTicks, out JournalPosition end)
    {
        if (entries.IsEmpty)
        {
            ThrowHelper.ThrowArgument(nameof(entries), "A journal record holds at least one entry.");
        }

        long payload = 0;
        foreach (ReadOnlyMemory<byte> entry in entries)
        {
            payload += entry.Length;
        }

        long size = JournalFormat.RecordSize(entries.Length, payload);
        if (size > MaxRecordSize)
        {
            ThrowRecordTooLarge(size);
        }

        byte[] buffer = ArrayPool<byte>.Shared.Rent((int)size);
        try
        {
            Span<byte> record = buffer.AsSpan(0, (int)size);
            int offset = JournalFormat.RecordHeaderSize;
            foreach (ReadOnlyMemory<byte> entry in entries)
            {
                BinaryPrimitives.WriteUInt32LittleEndian(record[offset..], (uint)entry.Length);
                entry.Span.CopyTo(record[(offset + JournalFormat.EntryHeaderSize)..]);
                offset += JournalFormat.EntryHeaderSize + entry.Length;
            }

            return AppendRecord(record, entries.Length, out timestampTicks, out end);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    /// <summary>Appends one entry as its own record; see
    /// <see cref="Append(ReadOnlySpan{ReadOnlyMemory{byte}})"/>.</summary>
    /// <param name="entry">The entry bytes.</param>
    /// <returns>The entry's sequence number.</returns>
    public long Append(ReadOnlySpan<byte> entry)
    {
        long size = JournalFormat.RecordSize(1, entry.Length);
        if (size > MaxRecordSize)
        {
            ThrowRecordTooLarge(size);
        }

        byte[] buffer = ArrayPool<byte>.Shared.Rent((int)size);
        try
        {
            Span<byte> record = buffer.AsSpan(0, (int)size);
            BinaryPrimitives.WriteUInt32LittleEndian(record[JournalFormat.RecordHeaderSize..], (uint)entry.Length);
            entry.CopyTo(record[(JournalFormat.RecordHeaderSize + JournalFormat.EntryHeaderSize)..]);
            return AppendRecord(record, 1, out _, out _);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private long AppendRecord(Span<byte> record, int entryCount, out long timestampTicks, out JournalPosition end)
    {
        lock (_writeLock)
        {
            ThrowIfDisposed();
            ThrowIfFaulted();
            try
            {
                if (_rotationMarkPending)
                {
                    WriteRotationMark(); // a full disk kept the last rotation from naming its segment
                }

                if (_active.WrittenLength + record.Length > _active.Capacity)
                {
                    Rotate();
                }

                JournalSegment segment = _active;
                if (segment.WrittenLength + record.Length > segment.FilledLength)
                {
                    FillForAppend(segment, segment.WrittenLength + record.Length);
                }

                long first = _nextSequence;
                long timestamp = Math.Max(_timeProvider.GetUtcNow().UtcTicks, _lastTimestamp);
                timestampTicks = timestamp;

                // The record names how much of its segment is durable: after a power loss, damage below that is never
                // mistaken for a torn tail. Bytes after it may be torn while this record survives (an overlapped sync,
                // or buffered commits); recovery then drops them with it, none having been acknowledged as durable.
                JournalFormat.WriteRecordHeader(record, entryCount, first, timestamp, segment.SyncedLength);
                segment.File.Write(record, segment.WrittenLength);
                if (segment.WrittenLength == JournalFormat.SegmentHeaderSize)
                {
                    segment.FirstTimestamp = timestamp;
                }

                segment.WrittenLength += record.Length;
                segment.LastSequence = first + entryCount - 1;
                segment.LastTimestamp = timestamp;
                _lastTimestamp = timestamp;
                _nextSequence = first + entryCount;
                Volatile.Write(ref _appendedRecords, _appendedRecords + 1);
                Volatile.Write(ref _appendedBytes, _appendedBytes + record.Length);
                end = new JournalPosition(segment, segment.WrittenLength, segment.LastSequence);
                if (NeedsFillAhead(segment))
                {
                    StartFillAhead(segment);
                }

                return first;
            }
            catch (Exception e) when (e is not FolioException) // faulted, or failed alone (a full disk, say)
            {
                Fault(e);
                throw new StoreFaultedException(
                    $"Appending to journal '{Directory}' failed; the journal accepts no more writes until it is " +
                    $"reopened.", e);
            }
        }
    }

    /// <summary>
    /// Seals the active segment (fdatasync, so a torn tail can only ever be in the newest segment) and starts the
    /// next one from the file prepared in the background. Runs under the write lock. Everything that can fail for
    /// want of a resource comes before the seal: the prepared file is taken (no room on the disk, no descriptor or
    /// thread to prepare it), the active segment synced, and the new segment's file named and opened
    /// (<see cref="CreateSegmentForRotation"/>); when one of these cannot be done, nothing the journal goes on from
    /// has changed, so the append fails alone (<see cref="StoreUnavailableException"/>) and the journal stays
    /// usable. A failed sync of the active segment is a fault, as any failed sync.
    /// </summary>
    private void Rotate()
    {
        EnsureFolderIsOurs("start a new segment");
        string prepared = TakePreparedSegment();
        JournalSegment old = _active;
        System.Diagnostics.Debug.Assert(old.LastSequence >= old.FirstSequence,
            "an empty active segment has the configured size, so every record that passed the size check fits it");
        // The active segment is synced before the new one's file takes its name, so a crash at any point after
        // finds every record before the new segment's first sequence durable: no gap between the two.
        SyncSegmentLocked(old);
        JournalSegment next = CreateSegmentForRotation(_nextSequence, prepared);
        StopFilling(old);
        old.Seal();
        // durable now, but published only by the owner of publication (see the protocol)
        AdvanceDurable(_nextSequence - 1);

        lock (_segmentsLock)
        {
            JournalSegment[] current = _segmentSet.Segments;
            var segments = new JournalSegment[current.Length + 1];
            current.CopyTo(segments, 0);
            segments[^1] = next;
            _active = next;
            PublishSegments(segments);
        }

        JournalLog.Rotated(_logger, next.Path, next.FirstSequence);

        // Name the new segment durably: if its file is lost, recovery knows the journal reached it.
        _rotationMarkPending = true;
        WriteRotationMark();

        // Close the sealed file now unless a sync is in flight (it may be syncing it); the last one to end closes it.
        _sealedWithOpenFiles.Add(old);
        if (_syncsInFlight == 0)
        {
            CloseSealedFilesLocked();
        }
    }

    /// <summary>
    /// The zero-filled file for the next segment (the write lock's owner, at a rotation): the one prepared in the
    /// background, else one prepared now, on this thread. A failure to prepare it is not a fault, since the active
    /// segment is untouched: the preparation's partial file is gone (a full disk gets its space back), and the
    /// append fails alone, with <see cref="StoreFullException"/> for a full disk and
    /// <see cref="StoreUnavailableException"/> for any other cause (too many open files, a folder made read-only, no
    /// thread to be had). A background preparation that failed is tried once more here, as the cause may be gone;
    /// after a failed try, rotations within <see cref="PreparationRetryInterval"/> fail at once instead of
    /// zero-filling whatever space is left again for every commit.
    /// </summary>
    private string TakePreparedSegment()
    {
        Task<string>? prepared = _preparedSegment;
        _preparedSegment = null;
        if (prepared is not null)
        {
            try
            {
                return prepared.GetAwaiter().GetResult();
            }
            catch (Exception e) when (IsPreparationFailure(e))
            {
                // Prepared a while ago: the cause may be gone now, so try again below.
            }
        }
        else if (_preparationFailure is { } failure
            && _timeProvider.GetElapsedTime(_preparationFailedAt) < PreparationRetryInterval)
        {
            throw PreparationFailed(failure);
        }

        try
        {
            string path = NewSegmentPreparer().Run();
            if (_preparationFailure is not null)
            {
                Volatile.Write(ref _preparationFailure, null);
                JournalLog.SpaceAvailableAgain(_logger, Directory);
            }

            return path;
        }
        catch (Exception e) when (IsPreparationFailure(e))
        {
            throw RecordPreparationFailure(e);
        }
    }

    private static bool IsPreparationFailure(Exception e) =>
        e is IOException or UnauthorizedAccessException or TaskSchedulerException;

    /// <summary>Under the write lock: a rotation could not make its next segment. Logs the first failure of a run,
    /// keeps it for the retry interval and the diagnostics, and returns what the append throws.</summary>
    private StoreUnavailableException RecordPreparationFailure(Exception e)
    {
        if (_preparationFailure is null)
        {
            if (DiskFullError.Matches(e))
            {
                JournalLog.NoSpaceForSegment(_logger, Directory, _segmentSize, e);
            }
            else
            {
                JournalLog.SegmentNotCreated(_logger, Directory, e);
            }
        }

        Volatile.Write(ref _preparationFailure, e);
        _preparationFailedAt = _timeProvider.GetTimestamp();
        return PreparationFailed(e);
    }

    private StoreUnavailableException PreparationFailed(Exception cause)
    {
        if (DiskFullError.Matches(cause))
        {
            return NewStoreFull((IOException)cause);
        }

        return new StoreUnavailableException(
            $"Journal '{Directory}' could not create its next segment file ({cause.Message}), " +
            "so this commit was not written. The store stays open and readable; commits succeed again once the " +
            "cause is gone.", cause);
    }

    /// <summary>
    /// Writes the mark that names the segment a rotation just started, before any record goes into it (the write
    /// lock's owner). A full disk is not a fault here either: the append fails alone with
    /// <see cref="StoreFullException"/>, and the next append writes the mark first, so no record lands in a segment
    /// the mark does not name.
    /// </summary>
    private void WriteRotationMark()
    {
        try
        {
            WriteMark(CaptureMarkLocked());
        }
        catch (IOException e) when (DiskFullError.Matches(e))
        {
            throw NewStoreFull(e, "write the mark naming its new segment");
        }

        _rotationMarkPending = false;
        Volatile.Write(ref _diskFull, null); // the rotation is complete: the disk had room for all of it
        lock (_fillLock)
        {
            Volatile.Write(ref _fillDiskFull, null); // and for the new segment's first piece
        }
    }

    private StoreFullException NewStoreFull(IOException cause, string? what = null)
    {
        Volatile.Write(ref _diskFull, cause);
        return StoreFull(cause, what);
    }

    private StoreFullException StoreFull(IOException cause, string? what = null)
    {
        return new($"The disk is full: journal '{Directory}' could not " +
            (what ?? $"create its next segment file ({_segmentSize} bytes)") + ", so this commit was not written. " +
            "The store stays open and readable; commits succeed again once space is freed.", cause);
    }

    /// <summary>The next segment's file for an open (no rotation to fail alone: any failure fails the open).</summary>
    private string WaitForPreparedSegment()
    {
        Task<string>? prepared = _preparedSegment;
        _preparedSegment = null;
        return prepared is null ? NewSegmentPreparer().Run() : prepared.GetAwaiter().GetResult();
    }

    /// <summary>
    /// A rotation's <see cref="CreateSegment(long, string, bool)"/>, before the active segment is sealed. Its
    /// failures (opening the prepared file, writing and syncing its header, the rename, the folder's fsync, the reopen
    /// by the new name; a process out of descriptors fails the opens and the fsync) change nothing the journal goes on
    /// from: the file, once renamed, is renamed back to the prepared file's name and the folder synced, the active
    /// segment stays active, and the append fails alone with <see cref="StoreUnavailableException"/>. Only a failure
    /// to rename it back durably would leave a segment file the journal does not write to beside records appended
    /// after it: that faults the journal.
    /// </summary>
    private JournalSegment CreateSegmentForRotation(long firstSequence, string temporaryPath)
    {
        bool renamed = false;
        try
        {
            return CreateSegment(firstSequence, temporaryPath, replace: false, ref renamed);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            if (renamed)
            {
                // Back, durably (the rename itself may not be): a failure here faults the append.
                string path = Path.Combine(Directory, JournalFormat.SegmentFileName(firstSequence));
                _fileSystem.MoveFile(path, temporaryPath, overwrite: true);
                _fileSystem.SyncDirectory(Directory);
            }

            throw RecordPreparationFailure(e);
        }
    }

    /// <summary>
    /// Turns the prepared zero-filled file <paramref name="temporaryPath"/> into segment
    /// <paramref name="firstSequence"/>: header, fdatasync, rename (over an empty segment of another size when
    /// <paramref name="replace"/>), fsync of the folder. Then starts preparing the following one.
    /// </summary>
    private JournalSegment CreateSegment(long firstSequence, string temporaryPath, bool replace = false)
    {
        bool renamed = false;
        return CreateSegment(firstSequence, temporaryPath, replace, ref renamed);
    }

    /// <summary>The same, setting <paramref name="renamed"/> once the file has its segment's name (a caller that
    /// catches a later step's failure knows to rename it back).</summary>
    private JournalSegment CreateSegment(long firstSequence, string temporaryPath, bool replace, ref bool renamed)
    {
        string path = Path.Combine(Directory, JournalFormat.SegmentFileName(firstSequence));
        var file = _fileSystem.OpenFile(temporaryPath, FileMode.Open);
        JournalSegment segment;
        try
        {
            Span<byte> header = stackalloc byte[JournalFormat.SegmentHeaderSize];
            JournalFormat.WriteSegmentHeader(header, firstSequence, _timeProvider.GetUtcNow().UtcTicks, _segmentSize,
                _storeId);
            file.Write(header, 0);
            file.Sync();
            file.Dispose();
            _fileSystem.MoveFile(temporaryPath, path, overwrite: replace);
            renamed = true;
            _fileSystem.SyncDirectory(Directory);
            file = _fileSystem.OpenFile(path, FileMode.Open);
            segment = new JournalSegment(file, firstSequence, _segmentSize, JournalFormat.SegmentHeaderSize,
                DeleteSegmentFile, OpenSyncHandle)
            {
                LastSequence = firstSequence - 1,
                FilledLength = FirstFill(_segmentSize),
            };
        }
        catch
        {
            file.Dispose();
            throw;
        }

        _preparedSegment = StartPreparingSegment();
        return segment;
    }

    /// <summary>Creates the next segment's file at full length (a hole), zero-fills and syncs its first piece, off the
    /// commit path, on a thread of its own: the committer
    /// waits for it at the next rotation, and committers run on the thread pool, so a preparation queued to the pool
    /// behind busy writers would hold the committer, and every pool work item behind it, until the pool added a
    /// thread.</summary>
    /// <remarks>Null when no thread could be started (a process out of threads or descriptors): the next rotation
    /// then prepares the file itself.</remarks>
    private Task<string>? StartPreparingSegment()
    {
        SegmentPreparer preparer = NewSegmentPreparer();
        try
        {
            return Task.Factory.StartNew(preparer.Run, CancellationToken.None, TaskCreationOptions.LongRunning,
                TaskScheduler.Default);
        }
        catch (TaskSchedulerException)
        {
            return null;
        }
    }

    private SegmentPreparer NewSegmentPreparer() =>
        new(_fileSystem, Path.Combine(Directory, PreparedSegmentFileName), _segmentSize, FirstFill(_segmentSize));

    private readonly struct SegmentPreparer(Storage.IFileSystem fileSystem, string path, long size, long firstFill)
    {
        /// <summary>Creates the file at its full length and zero-fills its first piece (firstFill bytes); on
        /// failure deletes what it wrote, so a full disk gets its space back, and throws.</summary>
        public string Run()
        {
            fileSystem.DeleteFile(path);
            try
            {
                using Storage.IStorageFile file = fileSystem.OpenFile(path, FileMode.CreateNew);
                file.SetLength(size);
                WriteZeros(file, 0, firstFill);
                file.Sync();
            }
            catch
            {
                TryDelete();
                throw;
            }

            return path;
        }

        private void TryDelete()
        {
            try
            {
                fileSystem.DeleteFile(path);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // Left for the next preparation, which deletes it first, or for recovery.
            }
        }
    }

    private void Fault(Exception e)
    {
        lock (_writeLock)
        {
            if (_fault is null)
            {
                _fault = e;
                JournalLog.Faulted(_logger, Directory, e);
            }
        }
    }

    private void ThrowIfFaulted()
    {
        if (_fault is not null)
        {
            throw new StoreFaultedException(
                $"Journal '{Directory}' is faulted after an earlier I/O failure; reopen it to recover.", _fault);
        }
    }

    private void ThrowRecordTooLarge(long size) =>
        ThrowHelper.ThrowArgument("entries",
            $"A journal record of {size} bytes does not fit in a segment: the largest is {MaxRecordSize} bytes " +
            $"(JournalOptions.SegmentSize less the 64-byte segment header).");
}
