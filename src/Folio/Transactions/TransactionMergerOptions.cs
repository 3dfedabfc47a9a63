using Microsoft.Extensions.Logging;

namespace Folio.Transactions;

/// <summary>Settings of the transaction merger (group commit), validated when the store opens.</summary>
internal sealed class TransactionMergerOptions
{
    /// <summary>The default of <see cref="MaxGroupCommands"/> (and of the store's option of the same name).</summary>
    public const int DefaultMaxGroupCommands = 1024;

    /// <summary>The default of <see cref="MaxGroupBytes"/> (and of the store's option of the same name): 4
    /// MiB.</summary>
    public const int DefaultMaxGroupBytes = 4 << 20;

    /// <summary>The default of <see cref="BufferedSyncInterval"/> (and of the store's option of the same
    /// name).</summary>
    public static readonly TimeSpan DefaultBufferedSyncInterval = TimeSpan.FromMilliseconds(100);

    /// <summary>The longest <see cref="BufferedSyncInterval"/>: 4,294,967,294 ms (about 49.7 days), a timer's longest
    /// period.</summary>
    internal static readonly TimeSpan MaxBufferedSyncInterval = TimeSpan.FromMilliseconds(uint.MaxValue - 1);

    /// <summary>The default of <see cref="SlowSyncThreshold"/> (and of the store's option of the same name).</summary>
    public static readonly TimeSpan DefaultSlowSyncThreshold = TimeSpan.FromMilliseconds(500);

    /// <summary>The most commands one group (one journal record, one fsync) holds. Default 1024.</summary>
    public int MaxGroupCommands { get; set; } = DefaultMaxGroupCommands;

    /// <summary>The most encoded bytes one group holds. Default 4 MiB. A larger batch commits alone.</summary>
    public int MaxGroupBytes { get; set; } = DefaultMaxGroupBytes;

    /// <summary>
    /// When the first batch of a group is at most this size, the group is capped at its size plus this much, so a
    /// small write is not held behind a big one (as leveldb does). Default 128 KiB.
    /// </summary>
    public int SmallBatchAllowance { get; set; } = 128 << 10;

    /// <summary>The store-wide durability; a batch may override it. Default
    /// <see cref="DurabilityMode.Durable"/>.</summary>
    public DurabilityMode Durability { get; set; } = DurabilityMode.Durable;

    /// <summary>In <see cref="DurabilityMode.Buffered"/> mode, the longest time written commits wait for an fsync.
    /// Default 100 ms; positive, at most about 49.7 days (4,294,967,294 ms).</summary>
    public TimeSpan BufferedSyncInterval { get; set; } = DefaultBufferedSyncInterval;

    /// <summary>Encoded bytes of submitted, not yet committed batches above which submitters wait. Default 64
    /// MiB.</summary>
    public long MaxPendingBytes { get; set; } = 64L << 20;

    /// <summary>How many groups one thread-pool turn of the committer commits before it re-queues itself (a caller
    /// committing inline commits one). Default 16.</summary>
    public int MaxGroupsPerTurn { get; set; } = 16;

    /// <summary>
    /// Before taking the next group, the committer waits for the writers it just acknowledged to submit again, for at
    /// most this fraction of the average fsync duration (and never longer than 20 µs without a new batch): fuller
    /// groups need fewer fsyncs. 0 disables the wait. Default 0.25.
    /// </summary>
    public double GroupFillWait { get; set; } = 0.25;

    /// <summary>The default of <see cref="MaxGroupsInFlight"/> (and of the store's option of the same name):
    /// 1.</summary>
    public const int DefaultMaxGroupsInFlight = 1;

    /// <summary>The most groups <see cref="MaxGroupsInFlight"/> allows: 6.</summary>
    public const int MaxMaxGroupsInFlight = Folio.Journal.JournalSegment.MaxSyncSlots - 2;

    /// <summary>
    /// The most groups between their journal write and their acknowledgement. 1 (the default) commits one group at a
    /// time. With 2 or more, the next group is prepared, written and synced while the previous group's fsync is in
    /// flight (the writers split into that many alternating groups); acknowledgements stay in commit order and follow
    /// durability. Overlapping pays only on devices that flush concurrent fsyncs in parallel: on the benchmark host's
    /// virtual disk, two at once each took about 1.5 times as long, and 64 writers committed 20-30% less
    /// (docs/measurements.md).
    /// </summary>
    public int MaxGroupsInFlight { get; set; } = DefaultMaxGroupsInFlight;

    /// <summary>An fsync slower than this logs a warning. Default 500 ms.</summary>
    public TimeSpan SlowSyncThreshold { get; set; } = DefaultSlowSyncThreshold;

    /// <summary>Logging; null for none.</summary>
    public ILoggerFactory? LoggerFactory { get; set; }

    /// <summary>Metrics; null creates a private <c>Meter("Folio")</c>.</summary>
    public System.Diagnostics.Metrics.IMeterFactory? MeterFactory { get; set; }

    internal void Validate()
    {
        Positive(MaxGroupCommands, nameof(MaxGroupCommands));
        Positive(MaxGroupBytes, nameof(MaxGroupBytes));
        Positive(MaxGroupsPerTurn, nameof(MaxGroupsPerTurn));
        ValidateMaxGroupsInFlight(MaxGroupsInFlight);

        ArgumentOutOfRangeException.ThrowIfNegative(SmallBatchAllowance, nameof(SmallBatchAllowance));
        if (MaxPendingBytes < MaxGroupBytes)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxPendingBytes), MaxPendingBytes,
                "MaxPendingBytes must be at least MaxGroupBytes.");
        }

        if (!(GroupFillWait >= 0 && GroupFillWait <= 1))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(GroupFillWait), GroupFillWait,
                "GroupFillWait must be a fraction between 0 and 1.");
        }

        ValidateBufferedSyncInterval(BufferedSyncInterval);

        if (!Enum.IsDefined(Durability))
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(Durability), Durability, "Unknown durability mode.");
        }
    }

    /// <summary>Throws unless <paramref name="value"/> is a valid <see cref="BufferedSyncInterval"/>: positive, at most
    /// <see cref="MaxBufferedSyncInterval"/> (the store's option validates with it too).</summary>
    internal static void ValidateBufferedSyncInterval(TimeSpan value)
    {
        if (value <= TimeSpan.Zero || value > MaxBufferedSyncInterval)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(BufferedSyncInterval), value,
                "BufferedSyncInterval must be positive and at most 49 days (a timer's longest period).");
        }
    }

    /// <summary>Throws unless <paramref name="value"/> is a valid <see cref="MaxGroupsInFlight"/> (the store's option
    /// validates with it too).</summary>
    internal static void ValidateMaxGroupsInFlight(int value)
    {
        if (value is < 1 or > MaxMaxGroupsInFlight)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(MaxGroupsInFlight), value,
                $"MaxGroupsInFlight must be between 1 and {MaxMaxGroupsInFlight}.");
        }
    }

    private static void Positive(int value, string name)
    {
        if (value <= 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(name, value, $"{name} must be positive.");
        }
    }
}
