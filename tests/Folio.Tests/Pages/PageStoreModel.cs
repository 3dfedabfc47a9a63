using FsCheck;
using FsCheck.Fluent;
using Folio.Pages;

namespace Folio.Tests.Pages;

/// <summary>
/// The simple model a page store is checked against: per collection, a sorted dictionary of id to (sequence, bytes),
/// plus the changes not yet checkpointed. Helpers compare a store's checkpoint with it, check the chunks' live-page
/// counts against the trees, and drop every cached page of a checkpoint so the next reads go to disk.
/// </summary>
internal sealed class PageStoreModel
{
    public Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> Durable { get; } =
        new(StringComparer.Ordinal);

    public Dictionary<string, Dictionary<string, (long Sequence, byte[]? Bytes)>> Pending { get; } =
        new(StringComparer.Ordinal);

    public long Sequence { get; private set; }

    public void Put(string collection, string id, byte[] bytes) => PendingOf(collection)[id] = (++Sequence, bytes);

    public void Delete(string collection, string id) => PendingOf(collection)[id] = (++Sequence, null);

    /// <summary>Random programs for FsCheck: arrays of operations, at most <paramref name="maxLength"/> long.</summary>
    public static Arbitrary<int[]> Programs(int maxLength) =>
        Gen.ArrayOf(Gen.Choose(0, int.MaxValue)).Select(ops => ops.Length > maxLength ? ops[..maxLength] : ops)
            .ToArbitrary();

    /// <summary>Splits a program's operation into its kind (the low <paramref name="kindBits"/> bits), its argument
    /// (the next 20 bits) and the collection the argument names (one of three).</summary>
    public static (int Kind, int Argument, string Collection) Decode(int op, int kindBits)
    {
        int argument = (op >>> kindBits) & 0xFFFFF;
        return (op & ((1 << kindBits) - 1), argument, "c" + (argument % 3));
    }

    /// <summary>One write step of a random program, on ids <paramref name="id"/> names from
    /// <paramref name="argument"/> / 3: <paramref name="step"/> 0 puts one value of <paramref name="length"/> bytes, 1
    /// puts 60 values of 40 bytes at every seventh id, 2 deletes one id, 3 deletes 40 consecutive ids.</summary>
    public void WriteStep(int step, string collection, Func<int, string> id, int argument, int length)
    {
        int first = argument / 3;
        switch (step)
        {
            case 0:
                Put(collection, id(first), Value(argument, length));
                break;
            case 1:
                for (int i = 0; i < 60; i++)
                {
                    Put(collection, id(first + (i * 7)), Value(argument + i, 40));
                }

                break;
            case 2:
                Delete(collection, id(first));
                break;
            default:
                for (int i = 0; i < 40; i++)
                {
                    Delete(collection, id(first + i));
                }

                break;
        }
    }

    /// <summary>The pending changes as a checkpoint's input.</summary>
    public List<CollectionChanges> Changes()
    {
        var list = new List<CollectionChanges>();
        foreach ((string collection, Dictionary<string, (long Sequence, byte[]? Bytes)> changes) in Pending)
        {
            var collectionChanges = new CollectionChanges(collection);
            foreach ((string id, (long sequence, byte[]? bytes)) in changes)
            {
                collectionChanges.Changes.Add(bytes is null
                    ? TreeChange.Delete(id)
                    : TreeChange.Put(id, new StoredValue(sequence, sequence * 10, bytes)));
            }

            list.Add(collectionChanges);
        }

        return list;
    }

    /// <summary>The pending changes became durable.</summary>
    public void Checkpointed()
    {
        foreach ((string collection, Dictionary<string, (long Sequence, byte[]? Bytes)> changes) in Pending)
        {
            Apply(Durable, collection, changes);
        }

        Pending.Clear();
    }

    /// <summary>Applies <paramref name="changes"/> (a null value: a delete) to <paramref name="collection"/> of
    /// <paramref name="state"/>, which loses a collection left empty.</summary>
    public static void Apply(Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> state,
        string collection, IEnumerable<KeyValuePair<string, (long Sequence, byte[]? Bytes)>> changes)
    {
        if (!state.TryGetValue(collection, out SortedDictionary<string, (long, byte[])>? documents))
        {
            documents = new SortedDictionary<string, (long, byte[])>(StringComparer.Ordinal);
            state[collection] = documents;
        }

        foreach ((string id, (long sequence, byte[]? bytes)) in changes)
        {
            if (bytes is null)
            {
                documents.Remove(id);
            }
            else
            {
                documents[id] = (sequence, bytes);
            }
        }

        if (documents.Count == 0)
        {
            state.Remove(collection);
        }
    }

    /// <summary>The durable state as of <paramref name="checkpoint"/>: the model's, when the model has not moved past
    /// it (tests that fail a checkpoint keep the model at the last durable one).</summary>
    public Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> CopyDurableOf(
        PageCheckpoint checkpoint)
    {
        Assert.True(checkpoint.Sequence <= Sequence);
        return CopyDurable();
    }

    /// <summary>A deep copy of the durable state.</summary>
    public Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> CopyDurable()
    {
        var copy = new Dictionary<string, SortedDictionary<string, (long, byte[])>>(StringComparer.Ordinal);
        foreach ((string collection, SortedDictionary<string, (long, byte[])> documents) in Durable)
        {
            copy[collection] = new SortedDictionary<string, (long, byte[])>(documents, StringComparer.Ordinal);
        }

        return copy;
    }

    /// <summary>Asserts that <paramref name="checkpoint"/> holds exactly <paramref name="expected"/>: counts, every
    /// document by point read, full scans both ways, and a few bounded ranges.</summary>
    public static void AssertHolds(
        Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> expected,
        PageCheckpoint checkpoint, IPageReader reader, Random? random = null)
    {
        Assert.Equal(expected.Keys.Order(StringComparer.Ordinal),
            checkpoint.Collections.Keys.Order(StringComparer.Ordinal));
        foreach ((string collection, SortedDictionary<string, (long Sequence, byte[] Bytes)> documents) in expected)
        {
            CollectionTree tree = checkpoint.Collections[collection];
            Assert.Equal(documents.Count, tree.Count);
            var scanned = BTree.Range(tree.Root, null, null, false, reader).ToList();
            Assert.Equal(documents.Keys, scanned.Select(entry => entry.Key));
            int index = 0;
            foreach ((string id, (long sequence, byte[] bytes)) in documents)
            {
                StoredValue value = scanned[index++].Value;
                Assert.Equal(sequence, value.Sequence);
                Assert.Equal(sequence * 10, value.TimestampTicks);
                Assert.True(bytes.AsSpan().SequenceEqual(value.Read(reader).Span), $"{collection}/{id} bytes differ");
                Assert.True(BTree.TryGet(tree.Root, id, reader, out StoredValue found), $"{collection}/{id} missing");
                Assert.Equal(sequence, found.Sequence);
            }

            var descending = BTree.Range(tree.Root, null, null, true, reader).Select(entry => entry.Key).ToList();
            Assert.Equal(documents.Keys.Reverse(), descending);
            var visited = new List<string>();
            Assert.True(BTree.VisitKeys(tree.Root, reader, key =>
            {
                visited.Add(key.ToString());
                return true;
            }));
            Assert.Equal(documents.Keys, visited); // the walk the id filters are built from: every key, in order
            Assert.False(BTree.TryGet(tree.Root, "absent-id", reader, out _));

            random ??= new Random(1);
            string[] ids = [.. documents.Keys];
            for (int i = 0; i < 3; i++)
            {
                string from = ids[random.Next(ids.Length)] + (random.Next(2) == 0 ? "" : "!");
                string to = ids[random.Next(ids.Length)];
                var inRange = ids.Where(id => string.CompareOrdinal(id, from) >= 0 && string.CompareOrdinal(id, to) < 0)
                    .ToList();
                Assert.Equal(inRange, BTree.Range(tree.Root, from, to, false, reader).Select(e => e.Key));
                inRange.Reverse();
                Assert.Equal(inRange, BTree.Range(tree.Root, from, to, true, reader).Select(e => e.Key));
            }
        }
    }

    /// <summary>Asserts that every live chunk's live-page count equals the pages the current roots (the catalog's
    /// included) reach in it, and that no dead chunk is reached. Call it between checkpoints.</summary>
    public static void AssertLiveCountsMatchTheTrees(PageStore store)
    {
        var reached = new Dictionary<uint, int>();
        if (store.CatalogRootForTests is { } catalog)
        {
            Reach(store, catalog, reached);
        }

        foreach (CollectionTree tree in store.Current.Collections.Values)
        {
            Reach(store, tree.Root, reached);
        }

        var chunks = new Dictionary<uint, ChunkInfo>();
        foreach (ChunkInfo chunk in store.Chunks)
        {
            chunks[chunk.Id] = chunk;
        }

        foreach (uint id in reached.Keys)
        {
            Assert.True(chunks.TryGetValue(id, out ChunkInfo? chunk), $"chunk {id} is reached but not in the file");
            Assert.True(chunk.DeadAt == 0, $"chunk {id} is reached but dead since generation {chunk.DeadAt}");
        }

        foreach (ChunkInfo chunk in chunks.Values)
        {
            if (chunk.DeadAt == 0)
            {
                Assert.True(reached.GetValueOrDefault(chunk.Id) == chunk.LivePages,
                    $"chunk {chunk.Id}: {chunk.LivePages} live pages counted, {reached.GetValueOrDefault(chunk.Id)} "
                    + $"reached, of {chunk.PageCount}");
            }
        }
    }

    /// <summary>Counts the saved pages under <paramref name="reference"/> per chunk (overflow pages too).</summary>
    private static void Reach(PageStore store, PageReference reference, Dictionary<uint, int> reached)
    {
        Count(reference.Position, reached);
        TreeNode node = reference.GetNode(store.Reader);
        if (node.IsLeaf)
        {
            foreach (StoredValue value in node.Values)
            {
                if (value.IsOverflow)
                {
                    Count(value.Overflow, reached);
                }
            }

            return;
        }

        foreach (PageReference child in node.Children)
        {
            Reach(store, child, reached);
        }
    }

    private static void Count(PagePosition position, Dictionary<uint, int> reached)
    {
        Assert.True(position.IsSaved, "a checkpoint's tree holds an unsaved page");
        reached[position.ChunkId] = reached.GetValueOrDefault(position.ChunkId) + 1;
    }

    /// <summary>Nodes of <paramref name="checkpoint"/>'s trees decoded in memory that are not resident branches
    /// (<see cref="BTree.ResidentLevels"/>): leaves, or branches deeper down.</summary>
    public static int CachedBelowResidentLevels(PageCheckpoint checkpoint)
    {
        int count = 0;
        foreach (CollectionTree tree in checkpoint.Collections.Values)
        {
            count += Count(tree.Root, 0);
        }

        return count;

        static int Count(PageReference reference, int depth)
        {
            if (reference.Cached is not { } node)
            {
                return 0;
            }

            if (node.IsLeaf || depth >= BTree.ResidentLevels)
            {
                return 1;
            }

            int below = 0;
            foreach (PageReference child in node.Children)
            {
                below += Count(child, depth + 1);
            }

            return below;
        }
    }

    /// <summary>Drops every cached page of every tree of <paramref name="checkpoint"/>, so reads go to the data
    /// file (what the buffer pool's eviction will do).</summary>
    public static int DropCachedPages(PageCheckpoint checkpoint)
    {
        int dropped = 0;
        foreach (CollectionTree tree in checkpoint.Collections.Values)
        {
            dropped += Drop(tree.Root);
        }

        return dropped;

        static int Drop(PageReference reference)
        {
            int count = 0;
            if (reference.Cached is { IsLeaf: false } node)
            {
                foreach (PageReference child in node.Children)
                {
                    count += Drop(child);
                }
            }

            if (reference.Cached is not null)
            {
                reference.DropCached();
                count++;
            }

            return count;
        }
    }

    public static byte[] Value(int seed, int length)
    {
        var bytes = new byte[length];
        new Random(seed).NextBytes(bytes);
        if (length > 0)
        {
            bytes[0] = (byte)'{';
        }

        return bytes;
    }

    private Dictionary<string, (long Sequence, byte[]? Bytes)> PendingOf(string collection)
    {
        if (!Pending.TryGetValue(collection, out Dictionary<string, (long, byte[]?)>? changes))
        {
            changes = new Dictionary<string, (long, byte[]?)>(StringComparer.Ordinal);
            Pending[collection] = changes;
        }

        return changes;
    }
}
