namespace Folio.Transactions;

/// <summary>One command of a <see cref="CommitBatch"/>.</summary>
/// <param name="Kind">Put or delete.</param>
/// <param name="Key">The document.</param>
/// <param name="Value">The UTF-8 JSON of a put; empty for a delete.</param>
internal readonly record struct BatchCommand(ChangeKind Kind, DocumentKey Key, ReadOnlyMemory<byte> Value);
