using System.Runtime.CompilerServices;
using Folio.Journal;
using Folio.Transactions;

namespace Folio;

/// <summary>
/// The change feed: every committed (durable) change, in commit order, read from the journal through its lock-free
/// readers. It can start at a saved sequence or at a time, tails new commits without polling, and fails with
/// <see cref="JournalPositionPurgedException"/> when its position is no longer in the journal. An open stream holds
/// the journal it has not read yet against the purges that follow checkpoints, up to
/// <see cref="DocumentStoreOptions.MaxChangeFeedLag"/> bytes, so a subscriber that falls behind a busy writer for a
/// while still reads every change.
/// </summary>
public sealed class DocumentChanges
{
    /// <summary>How often <see cref="ReadFilesAsync"/> looks for new commits while it follows.</summary>
    private static readonly TimeSpan s_followInterval = TimeSpan.FromMilliseconds(50);

    private readonly DocumentStore _store;

    internal DocumentChanges(DocumentStore store) => _store = store;

    /// <summary>The oldest commit the feed can still read: earlier ones were purged after a checkpoint covered
    /// them.</summary>
    public long FirstSequence
    {
        get
        {
            _store.ThrowIfDisposed();
            return _store.Journal.FirstSequence;
        }
    }

    /// <summary>
    /// Streams changes from commit <paramref name="fromSequence"/> on (1 for all), then waits for new ones until
    /// <paramref name="cancellationToken"/> fires or the store is disposed (the stream then ends).
    /// </summary>
    /// <param name="fromSequence">The first commit to report; 1 or more. A subscriber resumes from the last sequence it
    /// fully handled plus one.</param>
    /// <param name="cancellationToken">Stops the stream (with <see cref="OperationCanceledException"/>).</param>
    /// <returns>The changes, in commit order, each once; each enumeration starts again at
    /// <paramref name="fromSequence"/>.</returns>
    /// <exception cref="JournalPositionPurgedException">The position was purged (thrown at once), or the stream fell
    /// more than <see cref="DocumentStoreOptions.MaxChangeFeedLag"/> behind and reached a purged commit (thrown by the
    /// enumeration).</exception>
    public IAsyncEnumerable<DocumentChange> ReadAsync(long fromSequence, CancellationToken cancellationToken = default)
    {
        _store.ThrowIfDisposed();
        return new RepeatableStream<(JournalReader, JournalRetention?)>(OpenReader(fromSequence),
            () => OpenReader(fromSequence), static (opened, token) => Stream(opened.Item1, opened.Item2, token),
            cancellationToken);
    }

    /// <summary>Streams changes committed at or after <paramref name="from"/>, then tails; see
    /// <see cref="ReadAsync(long, CancellationToken)"/>.</summary>
    /// <param name="from">The time to start at.</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The changes, in commit order; each enumeration starts again at <paramref name="from"/>.</returns>
    public IAsyncEnumerable<DocumentChange> ReadAsync(DateTimeOffset from,
        CancellationToken cancellationToken = default)
    {
        _store.ThrowIfDisposed();
        return new RepeatableStream<(JournalReader, JournalRetention?)>(OpenReader(from), () => OpenReader(from),
            static (opened, token) => Stream(opened.Item1, opened.Item2, token), cancellationToken);
    }

    /// <summary>A reader at the first commit at or after <paramref name="from"/> and, unless the options turn it off,
    /// a hold on the journal from there.</summary>
    private (JournalReader Reader, JournalRetention? Retention) OpenReader(DateTimeOffset from)
    {
        _store.ThrowIfDisposed();
        WriteAheadJournal journal = _store.Journal;
        long maxLag = _store.Options.MaxChangeFeedLag;
        JournalRetention? retention = maxLag == 0 ? null : journal.RetainAll(maxLag);
        try
        {
            JournalReader reader = journal.OpenReader(from);
            retention?.Advance(reader.NextSequence);
            return (reader, retention);
        }
        catch
        {
            retention?.Dispose();
            throw;
        }
    }

    /// <summary>
    /// Streams the changes of commits <paramref name="fromSequence"/> to <paramref name="toSequence"/> and ends
    /// (waiting, if need be, until <paramref name="toSequence"/> is committed): a replay of a stretch of history, such
    /// as everything up to <see cref="DocumentStore.LastCommittedSequence"/>.
    /// </summary>
    /// <param name="fromSequence">The first commit to report; 1 or more.</param>
    /// <param name="toSequence">The last commit to report; below <paramref name="fromSequence"/> for none.</param>
    /// <param name="cancellationToken">Stops the stream (with <see cref="OperationCanceledException"/>).</param>
    /// <returns>The changes, in commit order, each once; each enumeration starts again at
    /// <paramref name="fromSequence"/>.</returns>
    /// <exception cref="JournalPositionPurgedException">The position was purged (thrown at once), or the stream fell
    /// more than <see cref="DocumentStoreOptions.MaxChangeFeedLag"/> behind and reached a purged commit (thrown by the
    /// enumeration).</exception>
    public IAsyncEnumerable<DocumentChange> ReadAsync(long fromSequence, long toSequence,
        CancellationToken cancellationToken = default)
    {
        _store.ThrowIfDisposed();
        return new RepeatableStream<(JournalReader, JournalRetention?)>(OpenReader(fromSequence),
            () => OpenReader(fromSequence), (opened, token) => Stream(opened.Item1, opened.Item2, token, toSequence),
            cancellationToken);
    }

    /// <summary>A reader at <paramref name="fromSequence"/> and, unless the options turn it off, a hold on the
    /// journal from there that the stream advances as it reads.</summary>
    private (JournalReader Reader, JournalRetention? Retention) OpenReader(long fromSequence)
    {
        _store.ThrowIfDisposed();
        WriteAheadJournal journal = _store.Journal;
        JournalReader reader = journal.OpenReader(fromSequence);
        long maxLag = _store.Options.MaxChangeFeedLag;
        if (maxLag == 0)
        {
            return (reader, null);
        }

        try
        {
            // A purge between the two calls makes Retain throw as OpenReader would have: at once.
            return (reader, journal.Retain(fromSequence, maxLag));
        }
        catch
        {
            reader.Dispose();
            throw;
        }
    }

    /// <summary>
    /// Reads the change feed of the store in <paramref name="folder"/> from its journal files, without opening the
    /// store: it takes no lock, and writes nothing but a small pin file in the store's <c>readers</c> folder, so it
    /// works while another process (or this one) has the store open and keeps committing; this is what
    /// <c>folio tail</c> uses. Only complete, checksummed, durable records are returned: durable by the writer's own
    /// fdatasync (as a later record's header records), or else, on Linux, made durable by the reader's (while
    /// following, after one interval), so a change seen here survives a power loss.
    /// <para>
    /// While the stream is enumerated, its pin asks the writing process's checkpoints to keep the journal it has not
    /// read yet, within the writer's <see cref="DocumentStoreOptions.MaxChangeFeedLag"/> (as for a stream of
    /// <see cref="DocumentStore.Changes"/>); dispose the enumerator, or finish it, to remove the pin. A pin a crashed
    /// reader left behind is removed by the writer's next checkpoint. Without write access to the folder the stream
    /// reads without a pin.
    /// </para>
    /// </summary>
    /// <param name="folder">The store's folder (the one given to <see cref="DocumentStore.Open"/>).</param>
    /// <param name="fromSequence">The first commit to report; 1 or more.</param>
    /// <param name="follow">False: end at the last complete commit in the files. True: then wait for new ones,
    /// looking every 50 ms, until <paramref name="cancellationToken"/> fires.</param>
    /// <param name="cancellationToken">Stops the stream (with <see cref="OperationCanceledException"/>).</param>
    /// <returns>The changes, in commit order, each once; each enumeration starts again at
    /// <paramref name="fromSequence"/>.</returns>
    /// <exception cref="DirectoryNotFoundException">The folder holds no store (thrown at once).</exception>
    /// <exception cref="ArgumentOutOfRangeException"><paramref name="fromSequence"/> is below 1 (thrown at
    /// once).</exception>
    /// <exception cref="JournalPositionPurgedException">The position is older than the journal's oldest segment
    /// (a checkpoint covered it and it was purged), at the start or later: a reader that falls behind the store's
    /// purges is told so rather than left waiting.</exception>
    /// <exception cref="JournalCorruptedException">A segment, a record the writer has written past, or one the
    /// journal's durable mark covers, is damaged, or a segment no purge removed is missing.</exception>
    public static IAsyncEnumerable<DocumentChange> ReadFilesAsync(string folder, long fromSequence, bool follow,
        CancellationToken cancellationToken = default)
    {
        ArgumentException.ThrowIfNullOrEmpty(folder);
        ArgumentOutOfRangeException.ThrowIfLessThan(fromSequence, 1);
        (string storeFolder, string journal) = Documents.StoreFileInfoReader.StoreFolders(folder);
        return new RepeatableStream<JournalFollower>(new JournalFollower(journal, fromSequence),
            () => new JournalFollower(journal, fromSequence),
            (follower, token) => StreamFiles(follower, storeFolder, follow, token), cancellationToken);
    }

    /// <summary>
    /// <see cref="ReadFilesAsync(string, long, bool, CancellationToken)"/> to the last complete commit, reading past
    /// journal damage (a salvage): <paramref name="onDamage"/> is told the first and last sequence each damage took
    /// (<see cref="JournalFollower"/>), before the changes after it.
    /// </summary>
    internal static IAsyncEnumerable<DocumentChange> ReadFilesPastDamageAsync(string folder, long fromSequence,
        Action<long, long, JournalCorruptedException> onDamage, CancellationToken cancellationToken)
    {
        (string storeFolder, string journal) = Documents.StoreFileInfoReader.StoreFolders(folder);
        return StreamFiles(new JournalFollower(journal, fromSequence, onDamage), storeFolder, follow: false,
            cancellationToken);
    }

    private static async IAsyncEnumerable<DocumentChange> StreamFiles(JournalFollower follower, string storeFolder,
        bool follow, [EnumeratorCancellation] CancellationToken cancellationToken)
    {
        using (follower)
        using (FeedPin? pin = FeedPin.TryCreate(storeFolder, follower.NextSequence))
        {
            var entries = new List<JournalEntryCopy>();
            var batch = new List<DocumentChange>();
            bool waited = false;
            while (true)
            {
                cancellationToken.ThrowIfCancellationRequested();
                entries.Clear();

                // Following, records no later header covers yet wait one interval for the writer's next record
                // before the follower syncs them itself, so keeping up with a busy writer adds no syncs to its disk.
                if (follower.ReadAvailable(entries, 1024, allowSync: !follow || waited) == 0)
                {
                    if (!follow)
                    {
                        yield break;
                    }

                    await Task.Delay(s_followInterval, cancellationToken).ConfigureAwait(false);
                    waited = true;
                    continue;
                }

                waited = false;

                pin?.Advance(follower.NextSequence); // the entries are copies: the journal may let them go

                // One entry decoded at a time: its changes copy its values, and the entries already hold them once.
                foreach (JournalEntryCopy entry in entries)
                {
                    batch.Clear();
                    AddChanges(batch, entry.Sequence, entry.TimestampTicks, entry.Data);
                    foreach (DocumentChange change in batch)
                    {
                        cancellationToken.ThrowIfCancellationRequested();
                        yield return change;
                    }
                }
            }
        }
    }

    /// <summary>
    /// What the feed's reads return: enumerable as often as the caller likes, each time from the same start. The first
    /// enumeration takes the source the call opened (so a purged position or a missing store threw at the call);
    /// every other one, later or alongside, opens its own as it starts (and throws then if the start has been purged
    /// since).
    /// </summary>
    private sealed class RepeatableStream<TSource>(
        TSource first,
        Func<TSource> open,
        Func<TSource, CancellationToken, IAsyncEnumerable<DocumentChange>> stream,
        CancellationToken cancellationToken) : IAsyncEnumerable<DocumentChange>
    {
        private int _firstTaken;

        public IAsyncEnumerator<DocumentChange> GetAsyncEnumerator(CancellationToken enumeratorToken = default)
        {
            TSource source = Interlocked.Exchange(ref _firstTaken, 1) == 0 ? first : open();
            return stream(source, cancellationToken).GetAsyncEnumerator(enumeratorToken);
        }
    }

    private static async IAsyncEnumerable<DocumentChange> Stream(JournalReader reader, JournalRetention? retention,
        [EnumeratorCancellation] CancellationToken cancellationToken, long toSequence = long.MaxValue)
    {
        using (retention)
        using (reader)
        {
            var batch = new List<DocumentChange>();
            while (reader.NextSequence <= toSequence)
            {
                bool available;
                try
                {
                    available = await reader.WaitToReadAsync(cancellationToken).ConfigureAwait(false);
                }
                catch (ObjectDisposedException)
                {
                    yield break;
                }

                if (!available)
                {
                    yield break;
                }

                // Decode what is committed now (entries point into the journal's mapping: copy before yielding).
                batch.Clear();
                try
                {
                    long bytes = 0;
                    while (batch.Count < 1024 && bytes < JournalFollower.DefaultReadBytes
                        && reader.NextSequence <= toSequence && reader.TryRead(out JournalEntry entry))
                    {
                        AddChanges(batch, entry.Sequence, entry.TimestampTicks, entry.Data);
                        bytes += entry.Data.Length;
                    }
                }
                catch (ObjectDisposedException)
                {
                    yield break;
                }
                catch (JournalPositionPurgedException e) when (retention?.LapseReason is string reason)
                {
                    throw new JournalPositionPurgedException(e.RequestedSequence, e.FirstAvailableSequence,
                        "The change-feed stream lost its hold on the journal: " + reason, e);
                }

                // The batch holds copies: the entries read so far need no hold any more.
                retention?.Advance(reader.NextSequence);

                foreach (DocumentChange change in batch)
                {
                    // Checked before every change, not only while waiting: a reader far behind must stop at once.
                    cancellationToken.ThrowIfCancellationRequested();
                    yield return change;
                }
            }
        }
    }

    /// <summary>Decodes one journal entry (a committed batch) into its changes, one per command, with copies of their
    /// values.</summary>
    private static void AddChanges(List<DocumentChange> batch, long sequence, long timestampTicks,
        ReadOnlySpan<byte> entry)
    {
        var timestamp = new DateTimeOffset(timestampTicks, TimeSpan.Zero);
        foreach (BatchCommand command in BatchEncoding.Decode(entry))
        {
            batch.Add(new DocumentChange(sequence, timestamp, command.Key.Collection, command.Key.Id, command.Kind,
                command.Value));
        }
    }
}
