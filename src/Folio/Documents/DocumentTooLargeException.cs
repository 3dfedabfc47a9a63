namespace Folio;

/// <summary>
/// Thrown when a document exceeds <see cref="DocumentStoreOptions.MaxDocumentSize"/>, or when the documents of one
/// save together exceed what one journal record holds (<see cref="DocumentStoreOptions.SegmentSize"/> less its
/// headers: a save is atomic and written as one record). Nothing was written.
/// </summary>
public sealed class DocumentTooLargeException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public DocumentTooLargeException()
        : base("The document is larger than the store allows.")
    {
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public DocumentTooLargeException(string message)
        : base(message)
    {
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public DocumentTooLargeException(string message, Exception? innerException)
        : base(message, innerException)
    {
    }

    internal DocumentTooLargeException(string collection, string id, long size, int limit)
        : base($"Document '{collection}/{id}' is {size} bytes; the store allows at most {limit} " +
            $"(DocumentStoreOptions.MaxDocumentSize).")
    {
        Size = size;
        Limit = limit;
    }

    internal DocumentTooLargeException(string message, long size, int limit)
        : base(message)
    {
        Size = size;
        Limit = limit;
    }

    /// <summary>The document's (or the save's) size in bytes.</summary>
    public long Size { get; }

    /// <summary>The configured limit in bytes.</summary>
    public int Limit { get; }
}
