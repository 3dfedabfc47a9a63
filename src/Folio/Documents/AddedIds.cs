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
/// docs/measurements.md), and background merges keep later reads short. The log holds each id as UTF-8 bytes copied
/// into its own chunks, not as a string: a store written fast and never read in order keeps no object per id (and no
/// commit's entry alive for it); the merge makes the strings the sorted list holds.
/// <para>
/// Owners. The committer alone appends (<see cref="Append(ReadOnlySpan{byte})"/>): it stores the id in the tail chunk,
/// then publishes the new count with a release store, so a thread that reads the count (acquire) sees every id below
/// it. Merging, which inserts the ids between the merged count and the appended count into the skip list, runs under
/// <see cref="_mergeLock"/>, so the skip list keeps one writer at a time (the lock orders successive writers); the
/// merged count is published with a release store after the inserts. Readers call <see cref="Sorted"/>: it reads the
/// appended count (acquire), merges up to it when the merged count is behind, and returns the skip list, which they
/// walk without a lock (<see cref="IdSkipList"/>'s protocol). A reader's snapshot was taken before it reads the
/// appended count, and the committer appends a commit's ids before it publishes the commit as visible, so every id of
/// every commit the snapshot sees is in the list the reader walks.
/// </para>
/// <para>
/// Chunks. Appended ids live in chunks of at most <see cref="ChunkSize"/> ids and <see cref="ChunkBytes"/> bytes (a
/// list's first chunks are smaller: <see cref="FirstChunkSize"/>), linked from the oldest not yet merged: the
/// committer writes an id's bytes and its end into the tail chunk, and links a new tail chunk (release) before it
/// publishes a count that reaches into it; the merge moves to the next chunk when the index it takes reaches that
/// chunk's first (read after the count, so the link is there), and drops a chunk once every id in it is merged (only
/// the merge moves <see cref="_mergeHead"/>, under the lock). The committer keeps its own reference to the tail, so
/// dropping merged chunks never races with appends.
/// </para>
/// </summary>
internal sealed class AddedIds
{
    /// <summary>Ids per chunk of the append log at most.</summary>
    internal const int ChunkSize = 1024;

    /// <summary>Bytes of ids per chunk of the append log at most (the longest id always fits an empty chunk).</summary>
    internal const int ChunkBytes = 16 * 1024;

    /// <summary>Ids the first chunk of a list holds; each next chunk holds twice its predecessor's, up to
    /// <see cref="ChunkSize"/>: every collection has a list, and thousands of small collections must not each hold a
    /// whole chunk (20 KiB).</summary>
    internal const int FirstChunkSize = 16;

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
        _tail = new Chunk(0, FirstChunkSize, 0);
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
    public void Append(ReadOnlySpan<byte> utf8Id)
    {
        long index = _appended;
        Chunk tail = _tail;
        if (!tail.TryAdd(utf8Id))
        {
            var next = new Chunk(index, Math.Min(ChunkSize, tail.Capacity * 2), utf8Id.Length);
            next.TryAdd(utf8Id);
            Volatile.Write(ref tail.Next, next); // before the count that reaches into it
            _tail = next;
        }

        Volatile.Write(ref _appended, index + 1);
        if (index + 1 - Volatile.Read(ref _merged) >= BackgroundMergeThreshold
            && Volatile.Read(ref _read) != 0
            && Volatile.Read(ref _mergeScheduled) == 0
            && Interlocked.CompareExchange(ref _mergeScheduled, 1, 0) == 0)
        {
            ThreadPool.UnsafeQueueUserWorkItem(static self => self.MergeInBackground(), this, preferLocal: false);
        }
    }

    /// <summary>Appends an id given as a string (committer only; tests and ids that come as strings).</summary>
    public void Append(string id) => Append(System.Text.Encoding.UTF8.GetBytes(id));

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
                        long index = merged + count;
                        if (Volatile.Read(ref chunk.Next) is { } next && index >= next.First)
                        {
                            chunk = next; // linked before any count reaching into it
                            _mergeHead = chunk;
                            continue;
                        }

                        batch[count++] = chunk.IdAt((int)(index - chunk.First));
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

    /// <summary>A block of the append log: ids [<see cref="First"/>, <see cref="First"/> + the ids it holds), their
    /// UTF-8 bytes back to back. The committer fills it; the merge reads the ids a published count covers.</summary>
    /// <param name="first">The index of its first id in the log.</param>
    /// <param name="capacity">The ids it holds at most (<see cref="ChunkSize"/> at most).</param>
    /// <param name="firstIdBytes">The length of the first id it will take: its bytes have room for it.</param>
    private sealed class Chunk(long first, int capacity, int firstIdBytes)
    {
        public readonly long First = first;
        private readonly byte[] _bytes =
            new byte[Math.Max(firstIdBytes, (int)((long)ChunkBytes * capacity / ChunkSize))];
        private readonly int[] _ends = new int[capacity];
        private int _count; // the committer's
        public Chunk? Next;

        /// <summary>The ids it holds at most.</summary>
        public int Capacity => _ends.Length;

        /// <summary>Committer: adds an id, or returns false when the chunk is full.</summary>
        public bool TryAdd(ReadOnlySpan<byte> id)
        {
            int start = _count == 0 ? 0 : _ends[_count - 1];
            if (_count == _ends.Length || start + id.Length > _bytes.Length)
            {
                return false;
            }

            id.CopyTo(_bytes.AsSpan(start));
            _ends[_count++] = start + id.Length;
            return true;
        }

        /// <summary>The id at <paramref name="slot"/> as a string (a slot a published count covers).</summary>
        public string IdAt(int slot)
        {
            int start = slot == 0 ? 0 : _ends[slot - 1];
            return System.Text.Encoding.UTF8.GetString(_bytes, start, _ends[slot] - start);
        }
    }
}
