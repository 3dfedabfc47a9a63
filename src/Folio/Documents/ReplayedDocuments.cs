using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Folio.Journal;
using Folio.Storage;
using Folio.Transactions;

namespace Folio.Documents;

/// <summary>
/// The live documents of one collection as recovery replay left them, in arrays instead of objects: the base layer of
/// the collection in the <see cref="VersionedIndex"/>, under the versions committed since the open.
/// <para>
/// Why arrays. A replay builds every document's state at once, all of it long-lived: as one version object, one
/// dictionary node and one sorted-list node per document, a 200,000-document open allocated about 50 MB of small
/// objects that the collector copied from generation to generation while the open ran (8-10 collections per open with
/// the default collectors), and each copy landed on fresh pages, which a virtual machine that backs memory lazily
/// charges per page. Here a document costs one object (its id string) plus slots in a few large arrays, which the
/// collector never copies; its <see cref="DocumentVersion"/> is made from them when it is read.
/// </para>
/// <para>
/// Protocol. Built by one thread during the bulk load (<see cref="Builder"/>), before any reader exists, and never
/// changed afterwards except for one thing, per slot:
/// <list type="bullet">
/// <item>The committer (the index's only writer), when it first commits a newer version of a replayed document, puts
/// the new version in the collection's heads (with the replayed version as its older version) and only then marks the
/// slot shadowed (<see cref="Shadow"/>, a release write), before it publishes the batch's sequence. A reader looks at
/// the mark (acquire) after taking its snapshot: a snapshot that includes the newer version was published after the
/// mark, so the reader sees the mark and reads the heads, which hold the newer version. A reader that sees no mark
/// returns the replayed version, which is correct for it: every version above the replayed one is above its snapshot.
/// The replayed version is visible to every snapshot: each was taken at or after the end of the replay.</item>
/// </list>
/// The id dictionary is only read after the build, which the framework allows from any number of threads at once.
/// </para>
/// </summary>
internal sealed class ReplayedDocuments
{
    private readonly Dictionary<string, int> _slots;
    private readonly long[] _sequences;
    private readonly long[] _timestamps;
    private readonly ReadOnlyMemory<byte>[] _values;
    private readonly int[] _shadowed;
    private readonly bool[]? _deleted;

    private ReplayedDocuments(Dictionary<string, int> slots, long[] sequences, long[] timestamps,
        ReadOnlyMemory<byte>[] values, string[] sortedIds, bool[]? deleted)
    {
        _deleted = deleted;
        _slots = slots;
        _sequences = sequences;
        _timestamps = timestamps;
        _values = values;
        _shadowed = new int[values.Length];
        SortedIds = sortedIds;
    }

    /// <summary>The ids of the replayed documents, in ordinal order (never changed); deleted ones included when the
    /// collection keeps tombstones (it has a checkpointed tree whose document a replayed delete hides).</summary>
    public string[] SortedIds { get; }

    /// <summary>The slot of replayed document <paramref name="id"/>, if there is one.</summary>
    public bool TryGetSlot(string id, out int slot) => _slots.TryGetValue(id, out slot);

    /// <summary>Whether the heads hold a newer version of the document in <paramref name="slot"/> (acquire).</summary>
    public bool IsShadowed(int slot) => Volatile.Read(ref _shadowed[slot]) != 0;

    /// <summary>
    /// Marks <paramref name="slot"/> shadowed (release): the writer calls it once per slot, after putting the newer
    /// version in the heads.
    /// </summary>
    public void Shadow(int slot) => Volatile.Write(ref _shadowed[slot], 1);

    /// <summary>The sequence of the replayed version in <paramref name="slot"/>.</summary>
    public long SequenceAt(int slot) => _sequences[slot];

    /// <summary>The replayed version of the document in <paramref name="slot"/>.</summary>
    public DocumentVersion VersionAt(int slot) =>
        new(_sequences[slot], _timestamps[slot], _values[slot], isDeleted: _deleted is not null && _deleted[slot]);

    /// <summary>
    /// Collects one collection's replayed commands (single-threaded) and builds its <see cref="ReplayedDocuments"/>.
    /// A put records where its value lies in the journal (segment, offset, length) in the id's slot, replacing what an
    /// earlier put of the id recorded, so an overwritten value is never copied; a delete frees the id (its slot stays,
    /// dead). At the end the values of the live slots are copied into slabs (two halves that may run in parallel) and
    /// the live ids sorted.
    /// </summary>
    internal sealed class Builder
    {
        // A value's place in the journal: the segment's number in _segments (high 24 bits) and the offset in it.
        private const int OffsetBits = 40;
        private const int Dead = -1;
        private const int Tombstone = -2;

        private readonly Dictionary<string, int> _slots;
        private readonly List<JournalDataLocation> _segments = []; // the start of each segment values lie in
        private JournalDataLocation _lastSegment;
        private string[] _ids;
        private long[] _sequences;
        private long[] _timestamps;
        private long[] _locations;
        private int[] _lengths; // Dead: the slot's id was deleted (slot freed); Tombstone: deleted, slot kept
        private readonly bool _keepTombstones;
        private int _count;
        private bool _anyDeleted;
        private ReadOnlyMemory<byte>[] _values = [];
        private string[] _sortedIds = [];

        /// <param name="capacity">The expected number of distinct ids (the puts counted for the collection,
        /// capped).</param>
        /// <param name="keepTombstones">Whether a delete keeps its id as a deleted version (the collection has a
        /// checkpointed tree whose document the delete must hide) rather than freeing it.</param>
        public Builder(int capacity, bool keepTombstones = false)
        {
            _keepTombstones = keepTombstones;
            capacity = Math.Max(capacity, 16);
            _slots = new Dictionary<string, int>(capacity, StringComparer.Ordinal);
            _ids = new string[capacity];
            _sequences = NewArray<long>(capacity);
            _timestamps = NewArray<long>(capacity);
            _locations = NewArray<long>(capacity);
            _lengths = NewArray<int>(capacity);
        }

        /// <summary>Slots used so far (live and dead).</summary>
        public int SlotCount => _count;

        /// <summary>Records a put of <paramref name="id"/> whose value is the <paramref name="length"/> bytes at
        /// <paramref name="value"/>.</summary>
        public void Put(string id, long sequence, long timestampTicks, JournalDataLocation value, int length)
        {
            int slot = SlotOf(id);
            if (_segments.Count == 0 || !value.IsInSegmentOf(_lastSegment))
            {
                _lastSegment = value.SegmentStart;
                _segments.Add(_lastSegment);
            }

            _sequences[slot] = sequence;
            _timestamps[slot] = timestampTicks;
            _locations[slot] = ((long)(_segments.Count - 1) << OffsetBits) | value.Offset;
            _lengths[slot] = length;
        }

        /// <summary>Records a delete of <paramref name="id"/>: frees its slot (nothing when it is not live), or, when
        /// tombstones are kept, records the delete's sequence and time in its slot.</summary>
        public void Delete(string id, long sequence, long timestampTicks)
        {
            if (_keepTombstones)
            {
                int kept = SlotOf(id);
                _sequences[kept] = sequence;
                _timestamps[kept] = timestampTicks;
                _lengths[kept] = Tombstone;
                _anyDeleted = true;
                return;
            }

            if (_slots.Remove(id, out int slot))
            {
                _lengths[slot] = Dead;
                _anyDeleted = true;
            }
        }

        /// <summary>The slot of <paramref name="id"/>, a new one (the arrays grown when full) when it has
        /// none.</summary>
        private int SlotOf(string id)
        {
            ref int slot = ref CollectionsMarshal.GetValueRefOrAddDefault(_slots, id, out bool exists);
            if (!exists)
            {
                if (_count == _ids.Length)
                {
                    Grow();
                }

                slot = _count++;
                _ids[slot] = id;
            }

            return slot;
        }

        /// <summary>
        /// Ends the collection's load: copies the live values out of the journal into slabs and sorts the live ids, as
        /// three parallel actions when <paramref name="parallel"/> (both halves of the copy, each into slabs of its
        /// own, and the sort: disjoint state), and returns the built collection.
        /// </summary>
        public ReplayedDocuments Build(bool parallel)
        {
            _values = new ReadOnlyMemory<byte>[_count];
            if (parallel)
            {
                int split = _count / 2;
                try
                {
                    Parallel.Invoke(() => CopyValues(0, split), () => CopyValues(split, _count), SortIds);
                }
                catch (AggregateException e) when (e.InnerExceptions.Count > 0)
                {
                    // The same exception the one-thread path would throw, not a wrapper.
                    System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(e.InnerExceptions[0]).Throw();
                }
            }
            else
            {
                CopyValues(0, _count);
                SortIds();
            }

            if (_count < _sequences.Length / 2)
            {
                // Far fewer ids than puts (a journal of overwrites): keep only the used part of the kept arrays.
                Array.Resize(ref _sequences, _count);
                Array.Resize(ref _timestamps, _count);
            }

            bool[]? deleted = null;
            if (_keepTombstones && _anyDeleted)
            {
                deleted = new bool[_count];
                for (int slot = 0; slot < _count; slot++)
                {
                    deleted[slot] = _lengths[slot] == Tombstone;
                }
            }

            return new(_slots, _sequences, _timestamps, _values, _sortedIds, deleted);
        }

        /// <summary>Copies the values of the live slots in [<paramref name="from"/>, <paramref name="to"/>) out of the
        /// journal into slabs of their own.</summary>
        // replay: a store opens once per process, so no tier-0 pass
        [MethodImpl(MethodImplOptions.AggressiveOptimization)]
        private void CopyValues(int from, int to)
        {
            long slabbedBytes = 0;
            for (int slot = from; slot < to; slot++)
            {
                if (_lengths[slot] is >= 0 and <= ValueSlabs.MaxSlabbedValue)
                {
                    slabbedBytes += _lengths[slot];
                }
            }

            var slabs = new ValueSlabs(slabbedBytes);
            for (int slot = from; slot < to; slot++)
            {
                if (_lengths[slot] >= 0)
                {
                    long location = _locations[slot];
                    JournalDataLocation segment = _segments[(int)(location >>> OffsetBits)];
                    _values[slot] = slabs.Copy(segment.Read(location & ((1L << OffsetBits) - 1), _lengths[slot]));
                }
            }
        }

        /// <summary>Sorts the live ids ordinally (linear when they arrived in order, as replayed ids often
        /// do).</summary>
        private void SortIds()
        {
            bool sorted = true;
            string? previous = null;
            for (int slot = 0; slot < _count && sorted; slot++)
            {
                if (_lengths[slot] != Dead)
                {
                    sorted = previous is null || string.CompareOrdinal(previous, _ids[slot]) < 0;
                    previous = _ids[slot];
                }
            }

            if (sorted && (!_anyDeleted || _keepTombstones) && _count == _ids.Length)
            {
                _sortedIds = _ids; // every slot live, in order, and the array exactly full: it is the sorted list
                return;
            }

            var ids = new string[_slots.Count];
            int n = 0;
            for (int slot = 0; slot < _count; slot++)
            {
                if (_lengths[slot] != Dead)
                {
                    ids[n++] = _ids[slot];
                }
            }

            if (!sorted)
            {
                Array.Sort(ids, StringComparer.Ordinal); // live ids are distinct: a re-put id has one live slot
            }

            _sortedIds = ids;
        }

        /// <summary>
        /// An array whose pages are faulted in with one call (<see cref="NativeMethods.PopulateForWrite"/>) rather than
        /// one fault per page as the replay fills it: it is sized to the collection's puts, which the replay fills
        /// unless puts overwrite each other.
        /// </summary>
        private static T[] NewArray<T>(int length)
            where T : unmanaged
        {
            T[] array = GC.AllocateUninitializedArray<T>(length);
            NativeMethods.PopulateForWrite(MemoryMarshal.AsBytes(array.AsSpan()));
            return array;
        }

        private void Grow()
        {
            int size = _ids.Length * 2;
            Array.Resize(ref _ids, size);
            Array.Resize(ref _sequences, size);
            Array.Resize(ref _timestamps, size);
            Array.Resize(ref _locations, size);
            Array.Resize(ref _lengths, size);
        }
    }
}
