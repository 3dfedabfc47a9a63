using System.Buffers;

namespace Folio.Documents;

/// <summary>
/// The ids of one collection a range read merges with the collection's tree (ids added since the open, or since the
/// list was last rebuilt from the heads: <c>VersionedIndex.TrimAddedIds</c>): appended in commit order by the
/// committer in O(1), and sorted into an <see cref="IdSkipList"/> later, off the commit path, by whoever needs the
/// order first (a range or prefix read, a count) or, once a reader has asked for the order, by a background merge
/// whenever enough ids are waiting. A store that is written fast and read by key pays no ordered insert on its
/// serial commit path, and none at all until it reads in order: the first ordered read of a collection sorts what
/// waits (a one-time pause that grows with the ids waiting, at most those added since the last trim; see
/// docs/measurements.md), and background merges keep later reads short.
/// <para>
/// Owners. The committer alone appends (<see cref="Append"/>): it stores the id in the tail chunk, then publishes the
/// new count with a release store, so a thread that reads the count (acquire) sees every id below it. Merging, which
/// inserts the ids between the merged count and the appended count into the skip list, runs under
/// <see cref="_mergeLock"/>, so the skip list keeps one writer at a time (the lock orders successive writers); the
/// merged count is published with a release store after the inserts. Readers call <see cref="Sorted"/>: it reads the
/// appended count (acquire), merges up to it when the merged count is behind, and returns the skip list, which they
/// walk without a lock (<see cref="IdSkipList"/>'s protocol). A reader's snapshot was taken before it reads the
/// appended count, and the committer appends a commit's ids before it publishes the commit as visible, so every id of
/// every commit the snapshot sees is in the list the reader walks.
/// </para>
/// <para>
/// Chunks. Appended ids live in chunks of <see cref="ChunkSize"/> linked from the oldest not yet merged: the committer
/// links a new tail chunk (release) before it publishes a count that reaches into it, and the merge drops a chunk once
/// every id in it is merged (only the merge moves <see cref="_mergeHead"/>, under the lock). The committer keeps its
/// own reference to the tail, so dropping merged chunks never races with appends.
/// </para>
/// </summary>
internal sealed class AddedIds
{
    /// <summary>Ids per chunk of the append log.</summary>
    internal const int ChunkSize = 1024;

    /// <summary>Waiting ids at which the committer schedules a background merge (a reader merges whatever
    /// waits).</summary>
    internal const int BackgroundMergeThreshold = 4 * ChunkSize;

    /// <summary>Chunks one merge step sorts and inserts together (a larger batch puts its ids closer together in the
    /// list, so each insert starts nearer its place, but its sort misses the cache more; docs/measurements.md has the
    /// sizes tried).</summary>
    private const int MergeBatchChunks = 16;

    private readonly IdSkipList _sorted = new();
    private readonly Lock _mergeLock = new();
    private Chunk _tail; // committer only
    private Chunk _mergeHead; // under _mergeLock: the chunk holding the first id not merged
    private long _appended; // written by the committer (release), read by all (acquire)
    private long _merged; // written under _mergeLock (release), read by all (acquire)
    private int _mergeScheduled; // 1 while a background merge is queued or running
    private int _read; // 1 once a reader asked for the sorted ids (release by the reader, acquire by the committer)

    /// <param name="readBefore">Whether the collection's sorted ids were asked for already (by the list this one
    /// replaces), so background merges run from the start.</param>
    public AddedIds(bool readBefore = false)
    {
        _tail = new Chunk(0);
        _mergeHead = _tail;
        _read = readBefore ? 1 : 0;
    }

    /// <summary>Whether a reader has asked for the sorted ids (<see cref="Sorted"/>): from then on, background merges
    /// keep the waiting ids few.</summary>
    public bool WasRead => Volatile.Read(ref _read) != 0;

    /// <summary>Ids appended so far.</summary>
    public long Count => Volatile.Read(ref _appended);

    /// <summary>Ids sorted into the skip list so far (tests and diagnostics).</summary>
    public long MergedCount => Volatile.Read(ref _merged);

    /// <summary>Appends an id (committer only); one the list holds already is merged once.</summary>
    public void Append(string id)
    {
        long index = _appended;
        int slot = (int)(index - _tail.First);
        if (slot == ChunkSize)
        {
            var next = new Chunk(index);
            Volatile.Write(ref _tail.Next, next);
            _tail = next;
            slot = 0;
        }

        _tail.Ids[slot] = id;
        Volatile.Write(ref _appended, index + 1);
        if (index + 1 - Volatile.Read(ref _merged) >= BackgroundMergeThreshold
            && Volatile.Read(ref _read) != 0
            && Volatile.Read(ref _mergeScheduled) == 0
            && Interlocked.CompareExchange(ref _mergeScheduled, 1, 0) == 0)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static self => self.MergeInBackground(), this, preferLocal: false);
        }
    }

    /// <summary>
    /// The ids in ordinal order, with every id appended before this call merged in (ids appended meanwhile may be
    /// walked too: a reader skips those its snapshot does not see).
    /// </summary>
    public IdSkipList Sorted()
    {
        if (Volatile.Read(ref _read) == 0)
        {
            Volatile.Write(ref _read, 1);
        }

        if (Volatile.Read(ref _merged) < Volatile.Read(ref _appended))
        {
            Merge();
        }

        return _sorted;
    }

    private void MergeInBackground()
    {
        Merge();
        Volatile.Write(ref _mergeScheduled, 0);
    }

    /// <summary>
    /// Inserts every id appended so far that is not merged yet, under the merge lock: up to
    /// <see cref="MergeBatchChunks"/> chunks at a time, sorted first and inserted in order
    /// (<see cref="IdSkipList.AddSorted"/>), each batch's progress published (release) once all of it is in.
    /// </summary>
    private void Merge()
    {
        lock (_mergeLock)
        {
            long appended = Volatile.Read(ref _appended);
            long merged = _merged;
            if (merged >= appended)
            {
                return;
            }

            int most = (int)Math.Min(appended - merged, MergeBatchChunks * ChunkSize);
            string[] batch = ArrayPool<string>.Shared.Rent(most);
            try
            {
                while (merged < appended)
                {
                    int count = 0;
                    Chunk chunk = _mergeHead;
                    while (merged + count < appended && count < batch.Length)
                    {
                        int slot = (int)(merged + count - chunk.First);
                        if (slot == ChunkSize)
                        {
                            chunk = Volatile.Read(ref chunk.Next)!; // linked before any count reaching into it
                            _mergeHead = chunk;
                            continue;
                        }

                        batch[count++] = chunk.Ids[slot];
                        chunk.Ids[slot] = null!; // taken: the log no longer holds it
                    }

                    Span<string> ids = batch.AsSpan(0, count);
                    ids.Sort(string.CompareOrdinal);
                    _sorted.AddSorted(ids);
                    ids.Clear();
                    merged += count;
                    Volatile.Write(ref _merged, merged); // publish per batch, so readers see progress early
                }
            }
            finally
            {
                ArrayPool<string>.Shared.Return(batch, clearArray: true);
            }
        }
    }

    /// <summary>A block of the append log: ids [<see cref="First"/>, <see cref="First"/> +
    /// <see cref="ChunkSize"/>).</summary>
    private sealed class Chunk(long first)
    {
        public readonly long First = first;
        public readonly string[] Ids = new string[ChunkSize];
        public Chunk? Next;
    }
}
