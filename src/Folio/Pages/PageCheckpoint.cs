namespace Folio.Pages;

/// <summary>
/// The state a checkpoint made durable: its generation, the sequence C it covers (every commit at or below C is in
/// its trees, none above but where a tree is ahead: <see cref="CollectionTree.AheadSequence"/>), and its collections'
/// trees. Immutable once published.
/// <para>
/// Protocol. Readers that may read pages from disk pin the checkpoint they read (<see cref="PageStore.Pin"/>): the
/// pin is an interlocked increment followed by a re-read of the store's current checkpoint, and the checkpoint's
/// thread publishes a new checkpoint with an interlocked exchange before it looks at older checkpoints' pins, so
/// (both sides fenced) either the reader sees the new checkpoint and retries, or the checkpoint's thread sees the pin
/// and keeps the chunks the pinned checkpoint reaches.
/// </para>
/// </summary>
internal sealed class PageCheckpoint
{
    private static readonly Dictionary<string, CollectionTree> s_none = new(StringComparer.Ordinal);
    private int _pins;

    public PageCheckpoint(long generation, long sequence, IReadOnlyDictionary<string, CollectionTree> collections)
    {
        Generation = generation;
        Sequence = sequence;
        Collections = collections;
        foreach (CollectionTree tree in collections.Values)
        {
            _treesAhead |= tree.AheadSequence > 0;
        }
    }

    private readonly bool _treesAhead;

    /// <summary>The state of a data file no checkpoint has written yet.</summary>
    public static PageCheckpoint Empty { get; } = new(0, 0, s_none);

    /// <summary>The checkpoint's number (0: none yet).</summary>
    public long Generation { get; }

    /// <summary>Every commit up to and including this sequence is in the trees (and, for the ids a tree is ahead
    /// for, every commit up to its <see cref="CollectionTree.AheadSequence"/>).</summary>
    public long Sequence { get; }

    /// <summary>Whether a tree is ahead of <see cref="Sequence"/> for some ids: a slice of a
    /// <see cref="CheckpointPass"/> other than its last. A backup, which restores to points in time from the
    /// checkpoint's sequence on, waits for a checkpoint that is not.</summary>
    public bool IsPartial => PassSequence > 0 || _treesAhead;

    /// <summary>For a slice of a <see cref="CheckpointPass"/> (or a checkpoint below its sequence since), the pass's
    /// sequence: some of the trees may hold versions up to it (a collection a slice emptied has no tree left to carry
    /// a mark); 0 otherwise. Kept in the catalog (<see cref="CatalogEntry.PassName"/>).</summary>
    public long PassSequence { get; init; }

    /// <summary>The sequence whose state the trees hold for <paramref name="id"/> of
    /// <paramref name="collection"/>.</summary>
    public long SequenceOf(string collection, string id) =>
        Collections.TryGetValue(collection, out CollectionTree? tree) ? tree.SequenceOf(id, Sequence) : Sequence;

    public IReadOnlyDictionary<string, CollectionTree> Collections { get; }

    /// <summary>The header slot that made the checkpoint current: its chunk's id and place (null for
    /// <see cref="Empty"/>). A backup copies the chunks that chunk's table lists and writes this header.</summary>
    public DataFileHeader? Header { get; init; }

    /// <summary>Readers holding the checkpoint.</summary>
    public int Pins => Volatile.Read(ref _pins);

    internal int AddPin() => Interlocked.Increment(ref _pins);

    internal int RemovePin() => Interlocked.Decrement(ref _pins);
}
