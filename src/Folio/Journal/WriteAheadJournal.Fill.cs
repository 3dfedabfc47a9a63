using System.Buffers;
using System.Runtime.CompilerServices;
using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// Zero-fill of the active segment ahead of the writer.
/// <para>
/// Protocol. A segment file is created at full length as a hole and only its first piece is zero-filled and synced
/// (<see cref="FirstFill"/>). Every fill runs under <see cref="_fillLock"/>: it writes zeros at and past the
/// segment's <see cref="JournalSegment.FilledLength"/>, fdatasyncs, and only then raises
/// <see cref="JournalSegment.FilledLength"/> (release). The writer (under <see cref="_writeLock"/>) writes a record
/// only where it ends at or below <see cref="JournalSegment.FilledLength"/> (acquire), filling first itself when it
/// would not (<see cref="FillForAppend"/>, which waits for a background fill in progress); so a fill never writes
/// over a record. After an append that leaves less than half a piece filled ahead, the writer starts one background
/// fill (<see cref="StartFillAhead"/>) unless one is running. A rotation and the journal's disposal call
/// <see cref="StopFilling"/> under the fill lock before they sync, seal or close the segment: a fill in progress
/// ends first, and none starts after. Lock order: write, then fill; the background fill takes only the fill lock.
/// </para>
/// <para>
/// Pieces grow with what the segment has taken (the filled length, between <see cref="DefaultMinFillPiece"/> and
/// <see cref="DefaultMaxFillPiece"/> unless tests set others), so an idle store's journal holds about a megabyte
/// per segment on disk, and a busy one fills in a few large writes per segment. A full disk is met by the writer's
/// own fill: the commit fails alone with <see cref="StoreFullException"/>, nothing was written, and a later commit
/// fills again; the store reports the disk full (<see cref="_fillDiskFull"/>, under the fill lock) until a fill,
/// the writer's or the background one, succeeds. A background fill that fails leaves the work to the writer, which
/// reports what the disk says.
/// </para>
/// </summary>
public sealed partial class WriteAheadJournal
{
    /// <summary>The first piece of a new segment that is zero-filled, and the smallest piece after it: 1 MiB.</summary>
    internal const long DefaultMinFillPiece = 1L << 20;

    /// <summary>The largest piece a fill writes at once, unless one record needs more: 8 MiB.</summary>
    internal const long DefaultMaxFillPiece = 8L << 20;

    /// <summary>How much of a new segment of <paramref name="capacity"/> bytes is zero-filled when it is
    /// created.</summary>
    private long FirstFill(long capacity) => Math.Min(capacity, _minFillPiece);

    /// <summary>The writer, after an append: whether less than half a piece is filled ahead of it.</summary>
    private bool NeedsFillAhead(JournalSegment segment)
    {
        long filled = segment.FilledLength;
        return filled < segment.Capacity && filled - segment.WrittenLength < Piece(filled) / 2;
    }

    /// <summary>The next piece to fill after <paramref name="filled"/> bytes: as much as is filled already, within
    /// the smallest and largest piece.</summary>
    private long Piece(long filled) => Math.Clamp(filled, _minFillPiece, _maxFillPiece);

    /// <summary>
    /// The writer (under the write lock), when a record of the active segment would end past its filled length:
    /// fills up to at least <paramref name="needed"/> now. A full disk fails this append alone.
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private void FillForAppend(JournalSegment segment, long needed)
    {
        lock (_fillLock)
        {
            long filled = segment.FilledLength;
            if (filled >= needed)
            {
                return; // a background fill got there first
            }

            try
            {
                Fill(segment, Math.Min(segment.Capacity, Math.Max(needed, filled + Piece(filled))));
            }
            catch (IOException e) when (DiskFullError.Matches(e))
            {
                Volatile.Write(ref _fillDiskFull, e);
                throw StoreFull(e,
                    $"zero-fill the space for this commit in segment '{Path.GetFileName(segment.Path)}'");
            }
        }
    }

    /// <summary>The writer (under the write lock): starts a background fill of <paramref name="segment"/> unless
    /// one is running.</summary>
    private void StartFillAhead(JournalSegment segment)
    {
        if (_backgroundFill is { IsCompleted: false })
        {
            return;
        }

        // A thread of its own, like the segment's preparation: queued behind busy committers on the pool, it would
        // come too late to spare the writer a fill of its own. The record is written by now, so a thread that cannot
        // be started (a process out of threads or descriptors) leaves the fill to the writer instead of failing it.
        try
        {
            _backgroundFill = Task.Factory.StartNew(() => FillAhead(segment), CancellationToken.None,
                TaskCreationOptions.LongRunning, TaskScheduler.Default);
        }
        catch (TaskSchedulerException e)
        {
            JournalLog.FillAheadFailed(_logger, segment.Path, e);
        }
    }

    /// <summary>The background fill: one piece past the filled length, unless the segment was sealed or the journal
    /// closed meanwhile. Failures are left to the writer's own fill, which reports them.</summary>
    private void FillAhead(JournalSegment segment)
    {
        try
        {
            lock (_fillLock)
            {
                if (segment.FillStopped)
                {
                    return;
                }

                long filled = segment.FilledLength;
                Fill(segment, Math.Min(segment.Capacity, filled + Piece(filled)));
            }
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException or ObjectDisposedException)
        {
            JournalLog.FillAheadFailed(_logger, segment.Path, e);
        }
    }

    /// <summary>
    /// Under the fill lock: writes zeros from the segment's filled length to <paramref name="target"/>, fdatasyncs,
    /// then publishes the new filled length.
    /// </summary>
    private void Fill(JournalSegment segment, long target)
    {
        long from = segment.FilledLength;
        if (target <= from)
        {
            return;
        }

        WriteZeros(segment.File, from, target);
        segment.File.Sync();
        segment.FilledLength = target;
        Volatile.Write(ref _fillDiskFull, null); // the disk had room for it
    }

    /// <summary>Under the write lock (rotation, disposal): ends the fills of <paramref name="segment"/>, waiting for
    /// one in progress.</summary>
    private void StopFilling(JournalSegment segment)
    {
        lock (_fillLock)
        {
            segment.StopFilling();
        }
    }

    /// <summary>
    /// Recovery, for the recovered newest segment: zero-fills the first piece past its last record (bytes a torn tail
    /// or an older build left there are dropped already), made durable by the sync recovery runs next, after which
    /// the caller publishes the returned filled length. A full disk leaves it to the first append.
    /// </summary>
    private long FillAfterRecovery(JournalSegment segment)
    {
        if (segment.FilledLength > segment.WrittenLength)
        {
            return segment.FilledLength; // created by this open
        }

        long from = segment.WrittenLength;
        long to = Math.Min(segment.Capacity, from + _minFillPiece);
        try
        {
            WriteZeros(segment.File, from, to);
            return to;
        }
        catch (IOException e) when (DiskFullError.Matches(e))
        {
            return segment.WrittenLength;
        }
    }

    /// <summary>Writes zeros to [<paramref name="from"/>, <paramref name="to"/>) of <paramref name="file"/>.</summary>
    private static void WriteZeros(IStorageFile file, long from, long to)
    {
        if (to <= from)
        {
            return;
        }

        byte[] zeros = ArrayPool<byte>.Shared.Rent((int)Math.Min(to - from, 1 << 20));
        try
        {
            Array.Clear(zeros);
            for (long offset = from; offset < to; offset += zeros.Length)
            {
                file.Write(zeros.AsSpan(0, (int)Math.Min(zeros.Length, to - offset)), offset);
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(zeros);
        }
    }
}
