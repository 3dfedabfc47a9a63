namespace Folio.Pages;

/// <summary>The changes a checkpoint applies to one collection's tree, in any order of ids (each id at most
/// once).</summary>
/// <param name="name">The collection.</param>
/// <param name="changes">The list to hold the changes (taken, not copied); null: a new, empty one.</param>
internal sealed class CollectionChanges(string name, List<TreeChange>? changes = null)
{
    public string Name { get; } = name;

    public List<TreeChange> Changes { get; } = changes ?? [];
}
