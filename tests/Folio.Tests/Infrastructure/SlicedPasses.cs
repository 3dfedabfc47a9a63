namespace Folio.Tests.Infrastructure;

/// <summary>
/// Makes a store write its checkpoints in slices at any size (every checkpoint that supersedes more than a quarter of
/// the live pages, the default share) and counts the passes written so, for tests that must see slices happen; it can
/// also fail the disk between slices. The count is read by the test's threads while the checkpoint's thread adds to
/// it (interlocked); the slice to fail at is set by the test and read by the checkpoint's thread (volatile).
/// </summary>
internal sealed class SlicedPasses
{
    private long _passes;
    private int _failBefore = -1;

    private SlicedPasses()
    {
    }

    /// <summary>Passes written in slices so far (counted before each pass's last slice).</summary>
    public long Count => Interlocked.Read(ref _passes);

    /// <summary>The slice before which the checkpoint's thread throws an injected <see cref="IOException"/> (1 or
    /// more: the slices before it stay durable), or -1 (default) for none.</summary>
    public int FailBefore
    {
        get => Volatile.Read(ref _failBefore);
        set => Volatile.Write(ref _failBefore, value);
    }

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

            if (slice == passes.FailBefore)
            {
                throw new IOException("injected: the disk failed between slices");
            }
        };
        return passes;
    }
}
