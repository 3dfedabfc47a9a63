namespace Folio.Pages;

/// <summary>
/// A checkpoint written in slices: every slice but the last is a checkpoint at the sequence already durable, whose
/// trees are ahead (<see cref="CollectionTree.AheadSequence"/>) up to <see cref="Sequence"/> for the ids the slices so
/// far covered; the last slice is a checkpoint at <see cref="Sequence"/>. Each slice frees the pages of the trees it
/// replaced, so the data file holds the old trees and one slice of the new ones at once rather than both trees whole.
/// A recovery from a slice replays the journal from the checkpoint's own sequence over trees ahead for some ids: a put
/// or delete replayed over its own effect leaves the same document, and the journal's later changes follow it.
/// </summary>
/// <param name="Sequence">The sequence the pass covers once its last slice is durable.</param>
/// <param name="Ahead">Per collection, the first id the slices so far did not cover (null: every id covered);
/// collections not named keep what the current checkpoint says of them.</param>
internal sealed record CheckpointPass(long Sequence, IReadOnlyDictionary<string, string?> Ahead);
