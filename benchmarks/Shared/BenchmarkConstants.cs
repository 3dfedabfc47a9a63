namespace Folio.Benchmarks;

/// <summary>
/// Sizes the benchmarks run with, compiled into both the benchmarks and the report tool, so the report's prose is
/// generated from the numbers the code uses.
/// </summary>
internal static class BenchmarkConstants
{
    /// <summary>Documents in the point-read benchmarks' stores.</summary>
    public const int PointReadDocuments = 100_000;

    /// <summary>Documents in the mixed (YCSB-style) workloads' stores.</summary>
    public const int MixedDocuments = 10_000;

    /// <summary>Concurrent workers of the mixed workloads.</summary>
    public const int MixedWorkers = 16;

    /// <summary>Documents of about 1 KiB in the larger-than-memory stores: about 4 GiB.</summary>
    public const int LargerThanMemoryDocuments = 4_000_000;

    /// <summary>The cache every peer gets in the larger-than-memory benchmarks, in MiB.</summary>
    public const int LargerThanMemoryCacheMiB = 256;

    /// <summary>Documents of about 1 KiB in the prefetch benchmarks' store (about 230 MB).</summary>
    public const int PrefetchDocuments = 200_000;

    /// <summary>Rounds of 1,000 random overwrites, each checkpointed, that scatter the prefetch store's
    /// leaves.</summary>
    public const int PrefetchUpdateRounds = 40;

    /// <summary>Documents of about 1 KiB in the backup benchmarks' store (about 1 GiB).</summary>
    public const int BackupDocuments = 900_000;

    /// <summary>Documents of about 1 KiB the compaction benchmark overwrites at random.</summary>
    public const int CompactionDocuments = 100_000;
}
