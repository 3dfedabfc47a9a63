using System.Diagnostics.CodeAnalysis;

namespace Folio;

public sealed partial class DocumentSession
{
    /// <summary>
    /// The session's identity map: what it knows of each document, found by key and by entity. Most sessions track
    /// one or a few documents, for which a pair of dictionaries costs more to build than a search costs to run: up to
    /// <see cref="SearchLimit"/> documents are found by searching the list in order, and past that through a
    /// dictionary by key, built once, and one by entity, built at the first search by entity (a session that only
    /// reads never needs it). The list keeps the order documents were first tracked in, which is the order of a
    /// save's commands. Invariant: <c>FindByEntity(e) == t</c> exactly when <c>t.Entity</c> is <c>e</c>, so every
    /// change of an entity goes through <see cref="SetEntity"/>. Owned by the session's one caller at a time.
    /// </summary>
    private sealed class TrackedDocuments
    {
        private const int SearchLimit = 8;

        private readonly List<Tracked> _all = [];
        private Dictionary<DocumentKey, Tracked>? _byKey;
        private Dictionary<object, Tracked>? _byEntity;

        public int Count => _all.Count;

        public Tracked this[int index] => _all[index];

        public bool TryGet(DocumentKey key, [NotNullWhen(true)] out Tracked? tracked)
        {
            if (_byKey is not null)
            {
                return _byKey.TryGetValue(key, out tracked);
            }

            foreach (Tracked candidate in _all)
            {
                if (candidate.Key == key)
                {
                    tracked = candidate;
                    return true;
                }
            }

            tracked = null;
            return false;
        }

        /// <summary>The document <paramref name="entity"/> is tracked as, or null.</summary>
        public Tracked? FindByEntity(object entity)
        {
            if (_byEntity is not null)
            {
                return _byEntity.GetValueOrDefault(entity);
            }

            if (_all.Count > SearchLimit)
            {
                // Built at the first search that needs it: sessions that only read (queries of many documents)
                // never search by entity, and need not index every entity they track.
                _byEntity = new Dictionary<object, Tracked>(_all.Count * 2, ReferenceEqualityComparer.Instance);
                foreach (Tracked each in _all)
                {
                    if (each.Entity is { } tracked)
                    {
                        _byEntity[tracked] = each;
                    }
                }

                return _byEntity.GetValueOrDefault(entity);
            }

            foreach (Tracked candidate in _all)
            {
                if (ReferenceEquals(candidate.Entity, entity))
                {
                    return candidate;
                }
            }

            return null;
        }

        /// <summary>Tracks a document whose key is not tracked yet.</summary>
        public void Add(Tracked tracked)
        {
            _all.Add(tracked);
            if (_byKey is not null)
            {
                _byKey.Add(tracked.Key, tracked);
                if (_byEntity is not null && tracked.Entity is { } entity)
                {
                    _byEntity[entity] = tracked;
                }
            }
            else if (_all.Count > SearchLimit)
            {
                _byKey = new Dictionary<DocumentKey, Tracked>(_all.Count * 2);
                foreach (Tracked each in _all)
                {
                    _byKey.Add(each.Key, each);
                }
            }
        }

        /// <summary>Sets (or with null, clears) the entity of a tracked document.</summary>
        public void SetEntity(Tracked tracked, object? entity)
        {
            if (_byEntity is not null)
            {
                if (tracked.Entity is { } old)
                {
                    _byEntity.Remove(old);
                }

                if (entity is not null)
                {
                    _byEntity[entity] = tracked;
                }
            }

            tracked.Entity = entity;
        }

        public void Clear()
        {
            _all.Clear();
            _byKey = null;
            _byEntity = null;
        }
    }
}
