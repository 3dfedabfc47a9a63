namespace Folio;

/// <summary>A document's identity: its collection and its id, both compared ordinally (case-sensitive).</summary>
/// <param name="Collection">The collection name.</param>
/// <param name="Id">The document id within the collection.</param>
public readonly record struct DocumentKey(string Collection, string Id)
{
    /// <inheritdoc/>
    public override string ToString() => $"{Collection}/{Id}";
}
