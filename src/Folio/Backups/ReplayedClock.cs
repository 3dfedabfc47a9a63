namespace Folio.Backups;

/// <summary>
/// The clock a restore's journal stamps records with: the time of the record being restored, set before each append,
/// so the restored journal (and the change feed over it) keeps the original commit times. Used by the restoring
/// thread only.
/// </summary>
internal sealed class ReplayedClock : TimeProvider
{
    public long Ticks { get; set; }

    public override DateTimeOffset GetUtcNow() => new(Ticks, TimeSpan.Zero);
}
