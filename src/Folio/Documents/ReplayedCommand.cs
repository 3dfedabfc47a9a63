namespace Folio.Documents;

/// <summary>A command decoded during recovery replay: its value is not copied, only located in its journal
/// entry.</summary>
/// <param name="Kind">Put or delete.</param>
/// <param name="Key">The document.</param>
/// <param name="ValueStart">Where the value starts, in bytes from the start of the entry's data (0 for a
/// delete).</param>
/// <param name="ValueLength">The value's length in bytes (0 for a delete).</param>
internal readonly record struct ReplayedCommand(ChangeKind Kind, DocumentKey Key, int ValueStart, int ValueLength);
