using Folio.Documents;
using Folio.Journal;
using Folio.Pages;

namespace Folio.Backups;

/// <summary>
/// The scrub of a store's files without opening the store (<see cref="DocumentStore.VerifyFilesAsync"/>): no lock is
/// taken and nothing is written, so it checks a store another process has open and keeps writing.
/// <para>
/// What it checks: every chunk the data file's newest checkpoint lists (each page's checksum and structure, read from
/// disk: <see cref="PageStore.VerifyChunk"/>, one worker per core: <see cref="ChunkScrub"/>), then every complete
/// record of every journal segment, oldest first (<see cref="JournalFollower"/>: shape, checksum, sequence
/// continuity). A damaged chunk or segment is reported by
/// file and offset and the scrub goes on: with the next chunk, or the next segment.
/// </para>
/// <para>
/// Racing the writer. While the scrub reads, the writer may make newer checkpoints, free the chunks the mounted one
/// listed and reuse their space, and purge journal segments a checkpoint covers. A chunk that fails its checks is
/// therefore reported only when the data file's newest checkpoint still lists it at the same place; otherwise it left
/// the store meanwhile and is skipped. Segments purged before the scrub reached them are skipped the same way (the
/// follower says so: <see cref="JournalPositionPurgedException"/>).
/// </para>
/// </summary>
internal static class StoreFileVerifier
{
    /// <summary>Mounts tried before a data file whose checkpoint cannot be read is reported.</summary>
    private const int MountAttempts = 16;

    /// <summary>Entries read from the journal per step (progress is reported after each).</summary>
    private const int EntriesPerStep = 4096;

    public static VerifyResult Verify(string folder, IProgress<VerifyProgress>? progress,
        CancellationToken cancellationToken)
    {
        (string path, string journal) = StoreFileInfoReader.StoreFolders(folder);
        var problems = new List<string>();
        (PageStore? mounted, List<ChunkInfo> chunks) = Mount(path, problems);
        using PageStore? pages = mounted;

        List<(long First, long Bytes)> segmentFiles = JournalFormat.ListSegmentFiles(journal);
        long[] segments = new long[segmentFiles.Count];
        long total = 0;
        for (int i = 0; i < segmentFiles.Count; i++)
        {
            segments[i] = segmentFiles[i].First;
            total += segmentFiles[i].Bytes;
        }

        foreach (ChunkInfo chunk in chunks)
        {
            total += chunk.Length;
        }

        CheckStoreIds(journal, pages, problems);
        (long pagesChecked, long done) = pages is null ? (0, 0) : ChunkScrub.Run(pages, chunks, problems,
            chunk => StillListed(path, chunk), bytes => progress?.Report(new VerifyProgress(bytes, total)),
            cancellationToken);

        (int segmentsRead, long records) = VerifyJournal(journal, segments, problems, ref done, total, progress,
            cancellationToken);
        progress?.Report(new VerifyProgress(done, done)); // the segments' committed bytes are known only now
        return new VerifyResult(chunks.Count, pagesChecked, segmentsRead, records, done, problems);
    }

    /// <summary>Mounts the data file's newest checkpoint (null when there is no data file) and reads the chunks it
    /// lists. The writer may reuse a chunk of the header's checkpoint while it is mounted or its table read, so a
    /// failure of either starts over from the header; after <see cref="MountAttempts"/> the last failure is added to
    /// <paramref name="problems"/> and nothing is mounted.</summary>
    private static (PageStore? Pages, List<ChunkInfo> Chunks) Mount(string path, List<string> problems)
    {
        for (int attempt = 1; ; attempt++)
        {
            PageStore? pages = null;
            try
            {
                pages = StoreFileInfoReader.OpenDataFile(path);
                return (pages, pages?.ReadChunkTable(pages.Current) ?? []);
            }
            catch (StoreCorruptedException e)
            {
                pages?.Dispose();
                if (attempt == MountAttempts)
                {
                    problems.Add(e.Message);
                    return (null, []);
                }
            }
        }
    }

    /// <summary>Adds a problem for each journal segment whose header names another store than the data file's
    /// checkpoint, or than the oldest segment that names one (files of two stores mixed in one folder). Segments and
    /// checkpoints written before stores had ids name none and match any; a segment whose header cannot be read is
    /// left to the journal's own check.</summary>
    private static void CheckStoreIds(string journal, PageStore? pages, List<string> problems)
    {
        var identity = new StoreIdentity(pages?.StoreId ?? Guid.Empty, pages?.Path);
        string markPath = Path.Combine(journal, JournalDurableMark.FileName);
        if (identity.Conflict(StoreIdentity.OfDurableMark(journal), markPath,
            $"The journal's durable mark '{markPath}'") is { } foreignMark)
        {
            problems.Add(foreignMark + ".");
        }

        foreach ((long first, _) in JournalFormat.ListSegmentFiles(journal))
        {
            string segment = Path.Combine(journal, JournalFormat.SegmentFileName(first));
            if (identity.Conflict(StoreIdentity.OfSegmentFile(segment, first), segment,
                $"Journal segment '{segment}'") is { } foreign)
            {
                problems.Add(foreign + ".");
            }
        }
    }

    /// <summary>Whether the data file's newest checkpoint still lists <paramref name="chunk"/> at its place (if it
    /// cannot be mounted, the chunk is taken to be listed: the failure is reported).</summary>
    private static bool StillListed(string path, ChunkInfo chunk)
    {
        (PageStore? now, List<ChunkInfo> listed) = Mount(path, problems: []);
        using (now)
        {
            if (now is null)
            {
                return true;
            }

            foreach (ChunkInfo other in listed)
            {
                if (other.Id == chunk.Id && other.FileOffset == chunk.FileOffset)
                {
                    return true;
                }
            }

            return false;
        }
    }

    /// <summary>Reads every complete record of the segments from the oldest on; a damaged segment is reported and
    /// the read goes on with the next one. Returns the segments read and the entries checked.</summary>
    private static (int Segments, long Entries) VerifyJournal(string journal, long[] segments, List<string> problems,
        ref long done, long total, IProgress<VerifyProgress>? progress, CancellationToken cancellationToken)
    {
        if (segments.Length == 0)
        {
            return (0, 0);
        }

        long entriesChecked = 0;
        var entries = new List<JournalEntryCopy>(EntriesPerStep);
        long from = segments[0];
        while (true)
        {
            using var follower = new JournalFollower(journal, from);
            try
            {
                while (true)
                {
                    cancellationToken.ThrowIfCancellationRequested();
                    entries.Clear();
                    if (follower.ReadAvailable(entries, EntriesPerStep) == 0)
                    {
                        return (SegmentsFrom(segments, segments[0], follower.NextSequence), entriesChecked);
                    }

                    entriesChecked += entries.Count;
                    foreach (JournalEntryCopy entry in entries)
                    {
                        done += entry.Data.Length;
                    }

                    progress?.Report(new VerifyProgress(done, Math.Max(done, total)));
                }
            }
            catch (JournalPositionPurgedException e)
            {
                from = e.FirstAvailableSequence; // purged by a checkpoint: no longer part of the store
            }
            catch (JournalCorruptedException e)
            {
                problems.Add(e.Message);
                long next = Array.Find(segments, first => first > follower.NextSequence);
                if (next == 0)
                {
                    return (segments.Length, entriesChecked);
                }

                from = next;
            }
        }
    }

    /// <summary>The segments among <paramref name="segments"/> whose first sequence lies in [start, next].</summary>
    private static int SegmentsFrom(long[] segments, long start, long next)
    {
        int count = 0;
        foreach (long first in segments)
        {
            count += first >= start && first <= next ? 1 : 0;
        }

        return Math.Max(count, 1);
    }
}
