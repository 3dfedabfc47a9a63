namespace Folio.Pages;

/// <summary>
/// The value of a leaf entry: a document's bytes with the sequence and time of the commit that wrote them. Small
/// values live in the leaf (<see cref="Inline"/>); a value longer than <see cref="PageFormat.OverflowThreshold"/>
/// is written to an overflow page of its own (<see cref="Overflow"/>) and read from it on demand, so leaves stay
/// small. A value read from a page carries its own copy of the bytes.
/// </summary>
internal readonly struct StoredValue
{
    public StoredValue(long sequence, long timestampTicks, ReadOnlyMemory<byte> inline)
    {
        Sequence = sequence;
        TimestampTicks = timestampTicks;
        Inline = inline;
        Length = inline.Length;
        Overflow = default;
    }

    public StoredValue(long sequence, long timestampTicks, ReadOnlyMemory<byte> inline, PagePosition overflow,
        int length)
    {
        Sequence = sequence;
        TimestampTicks = timestampTicks;
        Inline = inline;
        Overflow = overflow;
        Length = length;
    }

    /// <summary>The commit sequence that wrote the value (the document's version).</summary>
    public long Sequence { get; }

    /// <summary>When that commit happened, in UTC ticks.</summary>
    public long TimestampTicks { get; }

    /// <summary>The value's bytes when they are in memory; empty for an overflow value read from disk.</summary>
    public ReadOnlyMemory<byte> Inline { get; }

    /// <summary>The overflow page holding the value, or unsaved (default) when the value is not in one.</summary>
    public PagePosition Overflow { get; }

    /// <summary>The value's length in bytes.</summary>
    public int Length { get; }

    /// <summary>Whether the value goes to (or is in) an overflow page.</summary>
    public bool IsOverflow => Length > PageFormat.OverflowThreshold;

    /// <summary>Whether the bytes must be read from the overflow page.</summary>
    public bool NeedsRead => Inline.Length != Length;

    /// <summary>The value's bytes, read from its overflow page when they are not in memory.</summary>
    public ReadOnlyMemory<byte> Read(IPageReader reader) => NeedsRead ? reader.ReadOverflow(Overflow, Length) : Inline;

    /// <summary>This value, now saved in <paramref name="overflow"/>.</summary>
    public StoredValue WithOverflow(PagePosition overflow) => new(Sequence, TimestampTicks, Inline, overflow, Length);
}
