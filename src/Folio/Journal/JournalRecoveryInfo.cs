namespace Folio.Journal;

/// <summary>What recovery found and did when the journal opened.</summary>
/// <param name="Segments">Segment files kept.</param>
/// <param name="Records">Valid records found.</param>
/// <param name="Entries">Entries in those records.</param>
/// <param name="Bytes">Bytes of those records (headers included).</param>
/// <param name="TruncatedBytes">Bytes of a torn tail removed from the newest segment (0 after a clean
/// shutdown).</param>
/// <param name="Duration">How long the scan took.</param>
public sealed record JournalRecoveryInfo(int Segments, long Records, long Entries, long Bytes, long TruncatedBytes,
    TimeSpan Duration);
