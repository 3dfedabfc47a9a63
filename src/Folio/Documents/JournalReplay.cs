using System.Runtime.InteropServices;
using System.Text;
using Folio.Journal;
using Folio.Transactions;

namespace Folio.Documents;

/// <summary>
/// Recovery replay: rebuilds a store's documents from its journal into an empty <see cref="VersionedIndex"/> while
/// the store opens, before any reader exists. Two passes over the mapped journal: the first counts puts per collection
/// (sizing each collection's arrays once), the second decodes each batch without copying values and records where
/// each value lies (<see cref="JournalDataLocation"/>); the end of the bulk load copies the values still live out of
/// the journal (<see cref="VersionedIndex.EndBulkLoad"/>). Single-threaded.
/// </summary>
internal static class JournalReplay
{
    /// <summary>Replays the entries of <paramref name="journal"/> after <paramref name="checkpointSequence"/> (the
    /// sequence the data file's checkpoint covers; 0 without one) into <paramref name="index"/>.</summary>
    /// <returns>The batches replayed, their bytes, and the puts among their commands.</returns>
    /// <exception cref="StoreCorruptedException">The journal does not reach back to the checkpoint (entries after it
    /// were purged) or ends before it.</exception>
    /// <exception cref="FormatException">An entry is not a well-formed batch.</exception>
    public static (long Batches, long Bytes, long Puts) Run(WriteAheadJournal journal, VersionedIndex index,
        long checkpointSequence = 0)
    {
        CheckReaches(journal, checkpointSequence);
        long from = checkpointSequence + 1;
        long batches = 0;
        long bytes = 0;
        var names = new CollectionNameCache();
        var putsPerCollection = new Dictionary<string, int>(StringComparer.Ordinal);
        using (JournalReader reader = journal.OpenReader(from))
        {
            while (reader.TryRead(out JournalEntry entry))
            {
                CountPuts(entry.Data, names, putsPerCollection);
            }
        }

        var commands = new List<ReplayedCommand>();
        index.BeginBulkLoad(putsPerCollection);
        using (JournalReader reader = journal.OpenReader(from))
        {
            while (reader.TryRead(out JournalEntry entry))
            {
                DecodeLocations(entry.Data, names, commands);
                index.ApplyReplayed(commands, reader.LastEntryLocation, entry.Sequence, entry.TimestampTicks);
                batches++;
                bytes += entry.Data.Length;
            }
        }

        index.EndBulkLoad();
        long puts = 0;
        foreach (int count in putsPerCollection.Values)
        {
            puts += count;
        }

        return (batches, bytes, puts);
    }

    /// <summary>Throws <see cref="StoreCorruptedException"/> unless <paramref name="journal"/> holds every entry after
    /// <paramref name="checkpointSequence"/>, the sequence the data file's checkpoint covers.</summary>
    public static void CheckReaches(WriteAheadJournal journal, long checkpointSequence)
    {
        if (journal.FirstSequence > checkpointSequence + 1)
        {
            throw new StoreCorruptedException(
                $"The journal of '{journal.Directory}' starts at sequence {journal.FirstSequence}, but the data " +
                $"file's checkpoint covers only up to {checkpointSequence}: entries in between were purged, so the " +
                $"documents cannot be rebuilt.");
        }

        if (journal.LastAppendedSequence < checkpointSequence)
        {
            throw new StoreCorruptedException(
                $"The journal of '{journal.Directory}' ends at sequence {journal.LastAppendedSequence}, before the " +
                $"data file's checkpoint at {checkpointSequence}: the journal lost entries the checkpoint relies on " +
                $"(the journal folder was replaced or truncated).");
        }
    }

    /// <summary>
    /// Decodes a batch entry without copying its values: each command says where its value lies in
    /// <paramref name="entry"/>. <paramref name="commands"/> is cleared first; collection names come from
    /// <paramref name="names"/>. Throws <see cref="FormatException"/> on malformed bytes.
    /// </summary>
    public static void DecodeLocations(ReadOnlySpan<byte> entry, CollectionNameCache names,
        List<ReplayedCommand> commands)
    {
        commands.Clear();
        var sink = new LocatingSink(commands, names);
        BatchEncoding.Decode(entry, ref sink);
    }

    /// <summary>
    /// Adds the puts of a batch entry to <paramref name="putsPerCollection"/> without decoding ids or copying values
    /// (the sizing pass). Throws <see cref="FormatException"/> on malformed bytes.
    /// </summary>
    public static void CountPuts(ReadOnlySpan<byte> entry, CollectionNameCache names, Dictionary<string,
        int> putsPerCollection)
    {
        var sink = new CountingSink(putsPerCollection, names);
        BatchEncoding.Decode(entry, ref sink);
        sink.Flush();
    }

    /// <summary>Commands with where their values are in the entry.</summary>
    private readonly struct LocatingSink(List<ReplayedCommand> commands, CollectionNameCache names)
        : BatchEncoding.ICommandSink
    {
        public void EnsureCapacity(int count) => commands.EnsureCapacity(count);

        public string Collection(ReadOnlySpan<byte> utf8) => names.Get(utf8);

        public void Add(ChangeKind kind, string collection, ReadOnlySpan<byte> id, ReadOnlySpan<byte> entry,
            int valueStart, int valueLength) =>
            commands.Add(
                new ReplayedCommand(kind, new DocumentKey(collection, Encoding.UTF8.GetString(id)), valueStart,
                valueLength));
    }

    /// <summary>
    /// Puts per collection, added to a dictionary once per run of commands of one collection (batches mostly write
    /// one). Call <see cref="Flush"/> after the entry.
    /// </summary>
    private struct CountingSink(Dictionary<string, int> putsPerCollection, CollectionNameCache names)
        : BatchEncoding.ICommandSink
    {
        private string? _collection;
        private int _puts;

        public readonly void EnsureCapacity(int count)
        {
        }

        public readonly string Collection(ReadOnlySpan<byte> utf8) => names.Get(utf8);

        public void Add(ChangeKind kind, string collection, ReadOnlySpan<byte> id, ReadOnlySpan<byte> entry,
            int valueStart, int valueLength)
        {
            if (kind != ChangeKind.Put)
            {
                return;
            }

            if (!ReferenceEquals(collection, _collection))
            {
                Flush();
                _collection = collection;
            }

            _puts++;
        }

        public void Flush()
        {
            if (_collection is not null)
            {
                ref int total = ref CollectionsMarshal.GetValueRefOrAddDefault(putsPerCollection, _collection, out _);
                total = (int)Math.Min((long)total + _puts, int.MaxValue);
            }

            _collection = null;
            _puts = 0;
        }
    }
}
