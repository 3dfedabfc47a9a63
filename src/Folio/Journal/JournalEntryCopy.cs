namespace Folio.Journal;

/// <summary>A journal entry read by a <see cref="JournalFollower"/>, with its own copy of its bytes.</summary>
/// <param name="Sequence">The entry's sequence number.</param>
/// <param name="TimestampTicks">Its record's timestamp (UTC ticks).</param>
/// <param name="Data">The entry's bytes.</param>
/// <param name="RecordFirstSequence">The first sequence of the entry's record (the entries of one committed group
/// share a record).</param>
internal readonly record struct JournalEntryCopy(long Sequence, long TimestampTicks, byte[] Data,
    long RecordFirstSequence);
