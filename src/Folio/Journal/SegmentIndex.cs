using System.Runtime.CompilerServices;

namespace Folio.Journal;

/// <summary>
/// A sparse index of one segment from sequence number and from timestamp to the offset of a record, built lazily
/// by the first reader that needs it and extended as the segment grows.
/// <para>
/// Layout. One <c>long[]</c> buffer, allocated once per segment for the most entries the segment can need, holds
/// triples <c>(first sequence, timestamp, offset | flag)</c>. A record is indexed when it is the segment's first or
/// starts at least <see cref="Stride"/> bytes after the last indexed record, so a lookup searches the buffer and then
/// walks at most about <see cref="Stride"/> bytes of records through the mapping. The flag (bit 62 of the offset
/// word, <see cref="FollowsIndexed"/>) marks an entry whose record directly follows the previous indexed record: then
/// no record lies between the two, and a seek by time can land on it without reading the previous record's header
/// (records of <see cref="Stride"/> bytes or more are all indexed, so such a seek touches one record header: one
/// cache and TLB miss in the mapping instead of two or more).
/// </para>
/// <para>
/// Protocol. <see cref="_state"/> packs <c>(indexed-up-to offset &lt;&lt; 32) | entry count</c> in one 64-bit word.
/// An extender, holding the per-segment <see cref="_extendLock"/>, writes new triples after the published count and
/// then publishes the new state with a release write; a reader reads the state with an acquire read and uses only
/// the first <c>count</c> triples, which are never written again. Readers therefore never lock to search, and only
/// extending the index (when a reader needs committed bytes past the indexed-up-to offset) takes the lock.
/// </para>
/// <para>
/// The index also keeps the verified prefix of the segment: the offset below which every record passed its
/// checksum in this process (recovery verifies what it checks; the extender verifies what it indexes; readers
/// verify what they read past it). It only grows, by CAS, so each record is checksummed about once per process.
/// </para>
/// <para>
/// Unchecked records. Recovery walks the records a checkpoint already holds without checksumming them
/// (<see cref="MarkRecovered"/>): they lie below <see cref="_verifiedFrom"/>, which is written before the segment is
/// published (the segment list's release store) and never changes. The extender does not checksum them either, so
/// opening a store costs no pass over its history; a reader checks each one it reads. Their verified prefix is kept
/// apart (<see cref="_uncheckedVerifiedUpTo"/>, from the segment's first record, grown by CAS like the other), so a
/// reader that reads them in order from the start checks each once per process.
/// </para>
/// </summary>
internal sealed class SegmentIndex
{
    /// <summary>
    /// Bytes of records between two index entries, at least. The buffer holds at most capacity / stride + 2 entries
    /// of 24 bytes: 1.5 MiB for a 64 MiB segment, allocated when a reader first needs the segment's index.
    /// </summary>
    public const int Stride = 1024;

    private const long FollowsIndexed = 1L << 62;

    private readonly JournalSegment _segment;
    private readonly Lock _extendLock = new();
    private long[]? _entries;
    private long _state;
    private long _lastIndexedOffset = -Stride;
    private long _lastIndexedEnd = -1;
    private long _verifiedUpTo = JournalFormat.SegmentHeaderSize;
    private long _verifiedFrom = JournalFormat.SegmentHeaderSize;
    private long _uncheckedVerifiedUpTo = JournalFormat.SegmentHeaderSize;

    public SegmentIndex(JournalSegment segment)
    {
        _segment = segment;
        _state = (long)JournalFormat.SegmentHeaderSize << 32;
    }

    /// <summary>
    /// The offset of the last indexed record whose first sequence is at or below <paramref name="sequence"/>
    /// (or the first record), with every committed byte below <paramref name="committedLength"/> indexed.
    /// Returns -1 when the segment has no committed record yet.
    /// </summary>
    public long FindBySequence(long sequence, long committedLength) => Find(sequence, committedLength, field: 0);

    /// <summary>
    /// Where a seek to the first record at or after <paramref name="timestampTicks"/> starts: when
    /// <paramref name="exact"/>
    /// is true, the offset of that very record (the next indexed record directly follows the last one before the
    /// time, or the segment's first record is already at or after it); otherwise the offset of the last indexed record
    /// before the time, from which to walk forward. Returns -1 when there is no committed record.
    /// </summary>
    public long FindTimestamp(long timestampTicks, long committedLength, out bool exact)
    {
        exact = false;
        int count = IndexedCount(committedLength);
        if (count == 0)
        {
            return -1;
        }

        long[] entries = _entries!;
        int low = Search(entries, count, timestampTicks - 1, field: 1);
        if (entries[(low * 3) + 1] >= timestampTicks)
        {
            exact = true; // only entry 0 can be at or after the time here: it is the segment's first record
            return OffsetAt(entries, low);
        }

        if (low + 1 < count && (entries[((low + 1) * 3) + 2] & FollowsIndexed) != 0)
        {
            exact = true;
            return OffsetAt(entries, low + 1);
        }

        return OffsetAt(entries, low);
    }

    /// <summary>
    /// Whether the record <c>[start, end)</c> had its checksum verified in this process already (by recovery or by an
    /// earlier reader). Records are immutable once committed, so each is checked about once per open.
    /// </summary>
    public bool IsVerified(long start, long end) => start >= _verifiedFrom
        ? end <= Volatile.Read(ref _verifiedUpTo)
        : end <= Volatile.Read(ref _uncheckedVerifiedUpTo);

    /// <summary>
    /// Set by recovery before the segment is published: the records below <paramref name="verifiedFrom"/> were walked
    /// without checksums (a checkpoint holds their entries), those in <c>[verifiedFrom, verifiedUpTo)</c> passed them.
    /// </summary>
    public void MarkRecovered(long verifiedFrom, long verifiedUpTo)
    {
        _verifiedFrom = verifiedFrom;
        Volatile.Write(ref _verifiedUpTo, verifiedUpTo);
    }

    /// <summary>Records that the record <c>[start, end)</c> passed its checksum; advances the verified prefix of its
    /// part of the segment when contiguous.</summary>
    public void MarkVerified(long start, long end)
    {
        ref long upTo = ref start >= _verifiedFrom ? ref _verifiedUpTo : ref _uncheckedVerifiedUpTo;
        long current = Volatile.Read(ref upTo);
        while (start <= current && end > current)
        {
            long seen = Interlocked.CompareExchange(ref upTo, end, current);
            if (seen == current)
            {
                return;
            }

            current = seen;
        }
    }

    /// <summary>The published entry count (tests and diagnostics).</summary>
    internal int Count => (int)(Volatile.Read(ref _state) & 0xFFFF_FFFF);

    private long Find(long key, long committedLength, int field)
    {
        int count = IndexedCount(committedLength);
        return count == 0 ? -1 : OffsetAt(_entries!, Search(_entries!, count, key, field));
    }

    /// <summary>The published entry count, once every committed byte below <paramref name="committedLength"/> is
    /// indexed.</summary>
    private int IndexedCount(long committedLength)
    {
        long state = Volatile.Read(ref _state);
        if ((state >>> 32) < committedLength)
        {
            state = Extend(committedLength);
        }

        return (int)(state & 0xFFFF_FFFF);
    }

    /// <summary>The record offset of entry <paramref name="index"/>, without the flag bit.</summary>
    private static long OffsetAt(long[] entries, int index) => entries[(index * 3) + 2] & ~FollowsIndexed;

    /// <summary>The last of the first <paramref name="count"/> entries whose <paramref name="field"/> is at most
    /// <paramref name="key"/>, or entry 0.</summary>
    private static int Search(long[] entries, int count, long key, int field)
    {
        int low = 0;
        int high = count - 1;

        // Sequence numbers and timestamps grow about linearly through a segment, so a few interpolation probes land
        // next to the answer (about 2 cache misses instead of the 16 of a binary search over 65,536 entries); whatever
        // range is left after them is binary-searched, so a skewed distribution costs at most the binary search.
        // Invariant of both loops: the answer (the last entry whose key is at most 'key', or entry 0) lies in [low,
        // high].
        for (int probes = 0; probes < 3 && low < high; probes++)
        {
            long lowKey = entries[(low * 3) + field];
            long highKey = entries[(high * 3) + field];
            if (key >= highKey)
            {
                low = high;
                break;
            }

            if (key < lowKey)
            {
                high = low;
                break;
            }

            // lowKey <= key < highKey, so the guess is in [low, high - 1].
            int guess = low + (int)((double)(key - lowKey) / (highKey - lowKey) * (high - low));
            guess = Math.Clamp(guess, low, high - 1);
            if (entries[(guess * 3) + field] <= key)
            {
                low = guess;
                if (entries[((guess + 1) * 3) + field] > key)
                {
                    high = guess;
                }
            }
            else
            {
                high = guess - 1;
            }
        }

        while (low < high)
        {
            int mid = (low + high + 1) >>> 1;
            if (entries[(mid * 3) + field] <= key)
            {
                low = mid;
            }
            else
            {
                high = mid - 1;
            }
        }

        return low;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private long Extend(long committedLength)
    {
        lock (_extendLock)
        {
            long state = Volatile.Read(ref _state);
            long offset = state >>> 32;
            if (offset >= committedLength)
            {
                return state;
            }

            int count = (int)(state & 0xFFFF_FFFF);
            long[] entries = _entries ??= new long[3 * (int)((_segment.Capacity / Stride) + 2)];
            ReadOnlySpan<byte> bytes = _segment.Span(0, committedLength);
            while (offset < committedLength)
            {
                if (!JournalFormat.TryReadRecordHeader(bytes[(int)offset..], out JournalFormat.RecordHeader header))
                {
                    // Committed bytes are validated at recovery or written by this process; a reader hitting this
                    // reports the damage with its own checksum check.
                    ThrowHelper.ThrowJournalCorrupted(_segment.Path, offset,
                        "a committed record has an invalid header");
                }

                // Verify checksums while scanning sequentially, so random lookups later find their records verified.
                // A damaged record stays unverified: the reader that reaches it reports it, exactly there. Records
                // recovery left unchecked stay so: the readers that need them check them.
                long end = offset + header.Length;
                if (offset >= _verifiedFrom && !IsVerified(offset, end)
                    && JournalFormat.ChecksumMatches(bytes.Slice((int)offset, header.Length)))
                {
                    MarkVerified(offset, end);
                }

                if (offset >= _lastIndexedOffset + Stride)
                {
                    entries[count * 3] = header.FirstSequence;
                    entries[(count * 3) + 1] = header.TimestampTicks;
                    entries[(count * 3) + 2] = offset | (offset == _lastIndexedEnd ? FollowsIndexed : 0);
                    _lastIndexedOffset = offset;
                    _lastIndexedEnd = end;
                    count++;
                }

                offset += header.Length;
            }

            state = (offset << 32) | (uint)count;
            Volatile.Write(ref _state, state);
            return state;
        }
    }
}
