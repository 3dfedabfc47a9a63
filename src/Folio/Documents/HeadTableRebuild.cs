namespace Folio.Documents;

/// <summary>
/// Builds the <see cref="HeadTable"/> that replaces a collection's heads after a checkpoint: every id of the source
/// table but the evicted ones, each with the versions down to the one visible at the oldest open snapshot; every other
/// record is left behind with the source table. It runs beside the table's writer, so commits go on while it copies,
/// and the writer waits only for the last few records.
/// <para>
/// Owners and protocol. The checkpoint's thread owns the rebuild and the new table, which no reader sees until the
/// index publishes it. The source table's writer (the committer) keeps appending and publishing records meanwhile; the
/// rebuild reads the source as readers do (<see cref="HeadTable"/>'s protocol). It starts while the caller holds the
/// writer's lock, so every record appended so far is also published, and reads the source's record count: every change
/// the writer makes after that appends a record after it (a record appended before the start but published after it
/// would be missed: the writer appends a version, then publishes it, so the start must not fall between the two). It
/// then copies the ids it sees in the source's id table, each one's newest record as it reads it, with that record's
/// chain (<see cref="CopyHeads"/>); an id inserted, or a head replaced, after its slot was read is a record after the
/// count. <see cref="CatchUp"/> replays those records in order: each version a commit wrote becomes its id's newest in
/// the new table, with its chain. The caller runs it once beside the writer, then again holding the index's write lock,
/// which stops the writer: the second pass replays what the first missed, up to the last record the writer appended,
/// and the caller publishes the new table before it releases the lock. So the new table holds, for every id, the
/// source's newest version at the moment of publication (an evicted id only when no commit wrote it since the candidate
/// was matched: a later write's replay puts it back with its chain).
/// </para>
/// <para>
/// Versions. A chain is copied from the newest version down to the first one at or below
/// <see cref="_oldest"/> (<see cref="DocumentStoreOptions.MaxSnapshotAge"/> aside, the oldest sequence an open or
/// future snapshot can read at): nothing below it is reachable. A version the writer pruned while the rebuild read its
/// chain may be copied anyway, which keeps a version no snapshot needs until the next rebuild, never loses one.
/// </para>
/// </summary>
internal sealed class HeadTableRebuild
{
    private readonly HeadTable _source;
    private readonly long _oldest;
    private readonly int _start;
    private HeadTable? _target; // created once the evictions are known, sized for the ids it keeps
    private readonly List<int> _chain = [];
    private readonly bool[] _evicted;
    private int[] _copies; // the new table's reference of each source record copied so far (0: not copied)
    private int _replayed;
    private int _evictedCount;

    /// <summary>Starts a rebuild of <paramref name="source"/>; the caller holds the writer's lock (see the
    /// protocol).</summary>
    /// <param name="source">The collection's current heads.</param>
    /// <param name="oldest">The oldest sequence an open snapshot reads at (at most the visible sequence).</param>
    public HeadTableRebuild(HeadTable source, long oldest)
    {
        _source = source;
        _oldest = oldest;
        _start = source.RecordCount; // every change after this appends a record after it
        _replayed = _start;
        _evicted = new bool[_start + 1];
        _copies = new int[_start + 1];
    }

    /// <summary>The heads being rebuilt.</summary>
    public HeadTable Source => _source;

    /// <summary>Ids marked for eviction.</summary>
    public int EvictedCount => _evictedCount;

    /// <summary>The new table (the caller publishes it after the last <see cref="CatchUp"/>).</summary>
    public HeadTable Result => Target;

    private HeadTable Target => _target ??= HeadTable.WithRoomFor(Math.Max(0, _source.Count - _evictedCount));

    /// <summary>Leaves out the id whose newest record is <paramref name="head"/> (read from <see cref="Source"/>
    /// after this rebuild started), unless a commit writes the id again before the rebuild ends. A record appended
    /// after the start is never evicted: its commit is newer than any checkpoint the candidate came from.</summary>
    /// <returns>Whether the id was marked now (false: marked already, or not evictable).</returns>
    public bool Evict(int head)
    {
        if (head > _start || _evicted[head])
        {
            return false;
        }

        _evicted[head] = true;
        _evictedCount++;
        return true;
    }

    /// <summary>Copies every id of the source's id table as it reads it, but the evicted ones (beside the
    /// writer).</summary>
    public void CopyHeads()
    {
        long[] slots = _source.Slots;
        for (int i = 0; i < slots.Length; i++)
        {
            int head = (int)Volatile.Read(ref slots[i]);
            if (head == 0 || (head <= _start && _evicted[head]))
            {
                continue;
            }

            Target.Put(Copy(head));
        }
    }

    /// <summary>Replays every record the source's writer appended since the last call (since the start, the first
    /// time): each version a commit wrote becomes its id's newest in the new table. Beside the writer, or holding the
    /// index's write lock for the last pass.</summary>
    public void CatchUp()
    {
        int end = _source.RecordCount;
        for (int reference = _replayed + 1; reference <= end; reference++)
        {
            if (_source.Record(reference).IdOffset >= 0)
            {
                Target.Put(Copy(reference)); // an older version without an id is copied with the head it hangs off
            }
        }

        _replayed = end;
        Target.BuiltRecords = Target.RecordCount;
    }

    /// <summary>Copies the source record <paramref name="reference"/> with its chain down to the version visible at
    /// <see cref="_oldest"/>, reusing records copied already; returns the copy's reference.</summary>
    private int Copy(int reference)
    {
        _chain.Clear();
        int next = reference;
        int older = 0;
        while (next != 0)
        {
            if (CopyOf(next) is int copied and not 0)
            {
                older = copied;
                break;
            }

            _chain.Add(next);
            if (_source.Record(next).Sequence <= _oldest)
            {
                break; // the version the oldest snapshot sees: nothing older is reachable
            }

            next = _source.OlderOf(next);
        }

        for (int i = _chain.Count - 1; i >= 0; i--)
        {
            HeadRecord copy = _source.Record(_chain[i]);
            copy.Older = older;
            older = Target.Append(copy);
            SetCopy(_chain[i], older);
        }

        return older;
    }

    private int CopyOf(int reference) => reference < _copies.Length ? _copies[reference] : 0;

    private void SetCopy(int reference, int copy)
    {
        if (reference >= _copies.Length)
        {
            Array.Resize(ref _copies, Math.Max(reference + 1, _copies.Length * 2));
        }

        _copies[reference] = copy;
    }
}
