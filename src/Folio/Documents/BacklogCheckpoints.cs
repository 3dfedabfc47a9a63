using System.Buffers.Binary;
using System.Diagnostics;
using Folio.Journal;
using Folio.Pages;
using Folio.Transactions;
using Microsoft.Extensions.Logging;

namespace Folio.Documents;

/// <summary>
/// An open's checkpoints of a journal backlog too large for one checkpoint's memory, before the replay.
/// <para>
/// A checkpoint holds every page its documents touch in memory at once (<see cref="StoreCheckpointer"/>), and a running
/// store keeps the journal after its last checkpoint within what that memory allows. The journal an open finds may hold
/// more: the store was written by a process that could use more memory (a larger machine or container limit), or with
/// settings that let the journal grow. Replayed whole and checkpointed at once, such a backlog needs that larger memory
/// again, and a process without it fails in its first checkpoint, at every open. So when the documents after the data
/// file's checkpoint would cost a checkpoint more than four times <see cref="DocumentStoreOptions.CheckpointMemory"/>
/// (a running store starts a checkpoint at that memory and makes commits wait at twice it, so one killed during a
/// checkpoint leaves up to about four times it after the data file's checkpoint), the open reads them from the journal
/// in order and writes them to the data file in pieces of about that memory: each piece is the entries after the
/// previous one up to an entry's end, with the newest version of each document among them, checkpointed at that entry's
/// sequence, so every checkpoint holds exactly the committed state at its sequence (what a backup and a restore to a
/// point in time rely on), as a running store's own would. Once what is left is within twice the memory (where commits
/// wait), it is replayed as usual; nothing is purged here (the running store's first checkpoint purges, keeping what
/// change-feed readers in other processes hold).
/// </para>
/// <para>
/// Single-threaded, before the store exists: the data file has no reader and the journal no writer yet. The journal's
/// recovery made every entry it holds durable, so no checkpoint here is ahead of the journal. A piece that fails (a
/// full disk, a damaged page of the data file) ends the pieces, logged: the journal still holds everything and the
/// replay takes the rest into memory, as an open always did.
/// </para>
/// </summary>
internal static class BacklogCheckpoints
{
    /// <summary>
    /// Checkpoints the entries of <paramref name="journal"/> after the data file's checkpoint in pieces of about
    /// <paramref name="memory"/> bytes of estimated pages each, when more than four times that and while more than
    /// twice that remains; returns the pieces written and the documents they took.
    /// </summary>
    /// <exception cref="StoreCorruptedException">The journal does not reach back to the data file's checkpoint, or
    /// ends before it.</exception>
    /// <exception cref="FormatException">An entry is not a well-formed batch.</exception>
    /// <exception cref="OperationCanceledException"><paramref name="cancellationToken"/> was cancelled before a
    /// piece.</exception>
    public static (int Checkpoints, long Commands) Run(WriteAheadJournal journal, PageStore pages, long memory,
        ILogger logger, CancellationToken cancellationToken = default)
    {
        long checkpointed = pages.Current.Sequence;
        JournalReplay.CheckReaches(journal, checkpointed);
        long bytesPerCommand = StoreCheckpointer.PageBytesPerCommand;
        long total = CountCommands(journal, checkpointed + 1, out long entryBytes);
        if (!Exceeds(total, entryBytes, bytesPerCommand, 4 * memory, pages.LiveBytes + entryBytes))
        {
            return (0, 0);
        }

        long started = Stopwatch.GetTimestamp();
        var names = new CollectionNameCache();
        var piece = new Piece(names);
        int checkpoints = 0;
        long taken = 0;
        long takenBytes = 0;
        using (JournalReader reader = journal.OpenReader(checkpointed + 1))
        {
            while (reader.TryRead(out JournalEntry entry))
            {
                piece.Add(entry);
                if (!Exceeds(piece.Commands, piece.Bytes, bytesPerCommand, memory, long.MaxValue))
                {
                    continue; // the piece grows up to the memory, passing it by an entry at most
                }

                cancellationToken.ThrowIfCancellationRequested(); // the pieces written so far stay
                try
                {
                    pages.Checkpoint(entry.Sequence, piece.Changes());
                }
                catch (Exception error) when (error is IOException or FolioException or UnauthorizedAccessException)
                {
                    StoreLog.CheckpointFailed(logger, error);
                    break;
                }

                checkpoints++;
                taken += piece.Commands;
                takenBytes += piece.Bytes;
                bytesPerCommand = StoreCheckpointer.BytesPerCommand(pages.LastCheckpoint, piece.Commands)
                    ?? bytesPerCommand;
                piece.Clear();
                if (!Exceeds(total - taken, entryBytes - takenBytes, bytesPerCommand, 2 * memory, long.MaxValue))
                {
                    break; // what is left the running store could have held: the replay takes it
                }
            }
        }

        if (checkpoints > 0)
        {
            long elapsedMs = (long)Stopwatch.GetElapsedTime(started).TotalMilliseconds;
            long sequence = pages.Current.Sequence;
            StoreLog.BacklogCheckpointed(logger, journal.Directory, taken, total, checkpoints, sequence, elapsedMs);
        }

        return (checkpoints, taken);
    }

    /// <summary>Whether <paramref name="commands"/> documents of <paramref name="bytes"/> would cost one checkpoint
    /// more than <paramref name="memory"/> (<see cref="StoreCheckpointer.EstimatePages"/>).</summary>
    private static bool Exceeds(long commands, long bytes, long bytesPerCommand, long memory, long liveBytes) =>
        StoreCheckpointer.EstimatePages(commands, bytes, bytesPerCommand, liveBytes) > memory;

    /// <summary>The commands of the entries from <paramref name="from"/> on (each entry's count, not decoded), and
    /// the entries' bytes.</summary>
    private static long CountCommands(WriteAheadJournal journal, long from, out long bytes)
    {
        long commands = 0;
        bytes = 0;
        using JournalReader reader = journal.OpenReader(from);
        while (reader.TryRead(out JournalEntry entry))
        {
            ReadOnlySpan<byte> data = entry.Data;
            if (data.Length < BatchEncoding.FirstCommand || data[0] != BatchEncoding.Format)
            {
                throw new FormatException($"The journal entry at sequence {entry.Sequence} is not a batch.");
            }

            commands += Math.Max(0, BinaryPrimitives.ReadInt32LittleEndian(data[1..]));
            bytes += data.Length;
        }

        return commands;
    }

    /// <summary>The newest change of each document among a piece's entries, per collection.</summary>
    private sealed class Piece(CollectionNameCache names)
    {
        private readonly Dictionary<string, Dictionary<string, TreeChange>> _collections =
            new(StringComparer.Ordinal);
        private readonly List<ReplayedCommand> _commands = [];

        /// <summary>The commands added since the last <see cref="Clear"/> (a document written twice counts
        /// twice).</summary>
        public long Commands { get; private set; }

        /// <summary>The bytes of the entries added since the last <see cref="Clear"/>.</summary>
        public long Bytes { get; private set; }

        public void Add(JournalEntry entry)
        {
            ReadOnlySpan<byte> data = entry.Data;
            JournalReplay.DecodeLocations(data, names, _commands);
            foreach (ReplayedCommand command in _commands)
            {
                if (!_collections.TryGetValue(command.Key.Collection, out Dictionary<string, TreeChange>? changes))
                {
                    changes = new Dictionary<string, TreeChange>(StringComparer.Ordinal);
                    _collections.Add(command.Key.Collection, changes);
                }

                changes[command.Key.Id] = command.Kind == ChangeKind.Delete
                    ? TreeChange.Delete(command.Key.Id)
                    : TreeChange.Put(command.Key.Id, new StoredValue(entry.Sequence, entry.TimestampTicks,
                        data.Slice(command.ValueStart, command.ValueLength).ToArray()));
            }

            Commands += _commands.Count;
            Bytes += data.Length;
        }

        public List<CollectionChanges> Changes()
        {
            var result = new List<CollectionChanges>(_collections.Count);
            foreach ((string name, Dictionary<string, TreeChange> changes) in _collections)
            {
                result.Add(new CollectionChanges(name, [.. changes.Values]));
            }

            return result;
        }

        public void Clear()
        {
            _collections.Clear();
            Commands = 0;
            Bytes = 0;
        }
    }
}
