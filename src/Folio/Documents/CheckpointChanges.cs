using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// What one checkpoint takes from the index (<see cref="VersionedIndex.CollectChanges"/>): the changes per
/// collection, whether they include the documents the open replayed, and the heads the checkpoint holds (evicted
/// once it is current and no snapshot needs them; a failed checkpoint evicts nothing, so the next one takes the same
/// heads again).
/// </summary>
internal sealed record CheckpointChanges(List<CollectionChanges> Collections, bool CoveredReplayed,
    List<VersionedIndex.EvictionCandidate> Evictable);
