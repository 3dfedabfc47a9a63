namespace Folio;

/// <summary>A document as stored: its UTF-8 JSON and its version (the sequence number of the commit that wrote
/// it).</summary>
/// <param name="Collection">The collection.</param>
/// <param name="Id">The id.</param>
/// <param name="Json">The UTF-8 JSON; immutable, safe to keep. It may be a slice of memory the store shares with other
/// documents (those written or read with it), which stays alive while this is referenced: to keep many documents'
/// bytes for long, keep copies (<c>Json.ToArray()</c>).</param>
/// <param name="Version">The version: the commit sequence number that last wrote the document.</param>
/// <param name="LastModified">When that commit was written (UTC).</param>
public readonly record struct StoredDocument(string Collection, string Id, ReadOnlyMemory<byte> Json, long Version,
    DateTimeOffset LastModified);
