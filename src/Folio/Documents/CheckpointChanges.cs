using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// What one checkpoint takes from the index (<see cref="VersionedIndex.CollectChanges"/>): the changes per
/// collection, the logged keys they came from (put back into the log if the checkpoint fails), whether they
/// include the documents the open replayed, and the heads the checkpoint holds (evicted once it is current and no
/// snapshot needs them).
/// </summary>
internal sealed record CheckpointChanges(List<CollectionChanges> Collections, List<VersionedIndex.LoggedKey> Keys,
    bool CoveredReplayed, List<VersionedIndex.EvictionCandidate> Evictable);
