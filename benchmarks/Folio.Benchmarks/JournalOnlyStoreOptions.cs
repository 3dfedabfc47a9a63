namespace Folio.Benchmarks;

/// <summary>
/// Options for a store that never checkpoints, so its journal keeps its whole history and an open replays all of it:
/// no checkpoint by journal size, nor at half the backpressure threshold (which the defaults size from the machine's
/// memory), nor on a timer, nor when the checkpoint's changes outgrow their memory, nor at a clean close. Any of them
/// would write a data file and purge the journal behind it.
/// </summary>
internal static class JournalOnlyStoreOptions
{
    private const long OutOfReach = 1L << 50;

    public static DocumentStoreOptions Create(DurabilityMode durability) => new()
    {
        Durability = durability,
        CheckpointThreshold = OutOfReach,
        CheckpointBackpressureThreshold = OutOfReach,
        CheckpointInterval = Timeout.InfiniteTimeSpan,
        TestCheckpointMemory = OutOfReach,
        CheckpointOnClose = false,
    };
}
