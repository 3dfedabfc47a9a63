using System.Diagnostics.Metrics;
using System.Text.Json;
using Folio.Journal;
using Folio.Transactions;
using Microsoft.Extensions.Logging;

namespace Folio;

/// <summary>Settings of a <see cref="DocumentStore"/>, validated when it opens. The store keeps a copy of them: changes
/// made after the open apply to stores opened afterwards, not to the open one. Its <see cref="JsonSerializerOptions"/>
/// become read-only at the open.</summary>
public sealed class DocumentStoreOptions
{
    /// <summary>The largest document allowed: 16 MiB of UTF-8 JSON.</summary>
    public const int DefaultMaxDocumentSize = 16 << 20;

    /// <summary>
    /// The deepest nesting of objects and arrays a raw JSON document (<see cref="DocumentStore.PutAsync"/>,
    /// <see cref="DocumentStore.WriteAsync"/>) may ever have: 1,000 levels, SQLite's JSON limit. A store accepts as
    /// deep as its <see cref="JsonSerializerOptions"/> read (<see cref="JsonSerializerOptions.MaxDepth"/>;
    /// System.Text.Json's default, 64, when it is 0), up to this; deeper documents are refused with
    /// <see cref="ArgumentException"/>, since a typed load or query of them would fail. A store written through the
    /// raw API only can raise <see cref="JsonSerializerOptions.MaxDepth"/> to accept deeper documents.
    /// </summary>
    public const int MaxJsonDepth = 1_000;

    /// <summary>System.Text.Json's nesting limit when <see cref="JsonSerializerOptions.MaxDepth"/> is 0.</summary>
    private const int SerializerDefaultMaxDepth = 64;

    /// <summary>The deepest nesting a raw document may have in a store with these options: what
    /// <see cref="JsonSerializerOptions"/> read, at most <see cref="MaxJsonDepth"/>.</summary>
    internal int RawJsonDepth => Math.Min(MaxJsonDepth,
        JsonSerializerOptions.MaxDepth > 0 ? JsonSerializerOptions.MaxDepth : SerializerDefaultMaxDepth);

    /// <summary>When commits are acknowledged. Default <see cref="DurabilityMode.Durable"/> (after fsync).</summary>
    public DurabilityMode Durability { get; set; } = DurabilityMode.Durable;

    /// <summary>The default <see cref="SegmentSize"/>: 32 MiB. With the default <see cref="CheckpointThreshold"/> the
    /// journal on disk stays within about 160 MiB (the segment a checkpoint ends in, the threshold's worth after it,
    /// the active segment and the next one, prepared ahead).</summary>
    public const long DefaultSegmentSize = 32L << 20;

    /// <summary>Size of one journal segment file in bytes. Default 32 MiB; between 1 KiB and 1 GiB, and larger than
    /// <see cref="MaxDocumentSize"/> plus 1 KiB so that any document fits one record. It also bounds one save: a
    /// <see cref="DocumentSession.SaveChangesAsync"/> is atomic and written as one journal record, so the documents it
    /// writes must together fit in this size less about 1 KiB of headers (else
    /// <see cref="DocumentTooLargeException"/>, and nothing is written).</summary>
    public long SegmentSize { get; set; } = DefaultSegmentSize;

    /// <summary>The length an added-id list must pass before a checkpoint has the committer rebuild it from the
    /// in-memory heads (tests set it low to trim often).</summary>
    internal int AddedIdsTrimMinimum { get; set; } = Documents.VersionedIndex.DefaultAddedIdsTrimMinimum;

    /// <summary>The clock <see cref="MaxSnapshotAge"/> is measured with (tests move it by hand).</summary>
    internal TimeProvider SnapshotClock { get; set; } = TimeProvider.System;

    /// <summary>Tests only: the most pages a data-file chunk holds (default 256), so that small stores write
    /// checkpoints of several chunks.</summary>
    internal int PagesPerChunk { get; set; } = Pages.ChunkFormat.MaxPagesPerChunk;

    /// <summary>Tests only: a page cache of this many bytes, below <see cref="MinCacheSize"/> (0: use
    /// <see cref="CacheSize"/>), so crash and power-loss tests run stores many times larger than their cache.</summary>
    internal long TestCacheBytes { get; set; }

    /// <summary>Whether a clean close writes a last checkpoint (default). A restore's verification open turns it off,
    /// so the restored store keeps the backup's journal after its checkpoint, as the source had it.</summary>
    internal bool CheckpointOnClose { get; set; } = true;

    /// <summary>A checkpoint whose pages would rewrite more than this share of the data file's live pages (one
    /// over it; at least <see cref="MinCheckpointSliceBytes"/>) is written in slices by id range, each durable and
    /// freeing what it replaced (<c>Documents.CheckpointSlicer</c>), so the file need not hold two whole trees. 0 or 1:
    /// whole checkpoints. Default 4.</summary>
    internal int CheckpointSlices { get; set; } = 4;

    /// <summary>The smallest slice a checkpoint is cut into: 8 MiB (tests lower it).</summary>
    internal long MinCheckpointSliceBytes { get; set; } = 8L << 20;

    /// <summary>Tests only: called with a slice's index and the pass's count of slices before each slice after the
    /// first is written; what it throws fails the checkpoint there, as a failed write would.</summary>
    internal Action<int, int>? TestBeforeSlice { get; set; }

    /// <summary>The least time between two background compaction passes (the rate limit's second); tests shorten
    /// it.</summary>
    internal TimeSpan CompactionPassInterval { get; set; } = TimeSpan.FromSeconds(1);

    /// <summary>The most commands one commit group (one journal record, one fsync) holds. Default 1024.</summary>
    public int MaxGroupCommands { get; set; } = TransactionMergerOptions.DefaultMaxGroupCommands;

    /// <summary>The most bytes one commit group holds. Default 4 MiB; a larger batch commits alone.</summary>
    public int MaxGroupBytes { get; set; } = TransactionMergerOptions.DefaultMaxGroupBytes;

    /// <summary>
    /// The most commit groups between their journal write and their acknowledgement. Default 1: one group at a time.
    /// 2 to 6 overlap the next group's write and fsync with the previous group's fsync (acknowledgements stay in commit
    /// order, after durability); that pays only where the disk flushes concurrent fsyncs in parallel, so measure
    /// before raising it (on the benchmark host's virtual disk, 2 committed 20-30% less at 64 writers).
    /// </summary>
    public int MaxGroupsInFlight { get; set; } = TransactionMergerOptions.DefaultMaxGroupsInFlight;

    /// <summary>In <see cref="DurabilityMode.Buffered"/> mode, the longest time between two background fsyncs.
    /// Default 100 ms; positive, at most about 49.7 days (4,294,967,294 ms).</summary>
    public TimeSpan BufferedSyncInterval { get; set; } = TransactionMergerOptions.DefaultBufferedSyncInterval;

    /// <summary>An fsync slower than this logs a warning. Default 500 ms; positive.</summary>
    public TimeSpan SlowSyncThreshold { get; set; } = TransactionMergerOptions.DefaultSlowSyncThreshold;

    /// <summary>The default <see cref="MaxSnapshotAge"/>: 10 minutes.</summary>
    public static readonly TimeSpan DefaultMaxSnapshotAge = TimeSpan.FromMinutes(10);

    /// <summary>
    /// How long a session's snapshot may hold back the pruning of old versions. Default 10 minutes; positive, or
    /// <see cref="Timeout.InfiniteTimeSpan"/> for no limit. A session reads one snapshot (the state at its first read),
    /// and every version it could see is kept in memory while it is open. A session that is never disposed releases its
    /// snapshot when the garbage collector finds it unreachable; one that stays reachable (held in a field, say) holds
    /// it until this age, after which the next commits prune past it and the session's later reads throw
    /// <see cref="SnapshotExpiredException"/>. A snapshot is expired only by a commit that would prune past it, so an
    /// old session in a store nobody writes keeps working.
    /// </summary>
    public TimeSpan MaxSnapshotAge { get; set; } = DefaultMaxSnapshotAge;

    /// <summary>The largest <see cref="MaxSnapshotRetainedBytes"/> a store takes by default: 256 MiB.</summary>
    public const long DefaultMaxSnapshotRetainedBytes = 256L << 20;

    /// <summary>The least <see cref="MaxSnapshotRetainedBytes"/>: 1 MiB.</summary>
    public const long MinSnapshotRetainedBytes = 1L << 20;

    /// <summary>
    /// How many bytes the oldest open snapshots may keep in memory, in bytes: while a session is open, every document
    /// written over since its first read keeps the version the session could read, and every document written since
    /// stays in memory past the checkpoints that would otherwise move it to the data file, so a session held open
    /// under a steady stream of writes would hold memory without bound until <see cref="MaxSnapshotAge"/>. Past this
    /// many bytes of such documents (their JSON plus about 100 bytes each), the commit that crossed it expires the
    /// oldest snapshots: their sessions' later reads throw <see cref="SnapshotExpiredException"/>, and what they kept
    /// is pruned and evicted as usual. Default 0: 256 MiB (<see cref="DefaultMaxSnapshotRetainedBytes"/>), or an eighth
    /// of the memory the process may use (as for <see cref="CacheSize"/>) when that is less, but at least 1 MiB;
    /// otherwise at least 1 MiB. Counted from the last time the oldest snapshot changed, so short sessions never come
    /// near it.
    /// </summary>
    public long MaxSnapshotRetainedBytes { get; set; }

    /// <summary>The default <see cref="CheckpointThreshold"/>: 64 MiB.</summary>
    public const long DefaultCheckpointThreshold = 64L << 20;

    /// <summary>
    /// How much journal may accumulate after the last checkpoint before a background checkpoint writes the state to
    /// the data file and purges the journal segments it covers, in bytes. Default 64 MiB; at least 4 KiB. Measured as
    /// the records appended after the last checkpoint's position (checked every 100 ms). A checkpoint purges only whole
    /// segments below its position, so the journal on disk stays within about this plus three segments. Commits
    /// continue while a checkpoint runs.
    /// </summary>
    public long CheckpointThreshold { get; set; } = DefaultCheckpointThreshold;

    /// <summary>
    /// How much journal may accumulate after the last checkpoint before new commits wait for a checkpoint to finish
    /// (backpressure), in bytes: the documents written since the last checkpoint are held in memory until a checkpoint
    /// writes them to the data file, so when checkpoints fall behind the writers (a slow disk, a held snapshot), this
    /// bounds that memory instead of letting it grow. Commits then wait (they never fail for it) until a checkpoint
    /// brings the journal after it below this size, or a checkpoint fails (the journal still holds everything, so
    /// writers are not stopped by a data file that cannot be written). Default 0: four times
    /// <see cref="CheckpointThreshold"/> (256 MiB), or an eighth of the memory the process may use (the garbage
    /// collector's <see cref="GCMemoryInfo.TotalAvailableMemoryBytes"/>: in a container, its share of the container's
    /// limit) when that is less, though not below 4 MiB; a background checkpoint then starts at half of it when that
    /// is below <see cref="CheckpointThreshold"/>. Otherwise at least <see cref="CheckpointThreshold"/>. Measured as
    /// the records appended after the last checkpoint's position, checked every 32 commands committed and after every
    /// checkpoint.
    /// <para>
    /// Commits also wait, whatever this is, while the next checkpoint could need more than a quarter of that memory
    /// (at most 2 GiB) for the pages it rewrites: a checkpoint holds every page its changes touch, and documents
    /// written at scattered ids into a store larger than memory touch up to a page (16 KiB, plus its decoded copy)
    /// each, so checkpoints of such writes start after fewer documents (past an eighth of that memory), and their
    /// pages never outgrow the process.
    /// </para>
    /// <para>
    /// While checkpoints fail on damage in the data file (<see cref="StoreCorruptedException"/>: a page a checkpoint
    /// must rewrite fails its checksum, so every checkpoint would fail until the store is repaired), commits do not
    /// wait for them; past this threshold (or the pages' limit above) they fail with that exception instead, so the
    /// memory and journal the store cannot checkpoint stay bounded, and reads go on.
    /// </para>
    /// </summary>
    public long CheckpointBackpressureThreshold { get; set; }

    /// <summary>The default <see cref="CompactionFillRate"/>: 0.7, so a chunk is rewritten once fewer than 70% of its
    /// pages are live.</summary>
    public const double DefaultCompactionFillRate = 0.7;

    /// <summary>
    /// Background compaction: when the data file's live chunks hold less than this share of live pages, checkpoints
    /// rewrite the sparsest chunks' live pages into new chunks (at most <see cref="CompactionBytesPerSecond"/>), and
    /// the emptied chunks are freed once no reader needs them; free space at the file's end is given back. Between 0
    /// and 1, below 1; 0 turns background compaction off (<see cref="DocumentStore.CompactAsync"/> still works).
    /// Default <see cref="DefaultCompactionFillRate"/>.
    /// </summary>
    public double CompactionFillRate { get; set; } = DefaultCompactionFillRate;

    /// <summary>The default <see cref="CompactionBytesPerSecond"/>: 32 MiB.</summary>
    public const long DefaultCompactionBytesPerSecond = 32L << 20;

    /// <summary>
    /// The rate limit of background compaction: the live bytes it copies per pass, one pass a second at most. At least
    /// 64 KiB. Default <see cref="DefaultCompactionBytesPerSecond"/>.
    /// </summary>
    public long CompactionBytesPerSecond { get; set; } = DefaultCompactionBytesPerSecond;

    /// <summary>The default <see cref="BackupBytesPerSecond"/>: 256 MiB.</summary>
    public const long DefaultBackupBytesPerSecond = 256L << 20;

    /// <summary>
    /// The pace of an online backup (<see cref="DocumentStore.BackupAsync(System.IO.Pipelines.PipeWriter,
    /// CancellationToken)"/> and its overloads): the most bytes it sends per second. A backup at full speed writes its
    /// file into the page cache far faster than the disk takes it, and every commit's fsync then waits behind that
    /// writeback (docs/measurements.md, "Fourth round"); at this pace the disk keeps room for the commits. A slower
    /// destination slows a backup further, as always. Read when each backup starts, so it may be changed while the
    /// store is open (to 0, say, for a backup taken while nothing else runs). Default
    /// <see cref="DefaultBackupBytesPerSecond"/>; 0 for no limit, else at least 1 MiB. A backup from a store's files
    /// (<c>BackupFilesAsync</c>, beside another process whose options it cannot see) takes its pace from
    /// <see cref="BackupFilesOptions.BytesPerSecond"/>, with the same default.
    /// </summary>
    public long BackupBytesPerSecond { get; set; } = DefaultBackupBytesPerSecond;

    /// <summary>The default <see cref="CheckpointInterval"/>: 10 minutes.</summary>
    public static readonly TimeSpan DefaultCheckpointInterval = TimeSpan.FromMinutes(10);

    /// <summary>
    /// The longest time between checkpoints while commits arrive, so a store that writes little still bounds what
    /// an open must replay. Default 10 minutes; positive, or <see cref="Timeout.InfiniteTimeSpan"/> to checkpoint only
    /// by <see cref="CheckpointThreshold"/>, at <see cref="DocumentStore.CheckpointAsync"/> and at a clean close.
    /// </summary>
    public TimeSpan CheckpointInterval { get; set; } = DefaultCheckpointInterval;

    /// <summary>The default <see cref="MaxChangeFeedLag"/>: 256 MiB.</summary>
    public const long DefaultMaxChangeFeedLag = 256L << 20;

    /// <summary>
    /// How far, in bytes of journal, an open change-feed stream (<see cref="DocumentStore.Changes"/>) may fall behind
    /// the last checkpoint and still read every change. Checkpoints purge the journal segments they cover; an open
    /// stream keeps the segments it has not read yet from being purged, up to this many bytes of them; a stream
    /// further behind loses that hold (a warning is logged), and its enumeration throws
    /// <see cref="JournalPositionPurgedException"/> when it reaches a purged commit, so a stream that stopped being
    /// read cannot fill the disk. While the disk is full (commits fail with <see cref="StoreFullException"/>), every
    /// stream loses its hold at the next checkpoint, so the purge frees what it can. Default
    /// <see cref="DefaultMaxChangeFeedLag"/>; 0 turns the hold off (a stream then fails once it is a whole segment
    /// behind a checkpoint). Readers of the files in other processes (<see cref="DocumentChanges.ReadFilesAsync"/>,
    /// <c>folio tail</c>) are held the same way, through the pins they leave in the store's <c>readers</c> folder.
    /// </summary>
    public long MaxChangeFeedLag { get; set; } = DefaultMaxChangeFeedLag;

    /// <summary>The largest <see cref="CacheSize"/> a store takes by default: 256 MiB.</summary>
    public const long DefaultCacheSize = 256L << 20;

    /// <summary>The smallest <see cref="CacheSize"/>: 1 MiB.</summary>
    public const long MinCacheSize = 1L << 20;

    /// <summary>
    /// The memory for pages of the data file (the buffer pool), in bytes. Default 0: 256 MiB
    /// (<see cref="DefaultCacheSize"/>), or an eighth of the memory the process may use (the garbage collector's
    /// <see cref="GCMemoryInfo.TotalAvailableMemoryBytes"/>: in a container, its share of the container's limit) when
    /// that is less, but at least 1 MiB. Otherwise at least 1 MiB (<see cref="MinCacheSize"/>). Documents
    /// checkpointed to the data file are read through it: a page is read from disk into a frame of 16 KiB when first
    /// needed and evicted when the cache is full, pages a long scan touched once before pages point reads keep hot.
    /// It is native memory the garbage collector neither scans nor moves, taken from the operating system as pages
    /// are first read (a store smaller than its cache uses only what it reads). It does not bound the documents
    /// written since the last checkpoint (held in memory until the next writes them; see
    /// <see cref="CheckpointBackpressureThreshold"/>), the versions open sessions' snapshots keep, or the top two
    /// levels of each collection's tree, which stay decoded (at most 129 pages a collection). A cache the operating
    /// system refuses to reserve fails the open with <see cref="ArgumentOutOfRangeException"/> naming this option.
    /// </summary>
    public long CacheSize { get; set; }

    /// <summary>The smallest <see cref="DocumentCacheSize"/> but 0: 64 KiB.</summary>
    public const long MinDocumentCacheSize = 64L << 10;

    /// <summary>
    /// The memory for documents that point reads found in the data file, in bytes (the document cache). Default null:
    /// a quarter of <see cref="CacheSize"/> (64 MiB with the default cache). 0 turns the cache off; otherwise at least
    /// 64 KiB (<see cref="MinDocumentCacheSize"/>). A document checkpointed to the data file is read through its
    /// collection's tree in the page cache (a descent, a search, a copy of its bytes); a point read
    /// (<see cref="DocumentStore.Get"/>, a session's load) that found one keeps it here, so the next read of it is one
    /// hash lookup that shares its bytes, as a read of a document written since the last checkpoint is. Once it is
    /// full, a document gets in only when it is missed again soon after, in place of one not read for a while, so
    /// reads of data larger than the cache spread evenly do not churn it; a checkpoint that rewrites a collection's
    /// tree starts that collection's documents afresh (the cache holds what a tree holds, and trees never change),
    /// and range reads and writes never fill it. The entries live on the garbage-collected heap; each counts
    /// its document's and its id's bytes plus about 128 bytes, and a document larger than a sixty-fourth of the cache
    /// is never cached.
    /// </summary>
    public long? DocumentCacheSize { get; set; }

    /// <summary>
    /// Read ahead for bounded range reads. Default true. When a query with an upper id bound (a prefix, or
    /// <see cref="DocumentSession.QueryByRangeAsync{T}"/> with a bound or a <c>take</c>) reaches a leaf page of the
    /// data file, the leaves it will read next under the same parent (up to 8, stopping at the bound) are read into the
    /// cache by one low-priority background thread, their disk reads in flight together, unless the first is cached
    /// already. Unbounded scans, point reads and cached data are unaffected; prefetch stops while a checkpoint writes.
    /// Turn it off to keep a store's disk reads strictly to what its readers ask for.
    /// </summary>
    public bool RangePrefetch { get; set; } = true;

    /// <summary>
    /// How the store reads the pages of its data file that its cache misses. Default
    /// <see cref="DataFileReadMode.Automatic"/>: around the operating system's page cache (direct) while the data file
    /// is larger than the memory the process may use beyond <see cref="CacheSize"/>, else through it (buffered); see
    /// <see cref="DataFileReadMode"/>. Choose <see cref="DataFileReadMode.Buffered"/> when other memory (a machine's,
    /// not a container's) can hold the file, and <see cref="DataFileReadMode.Direct"/> when the cache is sized to
    /// the memory the store should use and a second copy of its pages in the page cache would only crowd out others.
    /// </summary>
    public DataFileReadMode DataFileReads { get; set; }

    /// <summary>The largest document, in UTF-8 bytes. Default 16 MiB.</summary>
    public int MaxDocumentSize { get; set; } = DefaultMaxDocumentSize;

    /// <summary>How sessions serialize entities. Default: <see cref="JsonSerializerOptions.Default"/>; set a
    /// <c>TypeInfoResolver</c> from a <c>JsonSerializerContext</c> for source-generated serialization.</summary>
    public JsonSerializerOptions JsonSerializerOptions { get; set; } = JsonSerializerOptions.Default;

    /// <summary>The collection of an entity type. Default: <see cref="DefaultCollectionName"/> (<c>User</c> for
    /// <c>MyApp.User</c>, <c>Envelope&lt;Order&gt;</c> for <c>Envelope&lt;MyApp.Order&gt;</c>).</summary>
    public Func<Type, string> CollectionName { get; set; } = DefaultCollectionName;

    private static readonly System.Collections.Concurrent.ConcurrentDictionary<Type, string> s_defaultNames = new();

    /// <summary>
    /// The default collection of an entity type: its CLR name without namespace, and for a generic type its name
    /// without the arity suffix followed by its type arguments' names in angle brackets, so that
    /// <c>Envelope&lt;Order&gt;</c> and <c>Envelope&lt;Invoice&gt;</c> are two collections (not one <c>Envelope`1</c>
    /// whose documents load as either). Types of the same name in two namespaces share a collection: name them
    /// apart with <see cref="CollectionName"/> when they must not.
    /// </summary>
    /// <param name="type">The entity type.</param>
    /// <returns>The collection name, for example <c>User</c> or <c>Envelope&lt;Order&gt;</c>.</returns>
    public static string DefaultCollectionName(Type type)
    {
        ArgumentNullException.ThrowIfNull(type);
        return type.IsGenericType ? s_defaultNames.GetOrAdd(type, GenericName) : type.Name;
    }

    private static string GenericName(Type type)
    {
        var name = new System.Text.StringBuilder();
        AppendName(name, type);
        return name.ToString();
    }

    private static void AppendName(System.Text.StringBuilder name, Type type)
    {
        if (type.IsArray)
        {
            AppendName(name, type.GetElementType()!);
            name.Append('[').Append(',', type.GetArrayRank() - 1).Append(']');
            return;
        }

        string simple = type.Name;
        int tick = simple.IndexOf('`', StringComparison.Ordinal);
        name.Append(tick < 0 ? simple : simple.AsSpan(0, tick));
        if (!type.IsGenericType)
        {
            return;
        }

        name.Append('<');
        Type[] arguments = type.GetGenericArguments();
        for (int i = 0; i < arguments.Length; i++)
        {
            if (i > 0)
            {
                name.Append(',');
            }

            AppendName(name, arguments[i]);
        }

        name.Append('>');
    }

    /// <summary>Logging (open, recovery summary, slow fsync, faulted store); null for none.</summary>
    public ILoggerFactory? LoggerFactory { get; set; }

    /// <summary>Metrics on <c>Meter("Folio")</c>; null creates a private meter.</summary>
    public IMeterFactory? MeterFactory { get; set; }

    /// <summary>A backup's pace (this type's <see cref="BackupBytesPerSecond"/>, or a backup from files'): 0 for no
    /// limit, else at least 1 MiB a second.</summary>
    internal static void ValidateBackupPace(string name, long bytesPerSecond)
    {
        if (bytesPerSecond is < 0 or > 0 and < 1024 * 1024)
        {
            ThrowHelper.ThrowArgumentOutOfRange(name, bytesPerSecond,
                $"{name} must be 0 (no limit) or at least 1 MiB.");
        }
    }

    /// <summary>
    /// Checks every setting as <see cref="DocumentStore.Open"/> does (a host can check its configuration before it
    /// opens the store).
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException">A setting is out of range; <c>ParamName</c> names it.</exception>
    public void Validate()
    {
        if (MaxDocumentSize is <= 0 or > 256 << 20)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxDocumentSize), MaxDocumentSize,
                "MaxDocumentSize must be between 1 byte and 256 MiB.");
        }

        if (SegmentSize > JournalOptions.MaxSegmentSize)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(SegmentSize), SegmentSize,
                $"SegmentSize must be at most {JournalOptions.MaxSegmentSize} bytes (1 GiB).");
        }

        if (SegmentSize < MaxDocumentSize + 1024L + (2 * DocumentIds.MaxIdBytes))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(SegmentSize), SegmentSize,
                $"SegmentSize must exceed MaxDocumentSize ({MaxDocumentSize}) by at least " +
                $"{1024 + (2 * DocumentIds.MaxIdBytes)} bytes so that any document fits one journal record.");
        }

        if (!Enum.IsDefined(Durability))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(Durability), Durability,
                "Durability must be Durable or Buffered.");
        }

        TransactionMergerOptions.ValidateBufferedSyncInterval(BufferedSyncInterval);

        if (MaxGroupCommands <= 0 || MaxGroupBytes <= 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(MaxGroupCommands <= 0 ? nameof(MaxGroupCommands)
                : nameof(MaxGroupBytes), Math.Min(MaxGroupCommands, MaxGroupBytes),
                "MaxGroupCommands and MaxGroupBytes must be positive.");
        }

        TransactionMergerOptions.ValidateMaxGroupsInFlight(MaxGroupsInFlight);

        if (MaxSnapshotAge <= TimeSpan.Zero && MaxSnapshotAge != Timeout.InfiniteTimeSpan)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxSnapshotAge), MaxSnapshotAge,
                "MaxSnapshotAge must be positive, or Timeout.InfiniteTimeSpan for no limit.");
        }

        if (MaxSnapshotRetainedBytes != 0 && MaxSnapshotRetainedBytes < MinSnapshotRetainedBytes)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxSnapshotRetainedBytes), MaxSnapshotRetainedBytes,
                $"MaxSnapshotRetainedBytes must be 0 (sized to the memory available) or at least " +
                $"{MinSnapshotRetainedBytes} bytes (1 MiB).");
        }

        if (SlowSyncThreshold <= TimeSpan.Zero)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(SlowSyncThreshold), SlowSyncThreshold,
                "SlowSyncThreshold must be positive.");
        }

        if (CheckpointThreshold < 4096)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CheckpointThreshold), CheckpointThreshold,
                "CheckpointThreshold must be at least 4 KiB.");
        }

        if (CheckpointBackpressureThreshold != 0 && CheckpointBackpressureThreshold < CheckpointThreshold)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CheckpointBackpressureThreshold),
                CheckpointBackpressureThreshold,
                $"CheckpointBackpressureThreshold must be 0 (sized by the store) or at least " +
                $"CheckpointThreshold ({CheckpointThreshold}).");
        }

        if (!(CompactionFillRate is >= 0 and < 1))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CompactionFillRate), CompactionFillRate,
                "CompactionFillRate must be at least 0 (off) and below 1.");
        }

        if (CompactionBytesPerSecond < 64 * 1024)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CompactionBytesPerSecond), CompactionBytesPerSecond,
                "CompactionBytesPerSecond must be at least 64 KiB.");
        }

        ValidateBackupPace(nameof(BackupBytesPerSecond), BackupBytesPerSecond);

        if (MaxChangeFeedLag < 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxChangeFeedLag), MaxChangeFeedLag,
                "MaxChangeFeedLag must be 0 (no hold) or more.");
        }

        if (CacheSize != 0 && CacheSize < MinCacheSize)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CacheSize), CacheSize,
                "CacheSize must be 0 (sized to the memory available) or at least 1 MiB.");
        }

        if (!Enum.IsDefined(DataFileReads))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(DataFileReads), DataFileReads,
                "DataFileReads must be Automatic, Buffered or Direct.");
        }

        if (DocumentCacheSize is { } documentCache && documentCache != 0 && documentCache < MinDocumentCacheSize)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(DocumentCacheSize), documentCache,
                "DocumentCacheSize must be null (a quarter of the cache), 0 (no document cache) or at least 64 KiB.");
        }

        if (CheckpointInterval <= TimeSpan.Zero && CheckpointInterval != Timeout.InfiniteTimeSpan)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(CheckpointInterval), CheckpointInterval,
                "CheckpointInterval must be positive, or Timeout.InfiniteTimeSpan for none.");
        }

        ArgumentNullException.ThrowIfNull(JsonSerializerOptions, nameof(JsonSerializerOptions));
        ArgumentNullException.ThrowIfNull(CollectionName, nameof(CollectionName));
    }

    /// <summary>
    /// The settings a store opens with: a copy of these, validated, so that changing this object afterwards (or
    /// sharing it with another store) does not reach an open store, whose checks ran on the values it keeps. The
    /// <see cref="JsonSerializerOptions"/> stay shared (one metadata cache for every store that uses them) and are
    /// made read-only, as System.Text.Json makes them at their first use anyway.
    /// </summary>
    /// <exception cref="ArgumentOutOfRangeException">A setting is out of range.</exception>
    internal DocumentStoreOptions ForOpen()
    {
        var copy = (DocumentStoreOptions)MemberwiseClone();
        copy.Validate();
        copy.FixedAvailableMemory = copy.AvailableMemory;
        if (!copy.JsonSerializerOptions.IsReadOnly)
        {
            copy.JsonSerializerOptions.MakeReadOnly(populateMissingResolver: true);
        }

        return copy;
    }

    /// <summary>The file system; tests swap in a fault-injecting one.</summary>
    internal Storage.IFileSystem FileSystem { get; set; } = Storage.PhysicalFileSystem.Instance;

    /// <summary>The bytes of memory the defaults are sized to: <see cref="FixedAvailableMemory"/> when set, else the
    /// garbage collector's <see cref="GCMemoryInfo.TotalAvailableMemoryBytes"/> (its heap limit in a container, the
    /// machine's memory otherwise).</summary>
    internal long AvailableMemory => FixedAvailableMemory > 0 ? FixedAvailableMemory
        : Math.Max(64L << 20, GC.GetGCMemoryInfo().TotalAvailableMemoryBytes);

    /// <summary>The memory the defaults are sized to, once fixed: by <see cref="ForOpen"/> (read once, so every
    /// default of a store is sized to the same figure), or by tests, instead of the process's.</summary>
    internal long FixedAvailableMemory { get; set; }

    /// <summary><see cref="CacheSize"/> with its default resolved against <see cref="AvailableMemory"/>.</summary>
    internal long EffectiveCacheSize => CacheSize != 0 ? CacheSize
        : Math.Clamp(AvailableMemory / 8, MinCacheSize, DefaultCacheSize);

    /// <summary>The data file length above which its reads go around the page cache (<see cref="DataFileReads"/>): -1
    /// for direct reads always, <see cref="long.MaxValue"/> for never, else the memory the process may use beyond the
    /// cache of <paramref name="cacheBytes"/>.</summary>
    internal long DirectReadsAbove(long cacheBytes) => DataFileReads switch
    {
        DataFileReadMode.Direct => -1,
        DataFileReadMode.Buffered => long.MaxValue,
        _ => Math.Max(0, AvailableMemory - cacheBytes),
    };

    /// <summary><see cref="DocumentCacheSize"/> with its default resolved against the page cache's size,
    /// <paramref name="cacheBytes"/>.</summary>
    internal long EffectiveDocumentCacheSize(long cacheBytes) => DocumentCacheSize ?? cacheBytes / 4;

    /// <summary><see cref="MaxSnapshotRetainedBytes"/> with its default resolved against
    /// <see cref="AvailableMemory"/>.</summary>
    internal long EffectiveMaxSnapshotRetainedBytes => MaxSnapshotRetainedBytes != 0 ? MaxSnapshotRetainedBytes
        : Math.Clamp(AvailableMemory / 8, MinSnapshotRetainedBytes, DefaultMaxSnapshotRetainedBytes);

    /// <summary><see cref="CheckpointBackpressureThreshold"/> with its default resolved against
    /// <see cref="AvailableMemory"/>.</summary>
    internal long EffectiveBackpressureThreshold => CheckpointBackpressureThreshold != 0
        ? CheckpointBackpressureThreshold
        : Math.Min(CheckpointThreshold > long.MaxValue / 4 ? long.MaxValue : CheckpointThreshold * 4,
            Math.Max(4L << 20, AvailableMemory / 8));

    /// <summary>The journal after the last checkpoint at which a background checkpoint starts:
    /// <see cref="CheckpointThreshold"/>, or half the backpressure threshold when that is its default and sized
    /// below it (a checkpoint starts before commits wait).</summary>
    internal long EffectiveCheckpointThreshold => CheckpointBackpressureThreshold != 0
        ? CheckpointThreshold
        : Math.Min(CheckpointThreshold, EffectiveBackpressureThreshold / 2);

    /// <summary>The memory a checkpoint's rewritten pages may take before background checkpoints start earlier;
    /// commits wait at twice this (see <see cref="CheckpointBackpressureThreshold"/>): an eighth of
    /// <see cref="AvailableMemory"/>, between 4 MiB and 1 GiB, unless a test sets <see cref="TestCheckpointMemory"/>.
    /// </summary>
    internal long CheckpointMemory => TestCheckpointMemory > 0 ? TestCheckpointMemory
        : Math.Clamp(AvailableMemory / 8, 4L << 20, 1L << 30);

    /// <summary>Tests only: <see cref="CheckpointMemory"/>.</summary>
    internal long TestCheckpointMemory { get; set; }

    /// <summary>The journal's zero-fill pieces (see <see cref="JournalOptions.MinFillPiece"/>); tests make them
    /// small.</summary>
    internal long MinFillPiece { get; set; } = Journal.WriteAheadJournal.DefaultMinFillPiece;

    /// <summary>See <see cref="JournalOptions.MaxFillPiece"/>.</summary>
    internal long MaxFillPiece { get; set; } = Journal.WriteAheadJournal.DefaultMaxFillPiece;

    internal JournalOptions ToJournalOptions() => new()
    {
        SegmentSize = SegmentSize,
        LoggerFactory = LoggerFactory,
        FileSystem = FileSystem,
        MinFillPiece = MinFillPiece,
        MaxFillPiece = MaxFillPiece,
    };

    internal TransactionMergerOptions ToMergerOptions() => new()
    {
        Durability = Durability,
        BufferedSyncInterval = BufferedSyncInterval,
        SlowSyncThreshold = SlowSyncThreshold,
        MaxGroupCommands = MaxGroupCommands,
        MaxGroupBytes = MaxGroupBytes,
        MaxGroupsInFlight = MaxGroupsInFlight,
        MaxPendingBytes = Math.Max(64L << 20, MaxGroupBytes),
        LoggerFactory = LoggerFactory,
        MeterFactory = MeterFactory,
    };
}
