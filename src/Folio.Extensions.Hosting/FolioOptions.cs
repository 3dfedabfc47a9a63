using Folio.Transactions;

namespace Folio.Extensions.Hosting;

/// <summary>
/// Folio's settings in a host, bound from configuration (for example the <c>Folio</c> section of appsettings.json)
/// and validated when the host starts. Each bindable property maps to the <see cref="DocumentStoreOptions"/> property
/// of the same name and has the same default.
/// </summary>
/// <example>
/// <code>
/// "Folio": { "Path": "data/folio", "Durability": "Durable", "SegmentSize": 33554432 }
/// </code>
/// </example>
public sealed class FolioOptions
{
    // The store's own defaults, so the two option types cannot drift apart.
    private static readonly DocumentStoreOptions s_storeDefaults = new();

    /// <summary>The configuration section <c>AddFolio(IConfiguration)</c> is usually given: <c>Folio</c>.</summary>
    public const string SectionName = "Folio";

    /// <summary>The store's folder, absolute or relative to the host's content root
    /// (<c>IHostEnvironment.ContentRootPath</c>: the application's folder under systemd or as a Windows service, the
    /// current directory under <c>dotnet run</c>), or to the current directory where no host environment is
    /// registered. Required.</summary>
    public string? Path { get; set; }

    /// <summary>When commits are acknowledged. Default <see cref="DurabilityMode.Durable"/> (after fsync).</summary>
    public DurabilityMode Durability { get; set; } = s_storeDefaults.Durability;

    /// <summary>Size of one journal segment file in bytes. Default 32 MiB.</summary>
    public long SegmentSize { get; set; } = s_storeDefaults.SegmentSize;

    /// <summary>The most commands one commit group holds. Default 1024.</summary>
    public int MaxGroupCommands { get; set; } = s_storeDefaults.MaxGroupCommands;

    /// <summary>The most bytes one commit group holds. Default 4 MiB.</summary>
    public int MaxGroupBytes { get; set; } = s_storeDefaults.MaxGroupBytes;

    /// <summary>The most commit groups between their journal write and their acknowledgement. Default 1; see
    /// <see cref="DocumentStoreOptions.MaxGroupsInFlight"/>.</summary>
    public int MaxGroupsInFlight { get; set; } = s_storeDefaults.MaxGroupsInFlight;

    /// <summary>The largest document, in UTF-8 bytes. Default 16 MiB.</summary>
    public int MaxDocumentSize { get; set; } = s_storeDefaults.MaxDocumentSize;

    /// <summary>In <see cref="DurabilityMode.Buffered"/> mode, the longest time between two background fsyncs.
    /// Default 100 ms.</summary>
    public TimeSpan BufferedSyncInterval { get; set; } = s_storeDefaults.BufferedSyncInterval;

    /// <summary>An fsync slower than this logs a warning. Default 500 ms.</summary>
    public TimeSpan SlowSyncThreshold { get; set; } = s_storeDefaults.SlowSyncThreshold;

    /// <summary>How long a session's snapshot may hold back the pruning of old versions. Default 10 minutes; see
    /// <see cref="DocumentStoreOptions.MaxSnapshotAge"/>.</summary>
    public TimeSpan MaxSnapshotAge { get; set; } = s_storeDefaults.MaxSnapshotAge;

    /// <summary>Bytes of old versions the oldest open snapshots may keep before they expire. Default 0: 256 MiB, or
    /// an eighth of the memory the process may use when that is less; see
    /// <see cref="DocumentStoreOptions.MaxSnapshotRetainedBytes"/>.</summary>
    public long MaxSnapshotRetainedBytes { get; set; } = s_storeDefaults.MaxSnapshotRetainedBytes;

    /// <summary>Journal bytes after the last checkpoint that start a background checkpoint. Default 64 MiB; see
    /// <see cref="DocumentStoreOptions.CheckpointThreshold"/>.</summary>
    public long CheckpointThreshold { get; set; } = s_storeDefaults.CheckpointThreshold;

    /// <summary>Journal bytes after the last checkpoint at which new commits wait for a checkpoint (backpressure).
    /// Default 0: four times <see cref="CheckpointThreshold"/>, or less in a process with less memory; see
    /// <see cref="DocumentStoreOptions.CheckpointBackpressureThreshold"/>.</summary>
    public long CheckpointBackpressureThreshold { get; set; } = s_storeDefaults.CheckpointBackpressureThreshold;

    /// <summary>The memory for pages of the data file (the buffer pool), in bytes. Default 0: 256 MiB, or an eighth
    /// of the memory the process may use when that is less; otherwise at least 1 MiB; see
    /// <see cref="DocumentStoreOptions.CacheSize"/>.</summary>
    public long CacheSize { get; set; } = s_storeDefaults.CacheSize;

    /// <summary>The memory for documents that point reads found in the data file, in bytes. Default null: a quarter of
    /// <see cref="CacheSize"/>; 0 for none, else at least 64 KiB; see
    /// <see cref="DocumentStoreOptions.DocumentCacheSize"/>.</summary>
    public long? DocumentCacheSize { get; set; } = s_storeDefaults.DocumentCacheSize;

    /// <summary>Read ahead for bounded range reads. Default true; see
    /// <see cref="DocumentStoreOptions.RangePrefetch"/>.</summary>
    public bool RangePrefetch { get; set; } = s_storeDefaults.RangePrefetch;

    /// <summary>How the store reads the pages of its data file that its cache misses: around the operating system's
    /// page cache or through it. Default <see cref="DataFileReadMode.Automatic"/>; see
    /// <see cref="DocumentStoreOptions.DataFileReads"/>.</summary>
    public DataFileReadMode DataFileReads { get; set; } = s_storeDefaults.DataFileReads;

    /// <summary>The longest time between checkpoints while commits arrive. Default 10 minutes; see
    /// <see cref="DocumentStoreOptions.CheckpointInterval"/>.</summary>
    public TimeSpan CheckpointInterval { get; set; } = s_storeDefaults.CheckpointInterval;

    /// <summary>How far, in bytes of journal, an open change-feed stream may fall behind the last checkpoint and still
    /// read every change. Default 256 MiB; 0 for no hold; see <see cref="DocumentStoreOptions.MaxChangeFeedLag"/>.
    /// </summary>
    public long MaxChangeFeedLag { get; set; } = s_storeDefaults.MaxChangeFeedLag;

    /// <summary>The most bytes an online backup sends per second. Default 256 MiB; 0 for no limit, else at least
    /// 1 MiB; see <see cref="DocumentStoreOptions.BackupBytesPerSecond"/>.</summary>
    public long BackupBytesPerSecond { get; set; } = s_storeDefaults.BackupBytesPerSecond;

    /// <summary>The health check reports <c>Degraded</c> when the average fsync duration exceeds this. Default
    /// 100 ms; positive.</summary>
    public TimeSpan DegradedSyncLatency { get; set; } = TimeSpan.FromMilliseconds(100);

    /// <summary>
    /// Sets store options that configuration cannot carry (a <c>JsonSerializerOptions</c> with a source-generated
    /// context, collection naming). Runs after the bound values are copied and before the store opens; the logger and
    /// meter factories come from the container unless it sets them. Null by default.
    /// </summary>
    public Action<DocumentStoreOptions>? ConfigureStore { get; set; }

    /// <summary>The store options these settings describe, with the container's logging and metrics.</summary>
    internal DocumentStoreOptions ToStoreOptions(Microsoft.Extensions.Logging.ILoggerFactory? loggerFactory,
        System.Diagnostics.Metrics.IMeterFactory? meterFactory)
    {
        var options = new DocumentStoreOptions
        {
            Durability = Durability,
            SegmentSize = SegmentSize,
            MaxGroupCommands = MaxGroupCommands,
            MaxGroupBytes = MaxGroupBytes,
            MaxGroupsInFlight = MaxGroupsInFlight,
            MaxDocumentSize = MaxDocumentSize,
            BufferedSyncInterval = BufferedSyncInterval,
            SlowSyncThreshold = SlowSyncThreshold,
            MaxSnapshotAge = MaxSnapshotAge,
            MaxSnapshotRetainedBytes = MaxSnapshotRetainedBytes,
            CheckpointThreshold = CheckpointThreshold,
            CacheSize = CacheSize,
            DocumentCacheSize = DocumentCacheSize,
            RangePrefetch = RangePrefetch,
            DataFileReads = DataFileReads,
            CheckpointInterval = CheckpointInterval,
            CheckpointBackpressureThreshold = CheckpointBackpressureThreshold,
            MaxChangeFeedLag = MaxChangeFeedLag,
            BackupBytesPerSecond = BackupBytesPerSecond,
            LoggerFactory = loggerFactory,
            MeterFactory = meterFactory,
        };
        ConfigureStore?.Invoke(options);
        return options;
    }
}
