using System.Collections.Concurrent;

namespace Folio.Transactions;

/// <summary>
/// The simplest commit state: the current version of every document, in a concurrent dictionary. A double for tests,
/// the crash host and the bare-merger benchmark (the document store uses its multi-versioned index); compiled into
/// each of them, not into the product.
/// </summary>
internal sealed class VersionTable : ICommitState
{
    private readonly ConcurrentDictionary<DocumentKey, long> _versions = new();
    private readonly Queue<(CommitBatch Batch, long Sequence)> _applied = new(); // committer only: not yet published

    public int Count => _versions.Count;

    /// <summary>Forgets every version (no commit may be in flight): the bare-merger benchmark starts each iteration
    /// with an empty table, so its baseline does not slow down as the table of every id ever written grows.</summary>
    public void Clear()
    {
        _versions.Clear();
        _applied.Clear();
    }

    public long GetVersion(in DocumentKey key) => _versions.TryGetValue(key, out long version) ? version : 0;

    public void Validate(CommitBatch batch)
    {
    }

    public void Apply(CommitBatch batch, ReadOnlyMemory<byte> encoded, long sequence, long timestampTicks) =>
        _applied.Enqueue((batch, sequence));

    public void Publish(long sequence)
    {
        while (_applied.TryPeek(out var next) && next.Sequence <= sequence)
        {
            _applied.Dequeue();
            Write(next.Batch, next.Sequence);
        }
    }

    private void Write(CommitBatch batch, long sequence)
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
