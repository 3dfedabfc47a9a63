namespace Folio;

/// <summary>What a change did to a document.</summary>
public enum ChangeKind
{
    /// <summary>The document was created or replaced.</summary>
    Put = 1,

    /// <summary>The document was deleted.</summary>
    Delete = 2,
}
