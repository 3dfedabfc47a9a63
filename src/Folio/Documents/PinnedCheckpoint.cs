using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// The newest checkpoint of a store's data file (or, for a salvage, the one before it: <see cref="OpenPrevious"/>),
/// mounted read-only (<see cref="PageStore.OpenForReading"/>) and pinned against the process that writes it
/// (<see cref="ReaderPin"/>), for readers of the files of a store another process holds: <see cref="StoreFileScanner"/>
/// and the backup of a held store. Once <see cref="Open"/> returns, no chunk the checkpoint reaches is freed or reused
/// until <see cref="Dispose"/>. One reader owns it.
/// </summary>
internal sealed class PinnedCheckpoint : IDisposable
{
    /// <summary>Mounts attempted before a writer that keeps checkpointing under them is reported.</summary>
    private const int Attempts = 16;

    private PinnedCheckpoint(PageStore? pages, ReaderPin? pin)
    {
        Pages = pages;
        Pin = pin;
    }

    /// <summary>The mounted data file; null for a store that has none yet.</summary>
    public PageStore? Pages { get; }

    /// <summary>The pin; null without a checkpoint, or where no pin can be written (a read-only copy of a store,
    /// which no process writes; where one does, a page it reuses fails its checks: the reader fails, never returns
    /// another document's bytes).</summary>
    public ReaderPin? Pin { get; }

    /// <summary>The checkpoint's sequence: the journal after it completes the store (0 without a checkpoint).</summary>
    public long Sequence => Pages?.Current.Sequence ?? 0;

    /// <summary>Mounts the newest checkpoint of the store at <paramref name="path"/> and pins it; mounts again when a
    /// newer checkpoint became current before the pin was visible (a checkpoint that read the pins meanwhile could
    /// free its chunks), and when a chunk was reused while it was mounted.</summary>
    /// <exception cref="StoreCorruptedException">The newest checkpoint is damaged.</exception>
    public static PinnedCheckpoint Open(string path)
    {
        for (int attempt = 1; ; attempt++)
        {
            PageStore? pages;
            try
            {
                pages = StoreFileInfoReader.OpenDataFile(path);
            }
            catch (StoreCorruptedException) when (attempt < Attempts)
            {
                continue; // a chunk of the header's checkpoint reused while it was mounted (or damage: see the last)
            }

            if (pages?.Current.Header is null)
            {
                return new PinnedCheckpoint(pages, null);
            }

            ReaderPin? pin = TryPin(path, pages);
            if (!StoreFileInfoReader.HeaderMoved(path, pages))
            {
                return new PinnedCheckpoint(pages, pin);
            }

            pin?.Dispose();
            pages.Dispose();
            if (attempt >= Attempts)
            {
                throw new IOException($"The store at '{path}' made a new checkpoint during each of {Attempts} "
                    + "attempts to pin its newest one; try again.");
            }
        }
    }

    /// <summary>Mounts and pins the checkpoint before the newest one (the other header slot's), for a salvage whose
    /// newest checkpoint cannot be mounted; null when the data file holds none. The newest checkpoint's chunks never
    /// overwrite it, and a writer's later checkpoints honour the pin once it is visible; one that checkpoints twice
    /// before that may reuse its chunks, and a page read then fails its checks (reported as damage, never another
    /// page's bytes), so no attempt to remount is made: a newest checkpoint that cannot be mounted has no writer
    /// making newer ones, unless the damage came after the writer read it.</summary>
    public static PinnedCheckpoint? OpenPrevious(string path)
    {
        PageStore? pages = StoreFileInfoReader.OpenDataFile(path, previous: true);
        return pages is null ? null : new PinnedCheckpoint(pages, TryPin(path, pages));
    }

    /// <summary>No checkpoint: for a salvage that can mount neither of the data file's checkpoints, which then reads
    /// the journal alone (<see cref="Sequence"/> 0).</summary>
    public static PinnedCheckpoint Unreadable() => new(null, null);

    private static ReaderPin? TryPin(string path, PageStore pages)
    {
        try
        {
            return ReaderPin.Create(path, pages.Current.Generation, [.. pages.Chunks]);
        }
        catch (Exception e) when (e is UnauthorizedAccessException or IOException)
        {
            return null;
        }
    }

    public void Dispose()
    {
        Pin?.Dispose();
        Pages?.Dispose();
    }
}
