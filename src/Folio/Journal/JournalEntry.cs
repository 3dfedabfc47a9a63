namespace Folio.Journal;

/// <summary>
/// One entry read from the journal. <see cref="Data"/> points into the journal's mapped segment: it is valid until
/// the reader that returned it reads again, seeks, or is disposed. Copy it to keep it longer.
/// </summary>
public readonly ref struct JournalEntry
{
    private readonly long _timestampTicks;

    internal JournalEntry(long sequence, long timestampTicks, ReadOnlySpan<byte> data)
    {
        Sequence = sequence;
        _timestampTicks = timestampTicks;
        Data = data;
    }

    /// <summary>The entry's sequence number (gap-free, starting at 1).</summary>
    public long Sequence { get; }

    /// <summary>When the entry's record was appended (UTC; never decreasing along the journal).</summary>
    public DateTimeOffset Timestamp => new(_timestampTicks, TimeSpan.Zero);

    /// <summary>The record timestamp in UTC ticks.</summary>
    public long TimestampTicks => _timestampTicks;

    /// <summary>The entry's bytes, as appended.</summary>
    public ReadOnlySpan<byte> Data { get; }
}
