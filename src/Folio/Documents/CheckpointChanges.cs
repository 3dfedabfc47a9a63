using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// What one checkpoint takes from the index (<see cref="VersionedIndex.CollectChanges"/>): the changes per
/// collection, the logged keys they came from (put back into the log if the checkpoint fails), and whether they
/// include the documents the open replayed.
/// </summary>
internal sealed record CheckpointChanges(List<CollectionChanges> Collections, List<DocumentKey> Keys,
    bool CoveredReplayed);
