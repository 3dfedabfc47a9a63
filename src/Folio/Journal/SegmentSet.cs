namespace Folio.Journal;

/// <summary>
/// An immutable, ordered list of the journal's segments with the version it was published under. The writer
/// replaces the whole set (rotation, purge) and then advances the journal's version with <see cref="Interlocked"/>;
/// readers keep a set and look again only when the version moved.
/// </summary>
internal sealed class SegmentSet(JournalSegment[] segments, long version)
{
    public JournalSegment[] Segments { get; } = segments;

    public long Version { get; } = version;

    /// <summary>The segment that holds <paramref name="sequence"/>, or -1 when it is before the oldest
    /// segment.</summary>
    public int IndexOf(long sequence)
    {
        JournalSegment[] segments = Segments;
        int low = 0;
        int high = segments.Length - 1;
        if (high < 0 || sequence < segments[0].FirstSequence)
        {
            return -1;
        }

        while (low < high)
        {
            int mid = (low + high + 1) >>> 1;
            if (segments[mid].FirstSequence <= sequence)
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
}
