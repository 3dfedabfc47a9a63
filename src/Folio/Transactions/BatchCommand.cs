namespace Folio.Transactions;

/// <summary>One command of a <see cref="CommitBatch"/>.</summary>
/// <param name="Kind">Put or delete.</param>
/// <param name="Key">The document.</param>
/// <param name="Value">The UTF-8 JSON of a put; empty for a delete.</param>
public readonly record struct BatchCommand(CommandKind Kind, DocumentKey Key, ReadOnlyMemory<byte> Value);
