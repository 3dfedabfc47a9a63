namespace Folio.Transactions;

/// <summary>What a command in a batch does.</summary>
public enum CommandKind : byte
{
    /// <summary>Creates or replaces a document with the given JSON.</summary>
    Put = 1,

    /// <summary>Removes a document (a no-op when it does not exist).</summary>
    Delete = 2,
}
