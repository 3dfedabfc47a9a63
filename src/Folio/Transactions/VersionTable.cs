using System.Collections.Concurrent;

namespace Folio.Transactions;

/// <summary>
/// The simplest commit state: the current version of every document, in a concurrent dictionary. The document
/// store replaces it with its multi-versioned index.
/// </summary>
internal sealed class VersionTable : ICommitState
{
    private readonly ConcurrentDictionary<DocumentKey, long> _versions = new();

    public int Count => _versions.Count;

    public long GetVersion(in DocumentKey key) => _versions.TryGetValue(key, out long version) ? version : 0;

    public void Validate(CommitBatch batch)
    {
    }

    public void Apply(CommitBatch batch, long sequence, long timestampTicks)
    {
        foreach (BatchCommand command in batch.Commands)
        {
            if (command.Kind == ChangeKind.Put)
            {
                _versions[command.Key] = sequence;
            }
            else
            {
                _versions.TryRemove(command.Key, out _);
            }
        }
    }
}
