namespace Folio.Journal;

/// <summary>
/// Where bytes of a journal entry lie in the journal's mapped segments, so that recovery can remember a value's place
/// while it replays and copy the value later, without copying every version on the way (see
/// <see cref="JournalReader.LastEntryLocation"/>). Valid while the journal is open and the segment is not purged (no
/// purge runs while a store opens).
/// </summary>
internal readonly struct JournalDataLocation
{
    private readonly JournalSegment? _segment;

    internal JournalDataLocation(JournalSegment segment, long offset)
    {
        _segment = segment;
        Offset = offset;
    }

    /// <summary>The offset in the segment.</summary>
    public long Offset { get; }

    /// <summary>The location <paramref name="bytes"/> further into the same segment.</summary>
    public JournalDataLocation Plus(long bytes) => new(_segment!, Offset + bytes);

    /// <summary>The start of this location's segment: with <see cref="Read"/>, one value per segment is enough to
    /// read any location in it by offset.</summary>
    public JournalDataLocation SegmentStart => new(_segment!, 0);

    /// <summary>Whether <paramref name="other"/> lies in the same segment.</summary>
    public bool IsInSegmentOf(in JournalDataLocation other) => ReferenceEquals(_segment, other._segment);

    /// <summary>The <paramref name="length"/> bytes at <paramref name="offset"/> from this location, in its segment's
    /// mapping.</summary>
    public ReadOnlySpan<byte> Read(long offset, int length) => _segment!.Span(Offset + offset, length);
}
