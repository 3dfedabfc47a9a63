namespace Folio.Journal;

/// <summary>
/// What a store's data file tells its journal's recovery: the checkpoint's sequence (entries at or below it are walked,
/// not checksummed) and the id of the store the data file belongs to, which every segment must carry too.
/// </summary>
/// <param name="Sequence">The checkpoint's sequence; 0 without one.</param>
/// <param name="StoreId">The data file's store id; <see cref="Guid.Empty"/> when it has none (no checkpoint, or one
/// written before stores had ids).</param>
/// <param name="StoreIdSource">The file the id was read from, for messages.</param>
internal readonly record struct CheckpointOfJournal(long Sequence, Guid StoreId, string? StoreIdSource);
