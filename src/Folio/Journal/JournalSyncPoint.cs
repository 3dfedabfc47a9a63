namespace Folio.Journal;

/// <summary>
/// What one fdatasync covers: the active segment, its written length and the last appended sequence, captured under
/// the journal's write lock by <see cref="WriteAheadJournal.TryBeginSync"/>. It holds a reference on the segment and
/// a sync slot (a file handle no other sync in flight uses) until <see cref="WriteAheadJournal.CompleteSync"/>.
/// </summary>
internal readonly struct JournalSyncPoint
{
    internal JournalSyncPoint(JournalSegment segment, long length, long sequence, int stripe, int slot)
    {
        Segment = segment;
        Length = length;
        Sequence = sequence;
        Stripe = stripe;
        Slot = slot;
    }

    /// <summary>The last sequence number the sync makes durable.</summary>
    public long Sequence { get; }

    internal JournalSegment Segment { get; }

    internal long Length { get; }

    internal int Stripe { get; }

    internal int Slot { get; }

    /// <summary>The position the sync covers: the end of the last record it makes durable.</summary>
    internal JournalPosition Position => new(Segment, Length, Sequence);
}
