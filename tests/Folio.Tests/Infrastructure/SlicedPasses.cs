namespace Folio.Tests.Infrastructure;

/// <summary>
/// Makes a store write its checkpoints in slices at any size (every checkpoint that supersedes more than a quarter of
/// the live pages, the default share) and counts the passes written so, for tests that must see slices happen. The
/// count is read by the test's threads while the checkpoint's thread adds to it (interlocked).
/// </summary>
internal sealed class SlicedPasses
{
    private long _passes;

    private SlicedPasses()
    {
    }

    /// <summary>Passes written in slices so far (counted before each pass's last slice).</summary>
    public long Count => Interlocked.Read(ref _passes);

    /// <summary>Sets <paramref name="options"/> to write in slices and returns the counter of its passes.</summary>
    public static SlicedPasses Of(DocumentStoreOptions options)
    {
        var passes = new SlicedPasses();
        options.MinCheckpointSliceBytes = 1;
        options.TestBeforeSlice = (slice, slices) =>
        {
            if (slice == slices - 1)
            {
                Interlocked.Increment(ref passes._passes);
            }
        };
        return passes;
    }
}
