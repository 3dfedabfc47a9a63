namespace Folio.Journal;

public sealed partial class WriteAheadJournal
{
    /// <summary>
    /// Makes every appended record durable (one fdatasync of the active segment), then publishes it to readers and
    /// wakes tailing readers. Returns at once when nothing new was appended. Appends may run while a sync is in
    /// flight; they are covered by the next sync.
    /// </summary>
    /// <returns>The committed sequence number after the sync.</returns>
    /// <exception cref="StoreFaultedException">The sync (or an earlier write) failed: nothing past the previous
    /// committed sequence is durable, and the journal accepts no more writes until it is reopened.</exception>
    public long Sync()
    {
        lock (_syncLock)
        {
            if (TryBeginSync(out JournalSyncPoint point))
            {
                CompleteSync(point);
            }

            if (point.Segment is not null)
            {
                Publish(point.Position); // durable already when nothing new was appended since the last sync
            }

            return point.Sequence;
        }
    }

    /// <summary>
    /// Starts a sync of everything appended so far: captures the active segment, its written length and the last
    /// sequence under the write lock, takes a reference on the segment (it can be rotated and purged while the sync
    /// runs) and a sync slot of it. Returns false, with the position set but no reference or slot held, when that
    /// sequence is durable already (<see cref="DurableSequence"/>). Several syncs may be in flight at once (the
    /// transaction merger overlaps them); each runs on its own file handle (see
    /// <see cref="JournalSegment.RentSyncSlot"/>).
    /// </summary>
    /// <exception cref="StoreFaultedException">An earlier write or sync failed.</exception>
    internal bool TryBeginSync(out JournalSyncPoint point)
    {
        lock (_writeLock)
        {
            ThrowIfDisposed();
            ThrowIfFaulted();
            JournalSegment segment = _active;
            long sequence = _nextSequence - 1;
            if (sequence <= Volatile.Read(ref _durableSequence))
            {
                point = new JournalSyncPoint(segment, segment.WrittenLength, sequence, 0, 0);
                return false;
            }

            bool acquired = segment.TryAcquire(out int stripe);
            System.Diagnostics.Debug.Assert(acquired, "the active segment is always referenced by the segment list");
            int slot;
            try
            {
                slot = segment.RentSyncSlot();
            }
            catch (Exception e)
            {
                segment.Release(stripe);
                Fault(e);
                throw new StoreFaultedException(
                    $"Opening a sync handle of journal segment '{segment.Path}' failed; appended records after " +
                    $"sequence {CommittedSequence} are not durable.", e);
            }

            _syncsInFlight++;
            point = new JournalSyncPoint(segment, segment.WrittenLength, sequence, stripe, slot);
            return true;
        }
    }

    /// <summary>
    /// Runs the fdatasync of a sync started by <see cref="TryBeginSync"/>, outside every lock, and ends it (the slot
    /// and the segment reference are given back on every path). It does not publish: the caller does, with
    /// <see cref="PublishSync"/>, once every sync it started earlier succeeded too.
    /// </summary>
    /// <exception cref="StoreFaultedException">The fdatasync failed; the journal is faulted.</exception>
    internal void CompleteSync(in JournalSyncPoint point)
    {
        JournalSegment segment = point.Segment;
        bool synced = false;
        try
        {
            segment.SyncFile(point.Slot).Sync();
            synced = true;
        }
        catch (Exception e)
        {
            Fault(e);
            throw new StoreFaultedException(
                $"Syncing journal segment '{segment.Path}' failed; appended records after sequence " +
                $"{CommittedSequence} are not durable.", e);
        }
        finally
        {
            lock (_writeLock)
            {
                segment.ReturnSyncSlot(point.Slot);
                if (synced)
                {
                    segment.MarkSynced(point.Length);
                    AdvanceDurable(point.Sequence);
                }

                if (--_syncsInFlight == 0)
                {
                    CloseSealedFilesLocked();
                }
            }

            segment.Release(point.Stripe);
        }
    }

    /// <summary>Publishes a completed sync to readers (see <see cref="Publish"/>).</summary>
    internal void PublishSync(in JournalSyncPoint point) => Publish(point.Position);

    /// <summary>Fdatasyncs <paramref name="segment"/> on a slot of its own (rotation seals with it). Under the write
    /// lock.</summary>
    private static void SyncSegmentLocked(JournalSegment segment)
    {
        int slot = segment.RentSyncSlot();
        try
        {
            segment.SyncFile(slot).Sync();
            segment.MarkSynced(segment.WrittenLength);
        }
        finally
        {
            segment.ReturnSyncSlot(slot);
        }
    }

    /// <summary>
    /// Closes the files of segments sealed since the last call. Runs under the write lock when no sync is in flight,
    /// so none can be using them (a sync that captured a segment before it was sealed ends first); rotation already
    /// synced them.
    /// </summary>
    private void CloseSealedFilesLocked()
    {
        foreach (JournalSegment segment in _sealedWithOpenFiles)
        {
            segment.CloseFile();
        }

        _sealedWithOpenFiles.Clear();
    }
}
