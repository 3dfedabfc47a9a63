namespace Folio;

/// <summary>
/// Documents a salvage could not read (<see cref="DocumentStore.SalvageFilesAsync"/>): those of
/// <paramref name="Collection"/> whose ids lie from <paramref name="FromId"/> (inclusive; null: the collection's
/// first) up to <paramref name="ToId"/> (exclusive; null: past its last), as of the data file's checkpoint, because a
/// page holding them failed its checks (<paramref name="Error"/> names the file and offset). For a document whose
/// own value pages are damaged, the range is that one id (<paramref name="ToId"/> is the id followed by U+0000).
/// Documents of the range written since the checkpoint are not lost: the journal holds them, and the salvage yields
/// them.
/// </summary>
/// <param name="Collection">The collection.</param>
/// <param name="FromId">The first id the damage may cover (inclusive), or null for the collection's first.</param>
/// <param name="ToId">The id the damage ends before (exclusive), or null for past the collection's last.</param>
/// <param name="Error">The damage: file, offset and what failed.</param>
public sealed record DamagedRange(string Collection, string? FromId, string? ToId, StoreCorruptedException Error);
