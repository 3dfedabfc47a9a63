using System.Numerics;
using System.Runtime.CompilerServices;

namespace Folio.Documents;

/// <summary>
/// The versions of one collection's documents written since a checkpoint took them (the heads of the
/// <see cref="VersionedIndex"/>), held without an object per document: the versions are <see cref="HeadRecord"/>s in
/// large arrays of structs (blocks), and an open-addressing table maps each id's UTF-8 bytes to its newest version. A
/// commit that adds a version adds no object for the collector to trace or copy (its value and id stay in the
/// commit's encoded entry, which the record points at; a short id is also copied into the record, so a lookup
/// compares it without reading the entry), where a version object, a dictionary node and an id string
/// per commit made every collection copy them until the next checkpoint (docs/measurements.md, 2026-11-28).
/// <para>
/// Layout. A record is named by its reference, its index in the blocks plus one (0 is "none"). Blocks hold
/// <see cref="BlockSize"/> records each and never move (the first starts smaller and is replaced by larger copies
/// until it is whole: <see cref="NewBlock"/>); records are appended and never reused, so a reference stays
/// valid for the life of the table. A slot of the id table is 0 (empty) or the id's hash in its high 32 bits and the
/// reference of its newest record in the low 32. Ids are never removed from a table (linear probing, no tombstones):
/// removing ids (a checkpoint's eviction) and dropping the records no version can reach is a
/// <see cref="HeadTableRebuild"/>, which makes a new table that the index publishes in place of this one. Every change
/// the writer makes after a moment appends a record (a new version; a prune only cuts a link), so a rebuild that runs
/// beside the writer catches up by replaying the records appended since it started (<see cref="RecordCount"/>, a
/// release store after each record).
/// </para>
/// <para>
/// Protocol. One writer at a time (the index's write lock): <see cref="Append"/>, <see cref="SetHead"/>,
/// <see cref="Prune"/> and <see cref="Put"/>. Readers (<see cref="Find(string, int)"/>, <see cref="Record"/>,
/// <see cref="OlderOf"/>) take no lock and never wait. The writer fills a record completely, and makes a new block
/// reachable from the block list, before it publishes the record with a release store of the slot that names it
/// (<see cref="SetHead"/>); a record's <see cref="HeadRecord.Older"/> link names an older record, appended before it
/// and so published by the same store or an earlier one. Readers load a slot or a link with an acquire, then the block
/// list, so a record a reader reaches is complete. After publication a record changes only by a prune, which cuts its
/// <see cref="HeadRecord.Older"/> to 0 (a release store; readers load it with an acquire): a reader walking a chain
/// sees the link or 0, never a half-written record. Growing the id table builds a larger one and publishes it with a
/// release store; the writer never writes the old one again, so a reader that loaded the old table sees it as it was at
/// that moment: every id it lacks was inserted after, by a commit newer than any snapshot the reader can hold (the
/// index publishes a commit's sequence only after its versions are in the table). A table a rebuild replaced is
/// likewise never written again; readers still walking it see a consistent, older state whose versions are all still
/// right for their snapshots.
/// </para>
/// </summary>
internal sealed class HeadTable
{
    private const int BlockShift = 12;

    /// <summary>Records a block holds: 4,096 of 88 bytes, so blocks live on the large object heap, where the
    /// collector neither copies them nor counts them against the youngest generation.</summary>
    private const int BlockSize = 1 << BlockShift;

    private const int BlockMask = BlockSize - 1;

    /// <summary>Records the first block holds at first (it doubles up to <see cref="BlockSize"/>).</summary>
    private const int FirstBlockSize = 16;
    private const int MinSlots = 16;

    private long[] _slots; // published with a release store; slots written with release stores
    private HeadRecord[]?[] _blocks; // published with a release store
    private int _records; // written by the writer with a release store after the record, read with an acquire
    private int _count; // ids in the table: the writer's, read by others as a figure (acquire)

    public HeadTable()
        : this(MinSlots)
    {
    }

    private HeadTable(int slots)
    {
        _slots = new long[slots];
        _blocks = new HeadRecord[]?[4];
    }

    /// <summary>Ids in the table (a figure: exact for the writer, at most one insert stale for others).</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>Records appended, reachable or not (acquire): every record up to it is complete.</summary>
    public int RecordCount => Volatile.Read(ref _records);

    /// <summary>The records the table held when the rebuild that made it published it (0 for a new table): the
    /// checkpoint's thread compares <see cref="RecordCount"/> with it to decide when to rebuild again.</summary>
    public int BuiltRecords { get; set; }

    /// <summary>The reference of the newest record of <paramref name="id"/> (hashed with
    /// <see cref="IdBytes.HashOf(string)"/>), or 0. Any thread.</summary>
    public int Find(string id, int hash)
    {
        long[] slots = Volatile.Read(ref _slots);
        int mask = slots.Length - 1;
        for (int i = hash & mask; ; i = (i + 1) & mask)
        {
            long slot = Volatile.Read(ref slots[i]);
            if (slot == 0)
            {
                return 0;
            }

            if (HashOfSlot(slot) == hash && IdBytes.Matches(Record((int)slot).Id, id))
            {
                return (int)slot;
            }
        }
    }

    /// <summary>The reference of the newest record of the id whose UTF-8 bytes are <paramref name="id"/>, or 0. Any
    /// thread.</summary>
    public int Find(ReadOnlySpan<byte> id, int hash)
    {
        long[] slots = Volatile.Read(ref _slots);
        int mask = slots.Length - 1;
        for (int i = hash & mask; ; i = (i + 1) & mask)
        {
            long slot = Volatile.Read(ref slots[i]);
            if (slot == 0)
            {
                return 0;
            }

            if (HashOfSlot(slot) == hash && id.SequenceEqual(Record((int)slot).Id))
            {
                return (int)slot;
            }
        }
    }

    /// <summary>The record <paramref name="reference"/> names (a reference read from this table). Any thread; the
    /// record's fields other than <see cref="HeadRecord.Older"/> never change (read that one with
    /// <see cref="OlderOf"/>).</summary>
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public ref readonly HeadRecord Record(int reference) => ref RecordAt(reference);

    /// <summary>The version before <paramref name="reference"/>, or 0 (acquire). Any thread.</summary>
    public int OlderOf(int reference) => Volatile.Read(ref RecordAt(reference).Older);

    /// <summary>The newest version at or below <paramref name="snapshot"/> in the chain from
    /// <paramref name="reference"/>, or 0 when the chain holds none (or was pruned below it). Any thread.</summary>
    public int At(int reference, long snapshot)
    {
        while (reference != 0 && Record(reference).Sequence > snapshot)
        {
            reference = OlderOf(reference);
        }

        return reference;
    }

    /// <summary>
    /// Writer: the slot <paramref name="id"/> is in, or the empty slot where it goes; <paramref name="head"/> gets its
    /// newest record, or 0. Valid until the writer's next <see cref="SetHead"/> that inserts.
    /// </summary>
    public int Locate(ReadOnlySpan<byte> id, int hash, out int head)
    {
        long[] slots = _slots;
        int mask = slots.Length - 1;
        for (int i = hash & mask; ; i = (i + 1) & mask)
        {
            long slot = slots[i];
            if (slot == 0 || (HashOfSlot(slot) == hash && id.SequenceEqual(Record((int)slot).Id)))
            {
                head = (int)slot;
                return i;
            }
        }
    }

    /// <summary>Writer: appends <paramref name="record"/> (not yet reachable), copying an id of at most
    /// <see cref="HeadRecord.InlineIdBytes"/> into it (<see cref="HeadRecord.InlineId"/>), and returns its
    /// reference.</summary>
    public int Append(in HeadRecord record)
    {
        int index = _records;
        if (index == int.MaxValue - 1)
        {
            ThrowHelper.ThrowInvalidOperation("A head table holds at most 2^31 - 2 records.");
        }

        int block = index >> BlockShift;
        HeadRecord[]?[] blocks = _blocks;
        if (block == blocks.Length)
        {
            var larger = new HeadRecord[]?[blocks.Length * 2];
            blocks.AsSpan().CopyTo(larger);
            blocks = larger;
            Volatile.Write(ref _blocks, larger); // before any reference into the new block is published
        }

        HeadRecord[]? records = blocks[block];
        if (records is null || (index & BlockMask) == records.Length)
        {
            records = NewBlock(blocks, block, records);
        }

        ref HeadRecord stored = ref records[index & BlockMask];
        stored = record;
        if (stored.IdOffset >= 0 && stored.IdLength <= HeadRecord.InlineIdBytes
            && (stored.Flags & HeadRecord.InlineIdFlag) == 0)
        {
            stored.Buffer.AsSpan(stored.IdOffset, stored.IdLength).CopyTo(stored.InlineId);
            stored.Flags |= HeadRecord.InlineIdFlag;
        }
        Volatile.Write(ref _records, index + 1); // a rebuild beside the writer reads records up to this count
        return index + 1;
    }

    /// <summary>
    /// Writer: publishes <paramref name="reference"/> as the newest record of the id at <paramref name="slot"/> (from
    /// <see cref="Locate"/>), a release store; <paramref name="inserted"/> when the slot was empty. Grows the table
    /// when it is half full.
    /// </summary>
    public void SetHead(int slot, int hash, int reference, bool inserted)
    {
        Volatile.Write(ref _slots[slot], ((long)hash << 32) | (uint)reference);
        if (inserted)
        {
            int count = _count + 1;
            Volatile.Write(ref _count, count);
            if (count * 2L > _slots.Length)
            {
                Grow();
            }
        }
    }

    /// <summary>Writer: cuts the chain after <paramref name="reference"/> (release), when no snapshot can reach the
    /// versions behind it.</summary>
    public void Prune(int reference) => Volatile.Write(ref RecordAt(reference).Older, 0);

    /// <summary>The number of slots (the writer's, for <see cref="HeadAt"/>).</summary>
    public int SlotCount => _slots.Length;

    /// <summary>The newest record of the id in <paramref name="slot"/>, or 0 for an empty slot. Writer, or a thread
    /// that excludes it.</summary>
    public int HeadAt(int slot) => (int)_slots[slot];

    /// <summary>The id table as it is now (acquire), for a reader that walks every id (<see cref="HeadTableRebuild"/>):
    /// read its slots with acquires; ids inserted after a growth are not in it.</summary>
    public long[] Slots => Volatile.Read(ref _slots);

    /// <summary>The hash of the id in a nonzero slot of <see cref="Slots"/> (its high 32 bits; the low 32 are the
    /// head's reference).</summary>
    public static int HashOfSlot(long slot) => (int)(slot >>> 32);

    /// <summary>Writer: makes <paramref name="reference"/> the newest record of its id, inserting the id if it is
    /// absent (a table no reader has yet: <see cref="HeadTableRebuild"/>).</summary>
    public void Put(int reference)
    {
        ref readonly HeadRecord record = ref Record(reference);
        int slot = Locate(record.Id, record.Hash, out int head);
        SetHead(slot, record.Hash, reference, inserted: head == 0);
    }

    /// <summary>Slots for a table that starts with <paramref name="ids"/> ids: at most a third full, so it takes at
    /// least half as many again before it grows.</summary>
    public static int SlotsFor(int ids) => (int)Math.Max(MinSlots, BitOperations.RoundUpToPowerOf2((uint)ids * 3));

    /// <summary>An empty table with room for <paramref name="ids"/> ids before it grows.</summary>
    public static HeadTable WithRoomFor(int ids) => new(SlotsFor(ids));

    /// <summary>Whether every id in the table is found at its own record and every record a slot or a chain reaches
    /// is within the records appended (tests: not safe against a concurrent writer).</summary>
    internal bool IsConsistent()
    {
        int ids = 0;
        foreach (long slot in _slots)
        {
            if (slot == 0)
            {
                continue;
            }

            ids++;
            int reference = (int)slot;
            if (reference > _records || Find(Record(reference).Id, HashOfSlot(slot)) != reference
                || IdBytes.HashOf(Record(reference).Id) != HashOfSlot(slot))
            {
                return false;
            }

            for (int older = OlderOf(reference); older != 0; older = OlderOf(older))
            {
                if (older > _records || older >= reference)
                {
                    return false;
                }
            }
        }

        return ids == _count;
    }

    /// <summary>
    /// Writer: a block for <paramref name="block"/> with room for the next record. The first block starts with
    /// <see cref="FirstBlockSize"/> records and doubles up to <see cref="BlockSize"/>, replaced by a larger copy: every
    /// collection has a table, and a whole block (360 KiB) for each of thousands of small collections would hold
    /// gigabytes for a few megabytes of documents. The other blocks are whole from the start. The copy is stored before
    /// any reference into its new part is published (the slot's release store), so a reader that reaches such a record
    /// loads the copy. A reader still reading the old array sees the records it can reach, unchanged, except a later
    /// prune's cut (a link to versions no snapshot needs, which a reader stops before).
    /// </summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static HeadRecord[] NewBlock(HeadRecord[]?[] blocks, int block, HeadRecord[]? full)
    {
        HeadRecord[] records;
        if (full is null)
        {
            records = new HeadRecord[block == 0 ? FirstBlockSize : BlockSize];
        }
        else
        {
            records = new HeadRecord[Math.Min(BlockSize, full.Length * 2)];
            full.AsSpan().CopyTo(records);
        }

        blocks[block] = records;
        return records;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private void Grow()
    {
        long[] slots = _slots;
        var larger = new long[slots.Length * 2];
        int mask = larger.Length - 1;
        foreach (long slot in slots)
        {
            if (slot == 0)
            {
                continue;
            }

            int i = HashOfSlot(slot) & mask;
            while (larger[i] != 0)
            {
                i = (i + 1) & mask;
            }

            larger[i] = slot;
        }

        Volatile.Write(ref _slots, larger); // the old table is not written again (see the protocol)
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    private ref HeadRecord RecordAt(int reference)
    {
        int index = reference - 1;
        return ref Volatile.Read(ref _blocks)[index >> BlockShift]![index & BlockMask];
    }
}
