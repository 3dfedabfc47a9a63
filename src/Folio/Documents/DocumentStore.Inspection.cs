using Folio.Documents;
using Folio.Pages;

namespace Folio;

/// <summary>Raw reads of whole collections and a description of the store's files (exports and tools).</summary>
public sealed partial class DocumentStore
{
    /// <summary>The names of the store's collections, in ordinal order (a collection whose documents were all
    /// deleted may still be listed).</summary>
    /// <returns>The collection names.</returns>
    public IReadOnlyList<string> GetCollections()
    {
        ThrowIfDisposed();
        var names = new SortedSet<string>(_index.CollectionNames(), StringComparer.Ordinal);
        names.UnionWith(_pages.Current.Collections.Keys);
        return [.. names];
    }

    /// <summary>
    /// Streams the documents of <paramref name="collection"/> whose ids are in [<paramref name="fromInclusive"/>,
    /// <paramref name="toExclusive"/>) (null: unbounded), in ordinal id order, as raw JSON, from one snapshot taken
    /// when the enumeration starts and held until it ends (dispose the enumerator, or finish it). A scan that outlives
    /// <see cref="DocumentStoreOptions.MaxSnapshotAge"/> throws <see cref="SnapshotExpiredException"/>.
    /// </summary>
    /// <param name="collection">The collection.</param>
    /// <param name="fromInclusive">The lowest id, or null.</param>
    /// <param name="toExclusive">The id above the range, or null.</param>
    /// <returns>The documents.</returns>
    /// <exception cref="ArgumentException">A bad collection name, or an inverted range.</exception>
    public IEnumerable<StoredDocument> Scan(string collection, string? fromInclusive = null,
        string? toExclusive = null)
    {
        ThrowIfDisposed();
        DocumentIds.ValidateCollection(collection);
        VersionedIndex.CheckRange(fromInclusive, toExclusive);
        return ScanIterator(collection, fromInclusive, toExclusive);
    }

    private IEnumerable<StoredDocument> ScanIterator(string collection, string? fromInclusive, string? toExclusive)
    {
        ThrowIfDisposed();
        using IndexSnapshot snapshot = _index.OpenSnapshot();
        foreach ((string id, DocumentVersion version) in
            _index.Range(collection, fromInclusive, toExclusive, descending: false, snapshot.Sequence))
        {
            snapshot.ThrowIfExpired(); // after the read: see SnapshotRegistry
            yield return new StoredDocument(collection, id, version.Json, version.Sequence,
                new DateTimeOffset(version.TimestampTicks, TimeSpan.Zero));
        }
    }

    /// <summary>
    /// Streams every document of the store in <paramref name="folder"/>, as of one commit, from its files without
    /// opening it: no lock on the store is taken and none of its files is written, so it works while another process
    /// has the store open and keeps committing (what <c>folio export</c> uses). Collections come in ordinal order of
    /// their names, each collection's documents in ordinal order of their ids (as <see cref="Scan"/>). The stream
    /// reads the data file's newest checkpoint and the journal's commits after it, up to the last complete, durable
    /// one; it holds in memory the documents changed since that checkpoint (as the writing store does).
    /// <para>
    /// While the stream is open, a small pin file in the store's <c>readers</c> folder asks the writing process to
    /// keep the checkpoint's chunks (it neither frees nor reuses them, so its data file may grow meanwhile); the
    /// stream has no age limit. Dispose the enumerator, or finish it, to remove the pin. A pin a crashed reader left
    /// behind is removed by the writer's next checkpoint.
    /// </para>
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="Open"/>).</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The documents.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    /// <exception cref="StoreCorruptedException">A page of the checkpoint is damaged.</exception>
    /// <exception cref="JournalCorruptedException">A journal record after the checkpoint is damaged.</exception>
    public static IAsyncEnumerable<StoredDocument> ScanFilesAsync(string folder,
        CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        return StoreFileScanner.ScanAsync(folder, onDamage: null, cancellationToken);
    }

    /// <summary>
    /// Streams every document of the store in <paramref name="folder"/> that its files still hold readable, as
    /// <see cref="ScanFilesAsync"/> does, but goes on past damage: a page of the data file's checkpoint that fails its
    /// checks, and every page below it, is skipped, as is a document whose own value pages fail theirs, and each is
    /// reported to <paramref name="onDamage"/> (on the enumerating thread, before the documents after it) with the
    /// ids it may have held. Damage to the journal after the checkpoint (a record that fails its checks, a damaged
    /// segment header, a missing segment no purge removed) is read past too: the commits it took are reported as a
    /// range of sequences before any document, and the commits after it are applied. A newest checkpoint that cannot
    /// be read (its header slot, chunk table or catalog is damaged) gives way to the checkpoint before it, which the
    /// data file keeps until the next checkpoint, and when that cannot be read either, to the journal alone; the
    /// commits the journal purged after the checkpoint read (or, with none, from the first commit on) are in no file
    /// any more, and are reported as one range of sequences (none when the journal still holds them). What a store
    /// whose files are damaged can give back, without a backup: write the stream into a new store (<c>folio export
    /// --skip-damaged</c>, then <c>folio import</c>), and the damaged ranges say what is lost
    /// (<see cref="DamagedRange"/>). Documents written since the checkpoint by intact commits come from the journal
    /// and are never skipped.
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="Open"/>).</param>
    /// <param name="onDamage">Called with each range of documents, or of commits, skipped.</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The readable documents, collections in ordinal order of their names, each in ordinal order of
    /// ids.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    public static IAsyncEnumerable<StoredDocument> SalvageFilesAsync(string folder, Action<DamagedRange> onDamage,
        CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        ArgumentNullException.ThrowIfNull(onDamage);
        return StoreFileScanner.ScanAsync(folder, onDamage, cancellationToken);
    }

    /// <summary>
    /// Describes the store in <paramref name="folder"/> from its files, without opening it: no lock is taken and
    /// nothing is written, so it works while another process has the store open and keeps committing (what
    /// <c>folio info</c> uses). The description is that of <see cref="GetInfo"/> as of the last complete, durable
    /// commit in the journal files: the data file's newest checkpoint, then the commits after it. A collection every
    /// document of which was deleted before that checkpoint is not listed.
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="Open"/>).</param>
    /// <param name="cancellationToken">Stops the read.</param>
    /// <returns>The description.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store.</exception>
    /// <exception cref="StoreCorruptedException">A page the description needs is damaged.</exception>
    /// <exception cref="JournalCorruptedException">A journal record the description needs is
    /// damaged.</exception>
    public static Task<StoreInfo> ReadInfoAsync(string folder, CancellationToken cancellationToken = default)
        => StoreFileInfoReader.ReadAsync(folder, cancellationToken);

    /// <summary>
    /// Describes the store: its files' sizes and formats, the checkpoint and journal positions, and every collection
    /// with its live documents (counted as <see cref="DocumentSession.CountAsync{T}"/> counts: from the checkpoint's
    /// stored counts and the documents created or deleted since, without walking the collections).
    /// </summary>
    /// <returns>The description, as of the call.</returns>
    public StoreInfo GetInfo()
    {
        ThrowIfDisposed();
        using IndexSnapshot snapshot = _index.OpenSnapshot();
        var collections = new List<CollectionInfo>();
        foreach (string name in GetCollections())
        {
            collections.Add(new CollectionInfo(name, _index.Count(name, snapshot.Sequence)));
        }

        snapshot.ThrowIfExpired();
        PageCheckpoint checkpoint = _pages.Current;
        CheckpointStatistics last = _pages.LastCheckpoint;
        (int feedReaders, long? oldestFeedReader) = _pages.PinFolder is { } pins
            ? StoreFileInfoReader.FeedReaders(Options.FileSystem, pins)
            : (0, null);
        return new StoreInfo(
            Path,
            DataFileHeader.FormatVersion,
            _pages.FileLength,
            _pages.UnusedBytes,
            (int)Folio.Journal.JournalFormat.FormatVersion,
            _journal.FileBytes(),
            Changes.FirstSequence,
            checkpoint.Generation,
            checkpoint.Sequence,
            snapshot.Sequence,
            _pages.ChunkCount,
            last.FillRate,
            collections)
        {
            FeedReaders = feedReaders,
            OldestFeedReaderSequence = oldestFeedReader,
            StoreId = _journal.StoreId,
        };
    }
}
