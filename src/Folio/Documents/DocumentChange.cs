namespace Folio;

/// <summary>One committed change to one document, as the change feed reports it.</summary>
/// <param name="Sequence">The commit's sequence number (the document's new version for a put). Several changes of
/// one committed batch share it; save it and resume from <c>Sequence + 1</c> after the last batch fully
/// handled.</param>
/// <param name="Timestamp">When the commit was written (UTC).</param>
/// <param name="Collection">The collection.</param>
/// <param name="Id">The document id.</param>
/// <param name="Kind">Put or delete.</param>
/// <param name="Json">The document's UTF-8 JSON for a put; empty for a delete.</param>
public sealed record DocumentChange(long Sequence, DateTimeOffset Timestamp, string Collection, string Id,
    ChangeKind Kind, ReadOnlyMemory<byte> Json);
