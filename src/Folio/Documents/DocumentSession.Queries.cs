using System.Text.Json;
using Folio.Documents;

namespace Folio;

public sealed partial class DocumentSession
{
    /// <summary>
    /// Streams the documents of <typeparamref name="T"/>'s collection whose ids start with <paramref name="prefix"/>,
    /// in ordinal id order, from the session's snapshot. Results are tracked as loads are (see
    /// <see cref="TrackQueryResults"/>).
    /// </summary>
    /// <typeparam name="T">The entity type; names the collection.</typeparam>
    /// <param name="prefix">The id prefix ("" for all).</param>
    /// <param name="descending">Newest-id-first order.</param>
    /// <param name="skip">Matches to skip (paging); 0 or more.</param>
    /// <param name="take">Most matches to return; 0 or more.</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The matching entities.</returns>
    public IAsyncEnumerable<T> QueryByPrefixAsync<T>(string prefix, bool descending = false, int skip = 0,
        int take = int.MaxValue, CancellationToken cancellationToken = default)
        where T : class
    {
        ArgumentNullException.ThrowIfNull(prefix);
        string collection = BeginQuery<T>(skip, take);
        int expected = Expected(skip, take);
        return Page<T>(collection, sequence => _store.Index.Prefix(collection, prefix, descending, sequence, expected),
            null, skip, take, cancellationToken);
    }

    /// <summary>
    /// Streams the documents of <typeparamref name="T"/>'s collection with ids in [<paramref name="fromInclusive"/>,
    /// <paramref name="toExclusive"/>) (null: unbounded), in ordinal id order, from the session's snapshot. Results are
    /// tracked as loads are (see <see cref="TrackQueryResults"/>).
    /// </summary>
    /// <typeparam name="T">The entity type; names the collection.</typeparam>
    /// <param name="fromInclusive">The lowest id, or null.</param>
    /// <param name="toExclusive">The id above the range, or null.</param>
    /// <param name="descending">Highest id first.</param>
    /// <param name="skip">Matches to skip; 0 or more.</param>
    /// <param name="take">Most matches to return; 0 or more.</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The matching entities.</returns>
    /// <exception cref="ArgumentException">The range is inverted.</exception>
    public IAsyncEnumerable<T> QueryByRangeAsync<T>(string? fromInclusive, string? toExclusive, bool descending = false,
        int skip = 0, int take = int.MaxValue, CancellationToken cancellationToken = default)
        where T : class
    {
        VersionedIndex.CheckRange(fromInclusive, toExclusive);
        string collection = BeginQuery<T>(skip, take);
        int expected = Expected(skip, take);
        return Page<T>(collection, sequence => _store.Index.Range(collection, fromInclusive, toExclusive, descending,
            sequence, expected), null, skip, take, cancellationToken);
    }

    /// <summary>Streams every document of <typeparamref name="T"/>'s collection that matches
    /// <paramref name="predicate"/>, in id order, from the session's snapshot. Results are tracked as loads are (see
    /// <see cref="TrackQueryResults"/>); the predicate sees the tracked entity of a document the session
    /// tracks.</summary>
    /// <typeparam name="T">The entity type; names the collection.</typeparam>
    /// <param name="predicate">The filter, applied to each deserialized entity; null for all.</param>
    /// <param name="skip">Matches to skip; 0 or more.</param>
    /// <param name="take">Most matches to return; 0 or more.</param>
    /// <param name="cancellationToken">Stops the stream.</param>
    /// <returns>The matching entities.</returns>
    public IAsyncEnumerable<T> QueryAsync<T>(Func<T, bool>? predicate = null, int skip = 0, int take = int.MaxValue,
        CancellationToken cancellationToken = default)
        where T : class
    {
        string collection = BeginQuery<T>(skip, take);
        return Page(collection, sequence => _store.Index.Range(collection, null, null, descending: false, sequence),
            predicate, skip, take, cancellationToken);
    }

    /// <summary>The number of documents in <typeparamref name="T"/>'s collection at the session's snapshot. The
    /// collection is not walked: the count is the one the last checkpoint stored with the collection's tree, corrected
    /// for each document created or deleted since (at most a tree lookup for each).</summary>
    /// <typeparam name="T">The entity type; names the collection.</typeparam>
    /// <param name="cancellationToken">Checked once before the count.</param>
    /// <returns>The count.</returns>
    public ValueTask<int> CountAsync<T>(CancellationToken cancellationToken = default)
    {
        cancellationToken.ThrowIfCancellationRequested();
        string collection = BeginQuery<T>(0, 0);
        IndexSnapshot snapshot = _snapshot!;
        int count = _store.Index.Count(collection, snapshot.Sequence);
        snapshot.ThrowIfExpired(); // after the reads: see SnapshotRegistry
        return new ValueTask<int>(count);
    }

    /// <summary>The entries a query without a filter reads at most (a prefetch hint): its skip and take, or
    /// <see cref="int.MaxValue"/> when it takes everything.</summary>
    private static int Expected(int skip, int take) =>
        take == int.MaxValue ? int.MaxValue : (int)Math.Min((long)skip + take, int.MaxValue);

    /// <summary>Checks a query's arguments and fixes the session's snapshot if this is its first read (the query
    /// reads at the session's snapshot when its enumeration starts: a later one if the session saved
    /// meanwhile).</summary>
    private string BeginQuery<T>(int skip, int take)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(skip);
        ArgumentOutOfRangeException.ThrowIfNegative(take);
        Enter();
        try
        {
            string collection = CollectionOf(typeof(T));
            _snapshot ??= _store.Index.OpenSnapshot();
            return collection;
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>The session's snapshot, opened if a save released the last one, with a reader added for an
    /// enumeration (which ends it with <see cref="IndexSnapshot.EndRead"/>).</summary>
    private IndexSnapshot BeginRead()
    {
        Enter();
        try
        {
            IndexSnapshot snapshot = _snapshot ??= _store.Index.OpenSnapshot();
            snapshot.BeginRead();
            return snapshot;
        }
        finally
        {
            Exit();
        }
    }

    private SynchronousAsyncEnumerable<T> Page<T>(string collection,
        Func<long, IEnumerable<(string Id, DocumentVersion Version)>> matches, Func<T, bool>? predicate, int skip,
        int take, CancellationToken cancellationToken)
        where T : class
            => new SynchronousAsyncEnumerable<T>(Iterate(collection, matches, predicate, skip, take,
                TrackQueryResults, cancellationToken));

    /// <summary>
    /// The query's results, read at the session's snapshot when the enumeration starts (it holds the snapshot open
    /// until it ends, even if a save releases it meanwhile). With <paramref name="track"/>, each is looked up in the
    /// identity map first: a document this session deleted is left out (it counts toward neither skip nor take), a
    /// tracked one comes back as its tracked entity, and any other returned is tracked as loaded at its version, so
    /// that its changes are saved conditionally. The map is entered only between results, never across a
    /// <c>yield</c>, so the caller's loop may use the session.
    /// </summary>
    private IEnumerable<T> Iterate<T>(string collection,
        Func<long, IEnumerable<(string Id, DocumentVersion Version)>> matches, Func<T, bool>? predicate, int skip,
        int take, bool track, CancellationToken cancellationToken)
        where T : class
    {
        cancellationToken.ThrowIfCancellationRequested(); // also when nothing matches
        IndexSnapshot snapshot = BeginRead();
        try
        {
            int skipped = 0;
            int taken = 0;
            foreach ((string id, DocumentVersion version) in matches(snapshot.Sequence))
            {
                if (taken == take)
                {
                    yield break;
                }

                cancellationToken.ThrowIfCancellationRequested();
                ObjectDisposedException.ThrowIf(_disposed, this);
                // the match was read at the snapshot: trust it only if the snapshot still holds
                snapshot.ThrowIfExpired();
                var key = new DocumentKey(collection, id);
                Tracked? tracked = track ? FindTracked(key) : null;
                if (tracked is { Deleted: true })
                {
                    continue;
                }

                if (predicate is null && skipped < skip)
                {
                    skipped++;
                    continue;
                }

                T entity = tracked?.Entity as T ?? Read<T>(key, version);
                if (predicate is not null)
                {
                    if (!predicate(entity))
                    {
                        continue;
                    }

                    if (skipped < skip)
                    {
                        skipped++;
                        continue;
                    }
                }

                if (track && tracked is null)
                {
                    entity = TrackQueryResult(key, version, entity);
                }

                taken++;
                yield return entity;
            }
        }
        finally
        {
            snapshot.EndRead();
        }
    }

    private Tracked? FindTracked(DocumentKey key)
    {
        Enter();
        try
        {
            return _tracked.TryGet(key, out Tracked? tracked) ? tracked : null;
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>Tracks a query's result, unless the predicate tracked the document meanwhile (a load from it): then
    /// the tracked entity is the result.</summary>
    private T TrackQueryResult<T>(DocumentKey key, DocumentVersion version, T entity)
        where T : class
    {
        Enter();
        try
        {
            if (_tracked.TryGet(key, out Tracked? tracked))
            {
                return tracked.Entity as T ?? entity;
            }

            TrackRead(key, version, entity);
            return entity;
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>A query's sequence exposed as <see cref="IAsyncEnumerable{T}"/>: each <c>MoveNextAsync</c> runs the
    /// next step on the caller's thread and is complete when it returns (a page the buffer pool does not hold is read
    /// with a synchronous positional read, as a point load's is), so enumerating costs no task or state machine per
    /// item; the token is checked before each step.</summary>
    private sealed class SynchronousAsyncEnumerable<T>(IEnumerable<T> items) : IAsyncEnumerable<T>
    {
        public IAsyncEnumerator<T> GetAsyncEnumerator(CancellationToken cancellationToken = default)
            => new Enumerator(items.GetEnumerator(), cancellationToken);

        private sealed class Enumerator(IEnumerator<T> inner, CancellationToken cancellationToken) : IAsyncEnumerator<T>
        {
            public T Current => inner.Current;

            public ValueTask<bool> MoveNextAsync()
            {
                cancellationToken.ThrowIfCancellationRequested();
                return new ValueTask<bool>(inner.MoveNext());
            }

            public ValueTask DisposeAsync()
            {
                inner.Dispose();
                return ValueTask.CompletedTask;
            }
        }
    }
}
