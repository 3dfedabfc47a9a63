namespace Folio.Benchmarks;

/// <summary>
/// Sizes the benchmarks run with, compiled into both the benchmarks and the report tool, so the report's prose is
/// generated from the numbers the code uses.
/// </summary>
internal static class BenchmarkConstants
{
    /// <summary>Commits per iteration of the group-commit benchmark's Folio methods, the batched SQLite and the raw
    /// loop.</summary>
    public const int GroupCommitCommits = 32_768;

    /// <summary>Commits per iteration of the group-commit peers that commit one at a time (SQLite with a connection
    /// per writer, LiteDB).</summary>
    public const int GroupCommitPeerCommits = 2_048;

    /// <summary>Measured iterations of every group-commit case in each of its rounds.</summary>
    public const int GroupCommitIterations = 4;

    /// <summary>Interleaved rounds of the group-commit benchmark (<c>InterleavedRoundsOrderer</c>).</summary>
    public const int GroupCommitRounds = 4;

    /// <summary>The parameter that numbers a class's interleaved rounds (1, 2, ...): the orderer runs by it, the
    /// report pools over it.</summary>
    public const string RoundParameter = "Round";

    /// <summary>Seconds each group-commit case runs before BenchmarkDotNet's own warm-up.</summary>
    public const int GroupCommitWarmUpSeconds = 5;

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
