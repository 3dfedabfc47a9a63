namespace Folio.Journal;

/// <summary>
/// The end of an appended record: its segment, the segment's written length after it, and its last sequence number.
/// Publishing a position (<see cref="WriteAheadJournal.Publish"/>) makes every entry up to it visible to readers; the
/// caller must know those bytes are durable.
/// </summary>
internal readonly record struct JournalPosition(JournalSegment Segment, long Length, long Sequence);
