namespace Folio.Pages;

/// <summary>
/// A range read's pin of a checkpoint (<see cref="PageStore.Unpin"/> once). Released by <see cref="Dispose"/> when
/// the read's enumerator is disposed, or by the finalizer when the enumerator was abandoned without that: a query a
/// caller stopped enumerating and dropped would otherwise keep the checkpoint's chunks from ever being reused.
/// Either way exactly once (an interlocked exchange); the finalizer thread only decrements the pin count.
/// </summary>
internal sealed class PageCheckpointLease : IDisposable
{
    private PageCheckpoint? _checkpoint;

    /// <summary>Takes over a pin the caller already holds on <paramref name="pinned"/>.</summary>
    public PageCheckpointLease(PageCheckpoint pinned) => _checkpoint = pinned;

    ~PageCheckpointLease() => Release();

    public void Dispose()
    {
        Release();
        GC.SuppressFinalize(this);
    }

    private void Release()
    {
        if (Interlocked.Exchange(ref _checkpoint, null) is { } checkpoint)
        {
            PageStore.Unpin(checkpoint);
        }
    }
}
