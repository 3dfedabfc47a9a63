namespace Folio.Pages;

/// <summary>One document's change for a checkpoint: a put of <see cref="Value"/>, or a delete.</summary>
internal readonly record struct TreeChange(string Id, StoredValue Value, bool IsDelete)
{
    public static TreeChange Put(string id, StoredValue value) => new(id, value, false);

    public static TreeChange Delete(string id) => new(id, default, true);
}
