namespace Folio.Documents;

/// <summary>
/// The versions of one document, newest first. The committer prepends with a release write of <see cref="_head"/>;
/// readers acquire-read the head and walk <see cref="DocumentVersion.Older"/> to the newest version at or below
/// their snapshot.
/// </summary>
internal sealed class VersionChain
{
    private DocumentVersion? _head;

    public DocumentVersion? Head => Volatile.Read(ref _head);

    /// <summary>Committer only: makes <paramref name="version"/> the newest version.</summary>
    public void Push(DocumentVersion version) => Volatile.Write(ref _head, version);

    /// <summary>The newest version at or below <paramref name="snapshot"/>, or null.</summary>
    public DocumentVersion? At(long snapshot)
    {
        DocumentVersion? version = Volatile.Read(ref _head);
        while (version is not null && version.Sequence > snapshot)
        {
            version = version.Older;
        }

        return version;
    }
}
