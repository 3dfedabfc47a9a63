namespace Folio;

/// <summary>
/// What a salvage could not read (<see cref="DocumentStore.SalvageFilesAsync"/>), one of two kinds.
/// <list type="bullet">
/// <item><description>A range of documents of the data file's checkpoint (<paramref name="Collection"/> set): those of
/// the collection whose ids lie from <paramref name="FromId"/> (inclusive; null: the collection's first) up to
/// <paramref name="ToId"/> (exclusive; null: past its last), because a page holding them failed its checks
/// (<paramref name="Error"/> names the file and offset). For a document whose own value pages are damaged, the range
/// is that one id (<paramref name="ToId"/> is the id followed by U+0000). Documents of the range written since the
/// checkpoint are not lost: the journal holds them, and the salvage yields them.</description></item>
/// <item><description>A range of commits of the journal after the checkpoint (<paramref name="Collection"/>,
/// <paramref name="FromId"/> and <paramref name="ToId"/> null): commits <see cref="FromSequence"/> to
/// <see cref="ToSequence"/>, whose records are damaged or missing (<paramref name="Error"/> is a
/// <see cref="JournalCorruptedException"/> naming the segment and offset). Which documents they wrote is unknown: a
/// document they put may be missing from the salvage or yielded as it was before them, and one they deleted may still
/// be yielded. Commits after the damage are read and applied as usual.</description></item>
/// </list>
/// </summary>
/// <param name="Collection">The collection, or null for a range of commits.</param>
/// <param name="FromId">The first id the damage may cover (inclusive), or null for the collection's first (and for a
/// range of commits).</param>
/// <param name="ToId">The id the damage ends before (exclusive), or null for past the collection's last (and for a
/// range of commits).</param>
/// <param name="Error">The damage: file, offset and what failed.</param>
public sealed record DamagedRange(string? Collection, string? FromId, string? ToId, StoreCorruptedException Error)
{
    /// <summary>For a range of commits, the first commit (sequence) the damage took; 0 for a range of
    /// documents.</summary>
    public long FromSequence { get; init; }

    /// <summary>For a range of commits, the last commit (sequence) the damage took, or <see cref="long.MaxValue"/> when
    /// nothing after the damage tells how many it held (a damaged newest segment header, or a damaged durable mark,
    /// which leaves unknown whether the journal's last records were lost: the range then says they may have been);
    /// 0 for a range of documents.</summary>
    public long ToSequence { get; init; }
}
