using System.Collections.Concurrent;
using System.Diagnostics.CodeAnalysis;
using System.Globalization;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text.Json;
using Folio.Documents;
using Folio.Transactions;

namespace Folio;

/// <summary>
/// A unit of work over a <see cref="DocumentStore"/>: an identity map of the documents it loaded or stored, change
/// tracking (only changed documents are written) and optimistic concurrency (a document loaded at version V is
/// written only if it is still at V). Reads see one snapshot: the state at the session's first read, or at its first
/// read after a save that wrote (so its queries and counts include what it saved).
/// <para>
/// A session is not bound to a thread: it works across <c>await</c> and the thread pool. It is used by one caller
/// at a time; a second call while one is running (say, two <see cref="SaveChangesAsync"/> at once) throws
/// <see cref="InvalidOperationException"/>.
/// </para>
/// </summary>
public sealed partial class DocumentSession : IDisposable, IAsyncDisposable
{
    private static readonly ConcurrentDictionary<Type, PropertyInfo?> s_idProperties = new();

    private readonly DocumentStore _store;
    private readonly TrackedDocuments _tracked = new();
    private IndexSnapshot? _snapshot;
    private Type? _lastType;
    private DurabilityMode? _durability;
    private string? _lastCollection;
    private int _inUse;
    private bool _disposed;

    internal DocumentSession(DocumentStore store) => _store = store;

    /// <summary>The snapshot the session reads at, or null before its first read (and again after a save that wrote,
    /// until the next read).</summary>
    public long? SnapshotSequence => _snapshot?.Sequence;

    /// <summary>
    /// Whether the entities a query returns join the session's identity map as a load's do (default true): a change
    /// to one is saved by <see cref="SaveChangesAsync"/> with the version read, so it fails with
    /// <see cref="ConcurrencyException"/> if another commit changed the document since; a document this session
    /// tracks already comes back as the tracked entity, and one it deleted not at all. Set false before a query that
    /// only reads many documents, so the session does not keep every result until it is disposed. Read when a query
    /// starts.
    /// </summary>
    public bool TrackQueryResults { get; set; } = true;

    /// <summary>
    /// When this session's saves are acknowledged; null (the default) for the store's
    /// <see cref="DocumentStoreOptions.Durability"/>. In a <see cref="DurabilityMode.Buffered"/> store, set
    /// <see cref="DurabilityMode.Durable"/> for saves that must be on disk when <see cref="SaveChangesAsync"/> returns:
    /// their commit group is fsynced (a durable batch is never merged into a group that is not).
    /// </summary>
    public DurabilityMode? Durability
    {
        get => _durability;
        set
        {
            if (value is { } mode && !Enum.IsDefined(mode))
            {
                ThrowHelper.ThrowArgumentOutOfRange(nameof(value), mode, "Durability must be Durable or Buffered.");
            }

            _durability = value;
        }
    }

    /// <summary>
    /// Tracks <paramref name="entity"/> for storing at the next <see cref="SaveChangesAsync"/>. Its id is its string
    /// <c>Id</c> property; when that is empty an id is generated (<c>{collection}/{19-digit time}</c>, above every id
    /// generated before, in this process or, going by the store's commit times, an earlier one) and set, and the save
    /// requires that no document has it (else <see cref="ConcurrencyException"/>; it never overwrites one). An
    /// <c>Id</c> property of type <see cref="int"/>, <see cref="long"/>, <see cref="uint"/>, <see cref="ulong"/>,
    /// <see cref="short"/>, <see cref="ushort"/> or <see cref="Guid"/> names the document by its invariant text
    /// (<c>42</c>; a GUID with hyphens, lower case), so <c>LoadAsync&lt;T&gt;("42")</c> finds it; when it holds the
    /// default (0, <see cref="Guid.Empty"/>) an id is generated as for an empty string, which the property cannot
    /// hold: <see cref="GetId"/> tells it.
    /// </summary>
    /// <param name="entity">The entity; its collection is <see cref="DocumentStoreOptions.CollectionName"/> of its
    /// type.</param>
    public void Store(object entity) => Store(entity, null);

    /// <summary>Tracks <paramref name="entity"/> under <paramref name="id"/> (or its <c>Id</c> property, or a generated
    /// id).</summary>
    /// <param name="entity">The entity.</param>
    /// <param name="id">The id; null to use the entity's <c>Id</c> property or generate one.</param>
    public void Store(object entity, string? id) => Store(entity, id, expectedVersion: null);

    /// <summary>
    /// Tracks <paramref name="entity"/> and makes the save conditional: it commits only if the document is at
    /// <paramref name="expectedVersion"/> (0: must not exist), else <see cref="SaveChangesAsync"/> throws
    /// <see cref="ConcurrencyException"/>.
    /// </summary>
    /// <param name="entity">The entity.</param>
    /// <param name="id">The id; null to use the entity's <c>Id</c> property or generate one.</param>
    /// <param name="expectedVersion">The version the document must have; null for the default (the loaded version, or
    /// unconditional for a new entity).</param>
    public void Store(object entity, string? id, long? expectedVersion)
    {
        if (expectedVersion is < 0)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(expectedVersion), expectedVersion,
                "An expected version is 0 (must not exist) or more.");
        }

        ArgumentNullException.ThrowIfNull(entity);
        Enter();
        try
        {
            Type type = entity.GetType();
            string collection = CollectionOf(type);
            PropertyInfo? idProperty = IdProperty(type);
            Tracked? tracking = _tracked.FindByEntity(entity);
            if (id is null && tracking is not null)
            {
                // already tracked (loaded or stored): keep its id, which its Id property must still name
                string? named = IdText(idProperty?.GetValue(entity));
                if (named is not null && named != tracking.IdAtTrack)
                {
                    ThrowIdChanged(tracking.Key, tracking.IdAtTrack, named);
                }

                id = tracking.Key.Id;
            }

            if (id is null)
            {
                string? fromProperty = IdText(idProperty?.GetValue(entity));
                if (string.IsNullOrEmpty(fromProperty))
                {
                    id = GenerateId(collection, idProperty, type);
                    expectedVersion ??= 0; // a generated id names a new document: never overwrite one
                }
                else
                {
                    id = fromProperty;
                }
            }

            DocumentIds.Validate(id);
            var key = new DocumentKey(collection, id);
            if (tracking is not null && tracking.Key != key)
            {
                ThrowHelper.ThrowInvalidOperation($"This entity is already tracked as '{tracking.Key}'.");
            }

            _tracked.TryGet(key, out Tracked? tracked);
            if (tracked?.Entity is not null && !ReferenceEquals(tracked.Entity, entity))
            {
                ThrowHelper.ThrowInvalidOperation($"Another entity is already tracked as '{key}' in this session.");
            }

            // Only once nothing can refuse the call: a refused store leaves the entity as it was.
            if (idProperty is { CanWrite: true }
                && IdValue(idProperty.PropertyType, id) is { } value)
            {
                idProperty.SetValue(entity, value);
            }

            if (tracked is not null)
            {
                _tracked.SetEntity(tracked, entity);
                tracked.IdAtTrack = CurrentIdText(type, entity);
                tracked.Deleted = false;
                tracked.ExpectedVersion = expectedVersion ?? tracked.ExpectedVersion;
            }
            else
            {
                _tracked.Add(new Tracked(key, type) { Entity = entity, ExpectedVersion = expectedVersion,
                    IdAtTrack = CurrentIdText(type, entity) });
            }
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>
    /// An id for a new entity whose <c>Id</c> is empty (or that has none), one its <c>Id</c> property can hold: a
    /// number for a writable <see cref="long"/> or <see cref="ulong"/> one, a version 7 GUID (ordered by time) for a
    /// writable <see cref="Guid"/>, else <c>{collection}/{ticks}</c>. A smaller number type cannot hold a generated id:
    /// refused, since an entity whose <c>Id</c> does not name its document would be stored again as a new document
    /// when a later session stores it (an entity read in one request and stored in the next).
    /// </summary>
    private static string GenerateId(string collection, PropertyInfo? idProperty, Type type)
    {
        Type? idType = idProperty is { CanWrite: true } ? IdValueType(idProperty) : null;
        if (idType == typeof(long) || idType == typeof(ulong))
        {
            return DocumentIds.GenerateNumber();
        }

        if (idType == typeof(Guid))
        {
            return Guid.CreateVersion7().ToString("D");
        }

        if (idType is not null && idType != typeof(string))
        {
            ThrowNumberIdNotGenerated(type, idType);
        }

        string id = DocumentIds.Generate(collection);
        if (DocumentIds.IsTooLong(id))
        {
            ThrowGeneratedIdTooLong(collection);
        }

        return id;
    }

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowNumberIdNotGenerated(Type type, Type idType) =>
        ThrowHelper.ThrowArgument("entity",
            $"The {type.Name} has no Id (its Id of type {idType.Name} is 0), and a generated id does not fit in " +
            $"{idType.Name}: set the Id, or make it a long, a Guid or a string, which get generated ids.");

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowGeneratedIdTooLong(string collection) =>
        ThrowHelper.ThrowArgument("entity",
            $"The entity has no Id, and the id generated for it (its collection name, '/' and 19 digits) would be " +
            $"over {DocumentIds.MaxIdBytes} UTF-8 bytes: the collection name is " +
            $"{System.Text.Encoding.UTF8.GetByteCount(collection)}. Give the entity an Id, or use a collection name " +
            $"of at most {DocumentIds.MaxIdBytes - 20} bytes.");

    /// <summary>Loads a document as <typeparamref name="T"/> from the session's snapshot (or its identity
    /// map).</summary>
    /// <typeparam name="T">The entity type; its collection is <see cref="DocumentStoreOptions.CollectionName"/> of
    /// it.</typeparam>
    /// <param name="id">The id.</param>
    /// <param name="cancellationToken">Checked before the read. The read runs on the calling thread and the task is
    /// complete when this returns: from memory, or from the data file through the buffer pool (a page not cached is
    /// read synchronously, not cancelled midway).</param>
    /// <returns>The entity, or null when it does not exist (or was deleted in this session).</returns>
    public ValueTask<T?> LoadAsync<T>(string id, CancellationToken cancellationToken = default)
        where T : class
    {
        Enter();
        try
        {
            cancellationToken.ThrowIfCancellationRequested();
            return new ValueTask<T?>(LoadCore<T>(id));
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>Loads several documents; the result maps each requested id to its entity or null.</summary>
    /// <typeparam name="T">The entity type.</typeparam>
    /// <param name="ids">The ids.</param>
    /// <param name="cancellationToken">Checked before each id's read; the reads run as for
    /// <see cref="LoadAsync{T}(string, CancellationToken)"/>.</param>
    /// <returns>Every requested id with its entity, or null when it does not exist.</returns>
    public ValueTask<IReadOnlyDictionary<string,
        T?>> LoadAsync<T>(IEnumerable<string> ids, CancellationToken cancellationToken = default)
        where T : class
    {
        ArgumentNullException.ThrowIfNull(ids);
        Enter();
        try
        {
            var result = new Dictionary<string, T?>(StringComparer.Ordinal);
            foreach (string id in ids)
            {
                cancellationToken.ThrowIfCancellationRequested();
                result[id] = LoadCore<T>(id);
            }

            return new ValueTask<IReadOnlyDictionary<string, T?>>(result);
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>
    /// Makes the next <see cref="SaveChangesAsync"/> succeed only if the document behind <paramref name="entity"/> is
    /// still at the version this session read or last saved, whether or not the entity changed (a save otherwise
    /// checks only the documents it writes). Sessions read a snapshot and check their writes: that is snapshot
    /// isolation, under which two sessions that each read two documents and each change a different one both commit
    /// (write skew). Require the documents a decision rests on unchanged, and the save fails with
    /// <see cref="ConcurrencyException"/> instead; a save that writes nothing then checks them against the latest
    /// commits without committing. The requirement holds until a save succeeds.
    /// </summary>
    /// <param name="entity">An entity this session loaded, queried or saved.</param>
    /// <exception cref="InvalidOperationException">The session does not track <paramref name="entity"/>, or has no
    /// version of it from the store (stored new and not saved yet, or deleted).</exception>
    public void RequireUnchanged(object entity)
    {
        ArgumentNullException.ThrowIfNull(entity);
        Enter();
        try
        {
            if (_tracked.FindByEntity(entity) is not { } tracked)
            {
                ThrowNotTracked();
                return;
            }

            if (!tracked.Loaded || tracked.Deleted || tracked.Version <= 0)
            {
                ThrowHelper.ThrowInvalidOperation($"This session has no version of '{tracked.Key}' from the store " +
                    "(it was stored new and not saved yet, or deleted): there is no version to require.");
            }

            tracked.ExpectedVersion = tracked.Version;
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>Marks document <paramref name="id"/> of <typeparamref name="T"/>'s collection for deletion at the next
    /// save.</summary>
    /// <typeparam name="T">The entity type that names the collection.</typeparam>
    /// <param name="id">The id.</param>
    public void Delete<T>(string id)
    {
        Enter();
        try
        {
            DocumentIds.Validate(id);
            var key = new DocumentKey(CollectionOf(typeof(T)), id);
            if (!_tracked.TryGet(key, out Tracked? tracked))
            {
                // Not loaded: delete whatever version is current at save time.
                _tracked.Add(tracked = new Tracked(key, typeof(T)) { Version = -1 });
            }

            _tracked.SetEntity(tracked, null);
            tracked.Deleted = true;
        }
        finally
        {
            Exit();
        }
    }

    /// <summary>The id of a tracked entity: the one it was loaded or stored under, its <c>Id</c> property's, or the one
    /// <see cref="Store(object)"/> generated for it (the only way to learn a generated id of a type without a writable
    /// <c>Id</c> property).</summary>
    /// <param name="entity">A tracked entity.</param>
    /// <returns>Its id.</returns>
    /// <exception cref="InvalidOperationException">The session does not track <paramref name="entity"/>.</exception>
    public string GetId(object entity)
    {
        ArgumentNullException.ThrowIfNull(entity);
        if (_tracked.FindByEntity(entity) is not { } tracked)
        {
            ThrowNotTracked();
            return null!;
        }

        return tracked.Key.Id;
    }

    /// <summary>The version (commit sequence) of a tracked entity as last loaded or saved by this session; 0 if
    /// new.</summary>
    /// <param name="entity">A tracked entity.</param>
    /// <returns>Its version.</returns>
    public long GetVersion(object entity)
    {
        ArgumentNullException.ThrowIfNull(entity);
        return _tracked.FindByEntity(entity) is { } tracked ? Math.Max(0, tracked.Version) : ThrowNotTracked();
    }

    /// <summary>The last-modified time (UTC) of a tracked entity as last loaded or saved, or null for a new
    /// one.</summary>
    /// <param name="entity">A tracked entity.</param>
    /// <returns>Its last-modified time.</returns>
    public DateTimeOffset? GetLastModified(object entity)
    {
        ArgumentNullException.ThrowIfNull(entity);
        if (_tracked.FindByEntity(entity) is not { } tracked)
        {
            ThrowNotTracked();
            return null;
        }

        long ticks = tracked.TimestampTicks;
        return ticks == 0 ? null : new DateTimeOffset(ticks, TimeSpan.Zero);
    }

    /// <summary>
    /// Writes every new, changed or deleted document as one atomic batch (one commit, durable per the store's mode).
    /// Documents this session loaded are written only if nobody changed them since; otherwise nothing is written and
    /// <see cref="ConcurrencyException"/> names them. After the save the session reads what it wrote: saved entities
    /// carry the commit's version, and a deleted document reads as absent.
    /// </summary>
    /// <param name="cancellationToken">Cancels while the batch waits for its commit group.</param>
    /// <returns>A task that completes when the batch is committed.</returns>
    /// <exception cref="DocumentTooLargeException">A document is over
    /// <see cref="DocumentStoreOptions.MaxDocumentSize"/>, or the documents together are over what one save holds
    /// (<see cref="DocumentStoreOptions.SegmentSize"/> less about 1 KiB): nothing was written, and the session still
    /// tracks its changes.</exception>
    /// <exception cref="StoreUnavailableException">The journal could not create its next segment
    /// (<see cref="StoreFullException"/>: the disk is full): nothing was written, the session still tracks its
    /// changes, and the store stays open (save again once the cause is gone).</exception>
    /// <exception cref="InvalidOperationException">A tracked entity's <c>Id</c> now names another document than it
    /// was tracked under, or an entity serialized to the JSON literal <c>null</c> (a custom converter): nothing was
    /// written, and the session still tracks its changes.</exception>
    /// <exception cref="StoreCorruptedException">A page of the data file holding the version a change replaces failed
    /// its checks: nothing was written, the session still tracks its changes, and the store stays usable.</exception>
    public async Task SaveChangesAsync(CancellationToken cancellationToken = default)
    {
        Enter();
        try
        {
            // The changes are marked on their Tracked entries (Saving) rather than listed, so a save allocates no
            // list; every mark is cleared before this returns, whether the commit holds or not.
            var batch = new CommitBatch(Math.Min(_tracked.Count, 8)) { Durability = _durability };
            int written = 0;
            int checkedOnly = 0; // unchanged documents the save requires at a version, and writes nothing for
            try
            {
                for (int i = 0; i < _tracked.Count; i++)
                {
                    Tracked tracked = _tracked[i];
                    DocumentKey key = tracked.Key;
                    if (tracked.Deleted)
                    {
                        if (tracked.Version == 0)
                        {
                            continue; // stored and deleted in this session, or loaded as absent: nothing to delete
                        }

                        batch.Delete(key.Collection, key.Id);
                        if (tracked.Version > 0)
                        {
                            batch.Expect(key.Collection, key.Id, tracked.Version);
                        }

                        tracked.Saving = true;
                        written++;
                        continue;
                    }

                    // Serialize on the caller's thread, so the committer only copies bytes.
                    byte[] json = JsonSerializer.SerializeToUtf8Bytes(tracked.Entity, tracked.Type,
                        _store.Options.JsonSerializerOptions);
                    if (tracked.Original is not null && IsUnchanged(tracked, json))
                    {
                        if (tracked.ExpectedVersion is long required)
                        {
                            // unchanged, but required at a version (RequireUnchanged, or an explicit Store)
                            batch.Expect(key.Collection, key.Id, required);
                            tracked.Checking = true;
                            checkedOnly++;
                        }

                        continue;
                    }

                    if (CurrentIdText(tracked.Type, tracked.Entity!) is var named && named != tracked.IdAtTrack)
                    {
                        ThrowIdChanged(key, tracked.IdAtTrack, named);
                    }

                    _store.CheckDocument(key.Collection, key.Id, json, validateJson: false);
                    batch.Put(key.Collection, key.Id, json);
                    if (tracked.ExpectedVersion is long expected)
                    {
                        batch.Expect(key.Collection, key.Id, expected);
                    }
                    else if (tracked.Loaded)
                    {
                        batch.Expect(key.Collection, key.Id, tracked.Version);
                    }

                    tracked.Saving = true;
                    tracked.SavingJson = json;
                    written++;
                }

                if (written == 0)
                {
                    if (checkedOnly > 0)
                    {
                        CheckUnwritten(batch, cancellationToken);
                    }

                    return;
                }

                _store.ThrowIfDisposed();
                CommitResult result = await _store.CommitAsync(batch, cancellationToken).ConfigureAwait(false);
                for (int i = 0; i < _tracked.Count; i++)
                {
                    Tracked tracked = _tracked[i];
                    if (tracked.Checking)
                    {
                        tracked.ExpectedVersion = null; // held: required until a save succeeds
                    }

                    if (!tracked.Saving)
                    {
                        continue;
                    }

                    // A saved delete stays tracked as known absent, so this session reads its own delete (its snapshot
                    // still holds the document) and a later store of the id requires that it is still absent.
                    byte[]? json = tracked.SavingJson;
                    tracked.Version = json is null ? 0 : result.Sequence;
                    tracked.TimestampTicks = json is null ? 0 : result.TimestampTicks;
                    tracked.Original = json is null ? null : new ReadOnlyMemory<byte>(json);
                    tracked.OriginalAsRead = true;
                    tracked.Loaded = true;
                    tracked.ExpectedVersion = null;
                }

                // The save ends the snapshot: the next read opens one at or after this commit, so the session's
                // queries and counts see what it saved (its loads see it already, in the identity map).
                _snapshot?.Release();
                _snapshot = null;
            }
            finally
            {
                if (written + checkedOnly > 0)
                {
                    for (int i = 0; i < _tracked.Count; i++)
                    {
                        _tracked[i].Saving = false;
                        _tracked[i].SavingJson = null;
                        _tracked[i].Checking = false;
                    }
                }
            }
        }
        finally
        {
            Exit();
        }
    }

    /// <inheritdoc/>
    public void Dispose()
    {
        if (!_disposed)
        {
            _disposed = true;
            _snapshot?.Release(); // closed now, or by the last query enumeration in progress (which then throws)
            _tracked.Clear();
        }
    }

    /// <inheritdoc/>
    public ValueTask DisposeAsync()
    {
        Dispose();
        return ValueTask.CompletedTask;
    }

    private T? LoadCore<T>(string id)
        where T : class
    {
        if (string.IsNullOrEmpty(id))
        {
            DocumentIds.Validate(id);
        }

        var key = new DocumentKey(CollectionOf(typeof(T)), id);

        // The first read fixes the snapshot, even when the identity map answers it.
        IndexSnapshot snapshot = _snapshot ??= _store.Index.OpenSnapshot();

        if (_tracked.TryGet(key, out Tracked? tracked))
        {
            // tracked keys were validated when first seen
            return tracked.Deleted ? null : tracked.Entity as T ?? ThrowTrackedAsOther<T>(tracked);
        }

        // Keys in the index were validated when written: only a miss validates (an invalid id throws, not reads as
        // absent). Nothing is tracked until the read succeeds, so a read that throws leaves no entry behind.
        // throws SnapshotExpiredException if it outlived MaxSnapshotAge
        if (_store.Index.Get(key, snapshot) is not { } version)
        {
            DocumentIds.Validate(id);
            _tracked.Add(new Tracked(key, typeof(T)) { Loaded = true, Deleted = true, Version = 0 });
            return null;
        }

        T entity = Read<T>(key, version);
        TrackRead(key, version, entity);
        return entity;
    }

    /// <summary>The entity <paramref name="version"/> of <paramref name="key"/> deserializes to, with its <c>Id</c>
    /// set from the key when the JSON lacks it or names another document.</summary>
    private T Read<T>(DocumentKey key, DocumentVersion version)
        where T : class
    {
        T entity = JsonSerializer.Deserialize<T>(version.Json.Span, _store.Options.JsonSerializerOptions)
            ?? throw new JsonException($"Document '{key}' deserialized to null.");
        IdAccessor<T>.FillIn(entity, key.Id);
        return entity;
    }

    /// <summary>Adds an entity read from the snapshot to the identity map, as loaded at
    /// <paramref name="version"/>.</summary>
    private void TrackRead<T>(DocumentKey key, DocumentVersion version, T entity)
        where T : class
    {
        // The index's JSON is immutable: keep a reference to it as the loaded state, no copy. A save compares the
        // entity's serialization with it, and only where they differ with the entity as read, serialized then
        // (IsUnchanged): so a read pays for no serialization.
        _tracked.Add(new Tracked(key, typeof(T)) { Entity = entity, Version = version.Sequence,
            TimestampTicks = version.TimestampTicks, Original = version.Json, Loaded = true,
            IdAtTrack = IdAccessor<T>.Text(entity) });
    }

    /// <summary>The collection of <paramref name="type"/>, validated; the last answer is kept, as a session mostly
    /// reads one type.</summary>
    private string CollectionOf(Type type)
    {
        if (!ReferenceEquals(type, _lastType))
        {
            string collection = _store.Options.CollectionName(type);
            // a name from the options' CollectionName follows the id rules too
            DocumentIds.ValidateCollection(collection);
            _lastCollection = collection;
            _lastType = type;
        }

        return _lastCollection!;
    }

    /// <summary>Access to a type's <c>Id</c> property, to read the id it names and to fill it in on a load: compiled
    /// delegates for a string property (no reflection per call); reflection for the number and <see cref="Guid"/>
    /// properties.</summary>
    private static class IdAccessor<T>
    {
        private static readonly Action<T, string>? s_set;
        private static readonly PropertyInfo? s_other;
        private static readonly Func<T, string?>? s_text;
        private static readonly PropertyInfo? s_textProperty;

        static IdAccessor()
        {
            if (IdProperty(typeof(T)) is { CanRead: true } readable)
            {
                if (readable.PropertyType == typeof(string) && !typeof(T).IsValueType)
                {
                    s_text = readable.GetMethod!.CreateDelegate<Func<T, string?>>();
                }
                else
                {
                    s_textProperty = readable;
                }
            }

            if (IdProperty(typeof(T)) is { CanWrite: true, CanRead: true } property && property.GetMethod!.IsPublic
                && property.SetMethod!.IsPublic && !typeof(T).IsValueType)
            {
                if (property.PropertyType == typeof(string))
                {
                    s_set = property.SetMethod.CreateDelegate<Action<T, string>>(); // s_text reads it
                }
                else
                {
                    s_other = property;
                }
            }
        }

        /// <summary>The id the entity's <c>Id</c> names (<see cref="IdText"/>), as <see cref="CurrentIdText"/> reads
        /// it, without reflection for a string property.</summary>
        public static string? Text(T entity)
            => s_text is not null ? s_text(entity)
                : s_textProperty is null ? null : IdText(s_textProperty.GetValue(entity));

        /// <summary>Sets the entity's Id to <paramref name="id"/>, the key it was read from, when it names another
        /// document or none: the JSON lacked it (a raw write), or holds another (raw JSON copied from another
        /// document); a number or GUID Id only when <paramref name="id"/> is that type's text of a value, as
        /// <see cref="IdText"/> writes it.</summary>
        public static void FillIn(T entity, string id)
        {
            if (s_set is null)
            {
                if (s_other is not null)
                {
                    FillInValue(s_other, entity!, id);
                }
            }
            else if (!string.Equals(s_text!(entity), id, StringComparison.Ordinal))
            {
                s_set(entity, id);
            }
        }
    }

    /// <summary>Sets an <c>Id</c> that names another document or none (null, or a number's or a GUID's default) to
    /// the value that names <paramref name="id"/>, if one does.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void FillInValue(PropertyInfo property, object entity, string id)
    {
        if (IdText(property.GetValue(entity)) != id && IdValue(property.PropertyType, id) is { } value)
        {
            property.SetValue(entity, value);
        }
    }

    /// <summary>The value of an <c>Id</c> property of <paramref name="type"/> that names the document
    /// <paramref name="id"/> (the inverse of <see cref="IdText"/>): the id itself for a string; null when no value of
    /// the type does: "007", "+7", an upper-case GUID or a number out of range name documents no such property
    /// can.</summary>
    private static object? IdValue(Type type, string id)
    {
        type = Nullable.GetUnderlyingType(type) ?? type; // a long? Id takes a long
        const NumberStyles Signed = NumberStyles.AllowLeadingSign;
        CultureInfo invariant = CultureInfo.InvariantCulture;
        object? value = type switch
        {
            _ when type == typeof(string) => id,
            _ when type == typeof(int) => int.TryParse(id, Signed, invariant, out int number) ? number : null,
            _ when type == typeof(long) => long.TryParse(id, Signed, invariant, out long number) ? number : null,
            _ when type == typeof(short) => short.TryParse(id, Signed, invariant, out short number) ? number : null,
            _ when type == typeof(uint) => uint.TryParse(id, NumberStyles.None, invariant, out uint number)
                ? number : null,
            _ when type == typeof(ulong) => ulong.TryParse(id, NumberStyles.None, invariant, out ulong number)
                ? number : null,
            _ when type == typeof(ushort) => ushort.TryParse(id, NumberStyles.None, invariant, out ushort number)
                ? number : null,
            _ when type == typeof(Guid) => Guid.TryParseExact(id, "D", out Guid guid) ? guid : null,
            _ => null,
        };
        return value is not null && IdText(value) == id ? value : null;
    }

    /// <summary>The type's public <c>Id</c> property when it is a string or one of the numbers and the
    /// <see cref="Guid"/> that name a document by their text (<see cref="IdText"/>), or a nullable one of those; else
    /// null.</summary>
    private static PropertyInfo? IdProperty(Type type) => s_idProperties.GetOrAdd(type, static t =>
    {
        PropertyInfo? property = t.GetProperty("Id", BindingFlags.Public | BindingFlags.Instance);
        return property is not null && IdValueType(property) is { } idType && (idType == typeof(string)
            || idType == typeof(int)
            || idType == typeof(long) || idType == typeof(uint) || idType == typeof(ulong) || idType == typeof(short)
            || idType == typeof(ushort) || idType == typeof(Guid))
            && property.GetIndexParameters().Length == 0
            ? property
            : null;
    });

    /// <summary>The type of value an <c>Id</c> property holds: its type, or for a nullable one the underlying
    /// type.</summary>
    private static Type IdValueType(PropertyInfo property)
        => Nullable.GetUnderlyingType(property.PropertyType) ?? property.PropertyType;

    /// <summary>The id an <c>Id</c> property's value names: the string itself; a number's invariant digits; a
    /// <see cref="Guid"/> with hyphens; null for null and for a number's or a GUID's default (no id given).</summary>
    private static string? IdText(object? value) => value switch
    {
        string text => text,
        int number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        long number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        uint number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        ulong number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        short number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        ushort number => number == 0 ? null : number.ToString(CultureInfo.InvariantCulture),
        Guid guid => guid == Guid.Empty ? null : guid.ToString("D"),
        _ => null,
    };

    private void Enter()
    {
        ObjectDisposedException.ThrowIf(_disposed, this);
        _store.ThrowIfDisposed();
        if (Interlocked.Exchange(ref _inUse, 1) != 0)
        {
            ThrowHelper.ThrowInvalidOperation(
                "This session is already in use by another call; a session serves one caller at a time (its calls " +
                "may run on any thread, one after another).");
        }
    }

    private void Exit() => Volatile.Write(ref _inUse, 0);

    /// <summary>A save that writes nothing but requires documents at versions: checked against the latest commits
    /// (a read-only transaction takes effect at that read, so there is nothing to commit); on success the
    /// requirements are met and dropped.</summary>
    private void CheckUnwritten(CommitBatch batch, CancellationToken cancellationToken)
    {
        cancellationToken.ThrowIfCancellationRequested();
        _store.ThrowIfDisposed();
        List<DocumentKey>? conflicts = null;
        foreach ((DocumentKey key, long version) in batch.Expectations)
        {
            if (_store.Index.GetVersion(key) != version)
            {
                (conflicts ??= []).Add(key);
            }
        }

        if (conflicts is not null)
        {
            throw new ConcurrencyException(conflicts);
        }

        for (int i = 0; i < _tracked.Count; i++)
        {
            if (_tracked[i].Checking)
            {
                _tracked[i].ExpectedVersion = null;
            }
        }
    }

    /// <summary>
    /// Whether <paramref name="json"/>, what a tracked entity serializes to now, is what it serialized to as read, so
    /// that a save leaves it alone. Mostly the stored JSON is that, byte for byte (written by this class and these
    /// options). Where it is not (written raw, by another serializer or another version of the class: other
    /// whitespace, property order or escapes, a property the class lacks or has since gained, an id the JSON lacks or
    /// names otherwise), the stored JSON is read again, its <c>Id</c> set from the key, and serialized, once, and
    /// kept as the entry's original: a document the session did not change is never rewritten, and a property the
    /// class lacks is not dropped from it.
    /// </summary>
    private bool IsUnchanged(Tracked tracked, byte[] json)
    {
        ReadOnlyMemory<byte> original = tracked.Original!.Value;
        if (json.AsSpan().SequenceEqual(original.Span))
        {
            return true;
        }

        if (tracked.OriginalAsRead)
        {
            return false;
        }

        JsonSerializerOptions options = _store.Options.JsonSerializerOptions;
        object asRead = JsonSerializer.Deserialize(original.Span, tracked.Type, options)!;
        FillInId(tracked.Type, asRead, tracked.Key.Id);
        original = JsonSerializer.SerializeToUtf8Bytes(asRead, tracked.Type, options);
        tracked.Original = original;
        tracked.OriginalAsRead = true;
        return json.AsSpan().SequenceEqual(original.Span);
    }

    /// <summary>Sets an entity's <c>Id</c> to the key as a read does (<see cref="IdAccessor{T}.FillIn"/>), for a type
    /// known at run time.</summary>
    private static void FillInId(Type type, object entity, string id)
    {
        if (IdProperty(type) is { CanWrite: true, CanRead: true } property)
        {
            FillInValue(property, entity, id);
        }
    }

    /// <summary>The id an entity's <c>Id</c> property names now (null: none, or no such property).</summary>
    private static string? CurrentIdText(Type type, object entity)
        => IdProperty(type) is { CanRead: true } property ? IdText(property.GetValue(entity)) : null;

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowIdChanged(DocumentKey key, string? was, string? now)
        => throw new InvalidOperationException(
            $"The Id of the entity tracked as '{key}' changed from '{was}' to '{now}' since the session began "
            + "tracking it, and a document's id cannot change: store a new entity under the new id and delete the "
            + "old document.");

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static T ThrowTrackedAsOther<T>(Tracked tracked) => throw new InvalidOperationException(
        $"'{tracked.Key}' is tracked in this session as {tracked.Entity?.GetType().Name}, which is not a " +
        $"{typeof(T).Name} (two types that share a collection name the same documents).");

    private static long ThrowNotTracked()
        => throw new InvalidOperationException("The entity is not tracked by this session.");

    /// <summary>What the session knows of one document.</summary>
    private sealed class Tracked(DocumentKey key, Type type)
    {
        public DocumentKey Key { get; } = key;

        public Type Type { get; } = type;

        public object? Entity { get; set; }

        /// <summary>The version loaded or last saved; 0 for new or absent; -1 for a delete of a document never
        /// loaded.</summary>
        public long Version { get; set; }

        public ReadOnlyMemory<byte>? Original { get; set; }

        /// <summary><see cref="Original"/> is what the entity serialized to as read or saved, not the stored JSON
        /// (<see cref="IsUnchanged"/>).</summary>
        public bool OriginalAsRead { get; set; }

        /// <summary>The id the entity's <c>Id</c> property named when the session began tracking it (after it set
        /// or filled the property in); a save refuses to write the entity if it names another since.</summary>
        public string? IdAtTrack { get; set; }

        /// <summary>An explicit precondition for the next save, overriding the loaded version.</summary>
        public long? ExpectedVersion { get; set; }

        /// <summary>The last-modified time of the version loaded or saved (UTC ticks); 0 when new.</summary>
        public long TimestampTicks { get; set; }

        public bool Loaded { get; set; }

        public bool Deleted { get; set; }

        /// <summary>In the batch of the save in progress (<see cref="SaveChangesAsync"/> only; false outside
        /// it).</summary>
        public bool Saving { get; set; }

        /// <summary>The bytes the save in progress puts; null for its delete.</summary>
        public byte[]? SavingJson { get; set; }

        /// <summary>Unchanged, and required at <see cref="ExpectedVersion"/> by the save in progress (only within
        /// <see cref="SaveChangesAsync"/>).</summary>
        public bool Checking { get; set; }
    }
}
