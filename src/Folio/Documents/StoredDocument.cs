namespace Folio;

/// <summary>A document as stored: its UTF-8 JSON and its version (the sequence number of the commit that wrote
/// it).</summary>
/// <param name="Collection">The collection.</param>
/// <param name="Id">The id.</param>
/// <param name="Json">The UTF-8 JSON; immutable, safe to keep.</param>
/// <param name="Version">The version: the commit sequence number that last wrote the document.</param>
/// <param name="LastModified">When that commit was written (UTC).</param>
public readonly record struct StoredDocument(string Collection, string Id, ReadOnlyMemory<byte> Json, long Version,
    DateTimeOffset LastModified);
