using System.Runtime.InteropServices;
using Folio.Transactions;

namespace Folio;

/// <summary>
/// An ordered list of commands (put, delete) committed atomically by <see cref="DocumentStore.WriteAsync"/>, with
/// optional preconditions on document versions. Build it on one thread, then submit it.
/// <see cref="DocumentStore.WriteAsync"/> takes its own copy of the commands, preconditions, durability and documents'
/// bytes before it returns, so the batch and the memory its puts refer to may be changed or reused as soon as the
/// call returns, while the commit is still in flight.
/// </summary>
public sealed class CommitBatch
{
    private readonly List<BatchCommand> _commands;
    private List<(DocumentKey Key, long Version)>? _expectations;

    /// <summary>Creates an empty batch.</summary>
    public CommitBatch()
    {
        _commands = [];
    }

    /// <summary>An empty batch with room for <paramref name="capacity"/> commands (the raw API's single
    /// writes).</summary>
    internal CommitBatch(int capacity)
    {
        _commands = new List<BatchCommand>(capacity);
    }

    /// <summary>The commands, in order (a list, so that loops over it do not box an enumerator).</summary>
    internal List<BatchCommand> Commands => _commands;

    /// <summary>The number of commands (puts and deletes) in the batch.</summary>
    public int Count => _commands.Count;

    /// <summary>The preconditions: each document must be at the given version (0: must not exist) when the batch
    /// commits.</summary>
    internal ReadOnlySpan<(DocumentKey Key, long Version)> Expectations => CollectionsMarshal.AsSpan(_expectations);

    /// <summary>The durability of this batch; null (the default) uses the store's mode.</summary>
    public DurabilityMode? Durability { get; set; }

    /// <summary>What the commit state read for the batch on the writer's thread before it was submitted, for its own
    /// apply (the document index: <see cref="Documents.WrittenOverVersions"/>); null when it read nothing. The merger
    /// carries it and never reads it.</summary>
    internal object? StateNotes { get; set; }

    /// <summary>Adds a put of <paramref name="json"/> (UTF-8 JSON) as document <paramref name="id"/> of
    /// <paramref name="collection"/>.</summary>
    /// <param name="collection">The collection; not empty.</param>
    /// <param name="id">The document id; not empty.</param>
    /// <param name="json">The document's UTF-8 JSON; <see cref="DocumentStore.WriteAsync"/> copies it before it
    /// returns.</param>
    /// <returns>This batch.</returns>
    public CommitBatch Put(string collection, string id, ReadOnlyMemory<byte> json)
    {
        _commands.Add(new BatchCommand(ChangeKind.Put, Key(collection, id), json));
        return this;
    }

    /// <summary>Adds a delete of document <paramref name="id"/> of <paramref name="collection"/>.</summary>
    /// <param name="collection">The collection; not empty.</param>
    /// <param name="id">The document id; not empty.</param>
    /// <returns>This batch.</returns>
    public CommitBatch Delete(string collection, string id)
    {
        _commands.Add(new BatchCommand(ChangeKind.Delete, Key(collection, id), ReadOnlyMemory<byte>.Empty));
        return this;
    }

    /// <summary>
    /// Adds a precondition: the batch commits only if the document is at <paramref name="version"/> (its last commit
    /// sequence number; 0 means it must not exist). Otherwise the batch fails alone with
    /// <see cref="ConcurrencyException"/>.
    /// </summary>
    /// <param name="collection">The collection.</param>
    /// <param name="id">The document id.</param>
    /// <param name="version">The expected version, 0 or more.</param>
    /// <returns>This batch.</returns>
    public CommitBatch Expect(string collection, string id, long version)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(version);
        (_expectations ??= []).Add((Key(collection, id), version));
        return this;
    }

    /// <summary>The store's own copy of this batch, for <see cref="DocumentStore.WriteAsync"/>: the commands and the
    /// preconditions as they are now (the values still the caller's memory, which the merger copies before the call
    /// returns, or <see cref="CopyValues"/> when the commit must wait), so that a caller changing or reusing the batch
    /// while its commit is in flight changes nothing the commit reads.</summary>
    internal CommitBatch Snapshot()
    {
        var copy = new CommitBatch(_commands.Count) { Durability = Durability };
        copy._commands.AddRange(_commands);
        if (_expectations is { Count: > 0 } expectations)
        {
            copy._expectations = [.. expectations];
        }

        return copy;
    }

    /// <summary>Replaces every put's value with a copy of its own (a raw write that must wait before the merger
    /// copies it); returns this batch.</summary>
    internal CommitBatch CopyValues()
    {
        for (int i = 0; i < _commands.Count; i++)
        {
            BatchCommand command = _commands[i];
            if (command.Kind == ChangeKind.Put)
            {
                _commands[i] = new BatchCommand(command.Kind, command.Key, command.Value.ToArray());
            }
        }

        return this;
    }

    private static DocumentKey Key(string collection, string id)
    {
        ArgumentException.ThrowIfNullOrEmpty(collection);
        ArgumentException.ThrowIfNullOrEmpty(id);
        return new DocumentKey(collection, id);
    }
}
