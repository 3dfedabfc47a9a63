namespace Folio.Pages;

/// <summary>A collection's tree in a checkpoint: its root and its number of documents. Immutable.</summary>
internal sealed record CollectionTree(string Name, PageReference Root, long Count);
