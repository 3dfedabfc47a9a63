namespace Folio;

/// <summary>One collection in <see cref="StoreInfo"/>.</summary>
/// <param name="Name">The collection's name.</param>
/// <param name="Documents">Its live documents.</param>
public sealed record CollectionInfo(string Name, long Documents);
