namespace Folio.Pages;

/// <summary>The changes a checkpoint applies to one collection's tree, in any order of ids (each id at most
/// once).</summary>
/// <param name="name">The collection.</param>
/// <param name="changes">The list to hold the changes (taken, not copied); null: a new, empty one.</param>
/// <param name="hashes">The <c>IdBytes.HashOf</c> of each change's id, in the order of the changes (taken, not
/// copied), or null when the caller does not keep them.</param>
/// <param name="releaseWhenApplied">Whether the changes serve one checkpoint attempt only (the index collects them
/// anew for each), so the page store may let go of them once it applied them (<see cref="Applied"/>); false keeps
/// them for another attempt with the same object.</param>
internal sealed class CollectionChanges(string name, List<TreeChange>? changes = null, List<int>? hashes = null,
    bool releaseWhenApplied = false)
{
    public string Name { get; } = name;

    /// <summary>The changes; empty once <see cref="Applied"/> let them go.</summary>
    public List<TreeChange> Changes { get; private set; } = changes ?? [];

    /// <summary>The hashes of the changes' ids, kept after <see cref="Applied"/>; null when not given.</summary>
    public List<int>? Hashes { get; } = hashes;

    /// <summary>The changes are in the checkpoint's tree, which holds them from now on. Changes for one attempt let
    /// go of their list, so what it holds (ids given as strings, references to the commits' entries) is garbage
    /// while the checkpoint goes on serializing and writing, rather than after it.</summary>
    public void Applied()
    {
        if (releaseWhenApplied)
        {
            Changes = [];
        }
    }
}
