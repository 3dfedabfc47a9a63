using Folio.Journal;
using Folio.Pages;
using Folio.Storage;

namespace Folio.Documents;

/// <summary>
/// Describes a store from its files, without opening it (<see cref="DocumentStore.ReadInfoAsync"/>): no lock is
/// taken and nothing is written, so it works while another process has the store open and keeps committing.
/// <para>
/// What it reads, in order: the data file's newest valid checkpoint at sequence C (<see
/// cref="PageStore.OpenForReading"/>: its header, chunk table and catalog, with every collection's stored count),
/// then every complete, durable commit the journal files hold after C (<see cref="JournalFollower"/>, the reader of
/// <see cref="DocumentChanges.ReadFilesAsync"/>), keeping each document's last change. A collection's count is the
/// checkpoint's, corrected for each document changed since: its presence after its last change less its presence in
/// the checkpoint's tree (one tree search each), as <see cref="VersionedIndex.Count"/> corrects. The result describes
/// the store as of the last commit read.
/// </para>
/// <para>
/// Racing the writer. The writer purges the journal up to a checkpoint only once that checkpoint is durable, and
/// reuses a checkpoint's chunks only after two newer ones are durable. So when the journal after C is gone (a
/// <see cref="JournalPositionPurgedException"/>), or a tree page fails its checks while the data file's header has
/// moved on, a newer checkpoint superseded the one mounted: the description starts over from the new header, a few
/// times at most (a writer that checkpoints faster than a read completes is reported as the last failure). A page
/// of a tree that fails its checks while the header has not moved is damage, reported at once; one read while
/// mounting (the catalog) is retried all the same, the header it came from being gone by then.
/// </para>
/// </summary>
internal static class StoreFileInfoReader
{
    /// <summary>Descriptions started over before the last failure is reported.</summary>
    private const int Attempts = 16;

    /// <summary>The page cache of the read: the catalog and the leaves of the documents changed since C.</summary>
    private const long CacheBytes = 8L << 20;

    public static async Task<StoreInfo> ReadAsync(string folder, CancellationToken cancellationToken)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        (string path, string journal) = StoreFolders(folder);
        for (int attempt = 1; ; attempt++)
        {
            cancellationToken.ThrowIfCancellationRequested();
            PageStore? mounted;
            try
            {
                mounted = OpenDataFile(path);
            }
            catch (StoreCorruptedException) when (attempt < Attempts)
            {
                // The writer reused a chunk of the header's checkpoint while the catalog was read (or the file is
                // damaged: then every attempt fails, and the last one reports it).
                continue;
            }

            using PageStore? pages = mounted;
            try
            {
                return await DescribeAsync(path, journal, pages, cancellationToken).ConfigureAwait(false);
            }
            catch (JournalPositionPurgedException) when (attempt < Attempts)
            {
                // A newer checkpoint covered the journal after the one mounted, and the writer purged it.
            }
            catch (StoreCorruptedException) when (attempt < Attempts && HeaderMoved(path, pages))
            {
                // A page of the mounted checkpoint was reused after two newer checkpoints.
            }
        }
    }

    /// <summary>The store's full path and its journal folder; a folder without one holds no store.</summary>
    internal static (string Path, string Journal) StoreFolders(string folder)
    {
        string path = Path.GetFullPath(folder);
        string journal = Path.Combine(path, DocumentStore.JournalFolderName);
        if (!Directory.Exists(journal))
        {
            throw new DirectoryNotFoundException($"No Folio store at '{path}' (no journal folder).");
        }

        return (path, journal);
    }

    /// <summary>The store's data file mounted for reads only (<see cref="PageStore.OpenForReading"/>), or null when
    /// it has none yet; with <paramref name="previous"/>, at the checkpoint before its newest, or null when it holds
    /// none.</summary>
    internal static PageStore? OpenDataFile(string path, bool previous = false)
    {
        string dataFile = Path.Combine(path, DocumentStore.DataFileName);
        return File.Exists(dataFile)
            ? PageStore.OpenForReading(PhysicalFileSystem.Instance, dataFile, CacheBytes, previous)
            : null; // a store that never checkpointed may not have one yet
    }

    /// <summary>Whether the data file's newest checkpoint is no longer the one <paramref name="pages"/>
    /// mounted.</summary>
    internal static bool HeaderMoved(string path, PageStore? pages)
    {
        try
        {
            using PageStore? now = OpenDataFile(path);
            return (now?.Current.Generation ?? 0) != (pages?.Current.Generation ?? 0);
        }
        catch (StoreCorruptedException)
        {
            return true; // caught mid-write: the next attempt mounts whatever became current
        }
    }

    /// <summary>The live feed pins of <paramref name="folder"/> (<see cref="FeedPin.Live"/>, deleting nothing); none
    /// when the folder cannot be read: a description does not fail for it.</summary>
    internal static (int Readers, long? Oldest) FeedReaders(IFileSystem fileSystem, string folder)
    {
        try
        {
            return FeedPin.Live(fileSystem, folder, deleteDead: false);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return (0, null);
        }
    }

    private static async Task<StoreInfo> DescribeAsync(string path, string journal, PageStore? pages,
        CancellationToken cancellationToken)
    {
        PageCheckpoint checkpoint = pages?.Current ?? PageCheckpoint.Empty;
        long lastSequence = checkpoint.Sequence;

        // Each document's presence after its last change since the checkpoint.
        var changed = new Dictionary<(string Collection, string Id), bool>();
        await foreach (DocumentChange change in DocumentChanges.ReadFilesAsync(path, checkpoint.Sequence + 1,
            follow: false, cancellationToken).ConfigureAwait(false))
        {
            changed[(change.Collection, change.Id)] = change.Kind == ChangeKind.Put;
            lastSequence = change.Sequence;
        }

        var counts = new SortedDictionary<string, long>(StringComparer.Ordinal);
        foreach ((string name, CollectionTree tree) in checkpoint.Collections)
        {
            counts[name] = tree.Count;
        }

        foreach (((string collection, string id), bool live) in changed)
        {
            bool inTree = checkpoint.Collections.TryGetValue(collection, out CollectionTree? tree)
                && BTree.Contains(tree.Root, id, pages!.Reader);
            counts[collection] = counts.GetValueOrDefault(collection) + (live ? 1 : 0) - (inTree ? 1 : 0);
        }

        var collections = new List<CollectionInfo>(counts.Count);
        foreach ((string name, long count) in counts)
        {
            collections.Add(new CollectionInfo(name, count));
        }

        List<(long First, long Bytes)> segments = JournalFormat.ListSegmentFiles(journal);
        long journalBytes = 0;
        foreach ((_, long bytes) in segments)
        {
            journalBytes += bytes;
        }

        // After the journal was read: the read's own pin is gone by now (and dead readers' pins are left alone).
        (int feedReaders, long? oldestFeedReader) = FeedReaders(PhysicalFileSystem.Instance,
            Path.Combine(path, ReaderPin.FolderName));
        return new StoreInfo(
            path,
            DataFileHeader.FormatVersion,
            pages?.FileLength ?? 0,
            pages?.UnusedBytes ?? 0,
            (int)JournalFormat.FormatVersion,
            journalBytes,
            segments.Count > 0 ? segments[0].First : checkpoint.Sequence + 1,
            checkpoint.Generation,
            checkpoint.Sequence,
            lastSequence,
            pages?.ChunkCount ?? 0,
            pages?.LastCheckpoint.FillRate ?? 1,
            collections)
        {
            FeedReaders = feedReaders,
            OldestFeedReaderSequence = oldestFeedReader,
            StoreId = StoreIdOf(pages, journal, segments),
        };
    }

    /// <summary>The store's id as its files name it: the data file's checkpoint's, else the journal mark's, else the
    /// newest segment's (<see cref="Guid.Empty"/> when none has one, or none can be read).</summary>
    private static Guid StoreIdOf(PageStore? pages, string journal, List<(long First, long Bytes)> segments)
    {
        if (pages is { StoreId: var id } && id != Guid.Empty)
        {
            return id;
        }

        Guid marked = StoreIdentity.OfDurableMark(journal);
        return marked != Guid.Empty || segments.Count == 0 ? marked
            : StoreIdentity.OfSegmentFile(Path.Combine(journal, JournalFormat.SegmentFileName(segments[^1].First)),
                segments[^1].First);
    }
}
