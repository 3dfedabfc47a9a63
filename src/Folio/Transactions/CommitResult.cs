namespace Folio;

/// <summary>The outcome of a committed batch.</summary>
/// <param name="Sequence">The batch's commit sequence number: its journal entry, and the new version of every
/// document it put.</param>
/// <param name="TimestampTicks">When the batch's group was written (UTC ticks of its journal record).</param>
public readonly record struct CommitResult(long Sequence, long TimestampTicks)
{
    /// <summary>When the batch's group was written (UTC).</summary>
    public DateTimeOffset Timestamp => new(TimestampTicks, TimeSpan.Zero);
}
