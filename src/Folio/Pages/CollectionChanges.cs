namespace Folio.Pages;

/// <summary>The changes a checkpoint applies to one collection's tree, in any order of ids (each id at most
/// once).</summary>
internal sealed class CollectionChanges(string name)
{
    public string Name { get; } = name;

    public List<TreeChange> Changes { get; } = [];
}
