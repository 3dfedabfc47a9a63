using FsCheck;
using FsCheck.Xunit;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

/// <summary>
/// Random programs over the public API (several interleaved sessions loading, querying, storing, changing and deleting
/// a few ids, requiring documents they read unchanged, saving with conflicts, checkpoints, reopening the store, and a
/// disk that fills and empties) against a dictionary model with per-session snapshots (taken at the first read, and
/// again at the first read after a save that wrote), identity maps and optimistic-concurrency rules. While the disk is
/// full a checkpoint fails with an <see cref="IOException"/> and changes nothing (sessions keep reading their
/// snapshots, and the next checkpoint takes the same documents), and nothing faults the store. A save that needed a
/// new journal segment then would fail with <see cref="StoreFullException"/> and change nothing; these short programs
/// rarely fill a segment, so the journal's own property (<c>JournalPropertyTests</c>) is where refused appends are
/// exercised.
/// </summary>
public sealed class DocumentStorePropertyTests
{
    // Eleven ids, so a session may track more documents than its identity map searches in order (eight) and switch
    // to its dictionaries.
    private static readonly string[] s_ids =
        ["u/1", "u/2\u00e9", "u/3\u6771", "u/4\U0001F600", "u/5", "u/6", "u/7", "u/8", "u/9", "u/10", "u/11"];

    [Property(MaxTest = 200, Arbitrary = [typeof(DocumentStorePropertyTests)])]
    public void The_store_agrees_with_a_dictionary_model(int[] program)
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem
        {
            Matches = static path => Path.GetFileName(path) is "next-segment.tmp" or "journal.state.tmp"
                or DocumentStore.DataFileName || path.EndsWith(".journal", StringComparison.Ordinal),
        };
        var disk = new DiskState(files);
        var store = DocumentStore.Open(dir.Path, Options(files));
        var model = new Dictionary<string, (long Version, string Name)>();
        var sessions = new List<SessionModel>();
        int names = 0;
        try
        {
            foreach (int op in program)
            {
                int argument = op >>> 4;
                string id = s_ids[argument % s_ids.Length];
                SessionModel? s = sessions.Count == 0 ? null : sessions[(argument / 4) % sessions.Count];
                switch (op & 0xF)
                {
                    case 0 or 1:
                        sessions.Add(new SessionModel(store.OpenSession()));
                        break;
                    case 2 or 3 when s is not null:
                        {
                            bool wasTracked = s.Tracked.TryGetValue(id, out TrackedModel? before);
                            User? user = s.Session.LoadAsync<User>(id).AsTask().GetAwaiter().GetResult();
                            s.Snapshot ??= new(model);
                            if (wasTracked)
                            {
                                // Identity map: the tracked entity (or null for a tracked delete), whatever others
                                // committed.
                                Assert.Equal(before!.Deleted, user is null);
                                Assert.Same(before.Entity, user);
                            }
                            else if (s.Snapshot.TryGetValue(id, out var seen))
                            {
                                Assert.Equal(seen.Name, user!.Name);
                                s.Tracked[id] = new TrackedModel(user, seen.Version, Loaded: true, Deleted: false);
                            }
                            else
                            {
                                Assert.Null(user);
                                s.Tracked[id] = new TrackedModel(null, 0, Loaded: true, Deleted: true);
                            }

                            break;
                        }

                    case 4 or 5 or 6 when s is not null:
                        {
                            string name = $"n{names++}";
                            if (s.Tracked.TryGetValue(id, out var tracked) && tracked.Entity is not null
                                && !tracked.Deleted)
                            {
                                tracked.Entity.Name = name;
                            }
                            else
                            {
                                var user = new User { Name = name };
                                s.Session.Store(user, id);
                                s.Tracked[id] = tracked is null
                                    ? new TrackedModel(user, 0, Loaded: false, Deleted: false)
                                    : tracked with { Entity = user, Deleted = false };
                            }

                            s.Changed.Add(id);
                            break;
                        }

                    case 7 when s is not null:
                        s.Session.Delete<User>(id);
                        s.Tracked[id] = s.Tracked.TryGetValue(id, out var was)
                            ? was with { Entity = null, Deleted = true }
                            : new TrackedModel(null, -1, Loaded: false, Deleted: true);
                        s.Changed.Add(id);
                        break;
                    case 8 or 9 or 10 when s is not null:
                        Save(store, model, s, sessions, disk);
                        break;
                    case 12 or 13:
                        {
                            // Sessions keep reading their snapshots while checkpoints move documents into the tree.
                            Exception? error = Record.Exception(()
                                => store.CheckpointAsync().AsTask().GetAwaiter().GetResult());
                            Assert.True(error is null || (files.NoSpace && error is IOException), error?.ToString());
                            break;
                        }

                    case 14:
                        files.NoSpace = !files.NoSpace;
                        break;
                    case 15 when s is not null && argument % 2 == 0:
                        Query(s, model);
                        break;
                    case 15 when s is not null:
                        if (s.Tracked.TryGetValue(id, out var read) && read is { Loaded: true, Deleted: false }
                            && read.Version > 0 && read.Entity is not null)
                        {
                            s.Session.RequireUnchanged(read.Entity);
                            s.Tracked[id] = read with { Required = true };
                        }
                        else if (read?.Entity is { } unread)
                        {
                            Assert.Throws<InvalidOperationException>(() => s.Session.RequireUnchanged(unread));
                        }

                        break;
                    case 11 when sessions.Count == 0 || argument % 4 == 0:
                        foreach (SessionModel open in sessions)
                        {
                            open.Session.Dispose();
                        }

                        sessions.Clear();
                        store.Dispose();
                        store = DocumentStore.Open(dir.Path, Options(files));
                        break;
                    default:
                        break;
                }

                Assert.False(store.IsFaulted);

                // A fresh reader always sees exactly the model.
                foreach (string check in s_ids)
                {
                    StoredDocument? stored = store.Get("User", check);
                    Assert.Equal(model.ContainsKey(check), stored.HasValue);
                    if (stored is { } doc)
                    {
                        Assert.Equal(model[check].Version, doc.Version);
                        Assert.Contains($"\"{model[check].Name}\"", System.Text.Encoding.UTF8.GetString(doc.Json.Span),
                            StringComparison.Ordinal);
                    }
                }
            }
        }
        finally
        {
            foreach (SessionModel open in sessions)
            {
                open.Session.Dispose();
            }

            store.Dispose();
        }
    }

    public static Arbitrary<int[]> Programs() => OperationPrograms.ShrinkingBySteps(60);

    private static DocumentStoreOptions Options(FaultInjectingFileSystem files)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.FileSystem = files;
        return options;
    }

    private static void Save(DocumentStore store, Dictionary<string, (long Version, string Name)> model, SessionModel s,
        List<SessionModel> sessions, DiskState disk)
    {
        // What the session writes, and the version each write requires (null: unconditional).
        var writes = new List<(string Id, TrackedModel Tracked, long? Expected)>();
        foreach (string id in s.Changed)
        {
            TrackedModel t = s.Tracked[id];
            if (t.Deleted)
            {
                if (t.Version != 0)
                {
                    writes.Add((id, t, t.Version > 0 ? t.Version : null));
                }
            }
            else
            {
                writes.Add((id, t, t.Loaded ? t.Version : null));
            }
        }

        // Documents required unchanged and not written: checked, not written.
        var required = s.Tracked.Where(t => t.Value.Required && !writes.Any(w => w.Id == t.Key))
            .Select(t => (t.Key, t.Value.Version)).ToList();
        bool conflict = writes.Any(w => w.Expected is long v
            && (model.TryGetValue(w.Id, out var current) ? current.Version : 0) != v)
            || required.Any(r => (model.TryGetValue(r.Key, out var current) ? current.Version : 0) != r.Version);
        Exception? error = Record.Exception(() => s.Session.SaveChangesAsync().GetAwaiter().GetResult());
        if (conflict)
        {
            Assert.IsType<ConcurrencyException>(error);
            s.Session.Dispose();
            sessions.Remove(s);
            return;
        }

        if (error is StoreFullException && disk.MayRefuse())
        {
            // Nothing was written: the model stands, and the session still tracks its changes for a later save.
            disk.Refused();
            return;
        }

        Assert.Null(error);
        foreach ((string id, TrackedModel t) in s.Tracked.ToList())
        {
            s.Tracked[id] = t with { Required = false }; // met: dropped
        }

        if (writes.Count == 0)
        {
            return; // nothing committed: the snapshot stands
        }

        s.Snapshot = null; // the save ended it: the next read takes a new one

        long sequence = store.LastCommittedSequence;
        foreach (var (id, t, _) in writes)
        {
            if (t.Deleted)
            {
                // The session reads its own delete: the id stays tracked as known absent.
                model.Remove(id);
                s.Tracked[id] = new TrackedModel(null, 0, Loaded: true, Deleted: true);
            }
            else
            {
                model[id] = (sequence, t.Entity!.Name);
                s.Tracked[id] = t with { Version = sequence, Loaded = true, Required = false };
            }
        }

        s.Changed.Clear();

        // The identity map finds every tracked entity again, with the version it was loaded or saved at.
        foreach (TrackedModel t in s.Tracked.Values)
        {
            if (t.Entity is not null && !t.Deleted)
            {
                Assert.Equal(Math.Max(0, t.Version), s.Session.GetVersion(t.Entity));
            }
        }
    }

    /// <summary>A query of every id: the snapshot's documents in ordinal order, less those the session deleted; a
    /// tracked entity for a tracked id, and every other result tracked from then on.</summary>
    private static void Query(SessionModel s, Dictionary<string, (long Version, string Name)> model)
    {
        List<User> results = s.Session.QueryByPrefixAsync<User>("u/").ToListAsync().AsTask().GetAwaiter().GetResult();
        s.Snapshot ??= new(model);
        List<string> expected = s.Snapshot.Keys
            .Where(id => !(s.Tracked.TryGetValue(id, out var t) && t.Deleted))
            .Order(StringComparer.Ordinal).ToList();
        Assert.Equal(expected, results.Select(u => u.Id));
        foreach (User user in results)
        {
            if (s.Tracked.TryGetValue(user.Id!, out TrackedModel? tracked))
            {
                Assert.Same(tracked.Entity, user);
            }
            else
            {
                (long version, string name) = s.Snapshot[user.Id!];
                Assert.Equal(name, user.Name);
                s.Tracked[user.Id!] = new TrackedModel(user, version, Loaded: true, Deleted: false);
            }
        }
    }

    private sealed record TrackedModel(User? Entity, long Version, bool Loaded, bool Deleted, bool Required = false);

    /// <summary>Whether the store may refuse a save for want of space: while the disk is full, or within the journal's
    /// retry interval (on the system clock) after a refusal.</summary>
    private sealed class DiskState(FaultInjectingFileSystem files)
    {
        private long _lastRefusal = long.MinValue / 2;

        public bool MayRefuse() => files.NoSpace
            || Environment.TickCount64 - _lastRefusal
                < (long)Folio.Journal.WriteAheadJournal.PreparationRetryInterval.TotalMilliseconds + 500;

        public void Refused() => _lastRefusal = Environment.TickCount64;
    }

    private sealed class SessionModel(DocumentSession session)
    {
        public DocumentSession Session { get; } = session;

        public Dictionary<string, (long Version, string Name)>? Snapshot { get; set; }

        public Dictionary<string, TrackedModel> Tracked { get; } = [];

        public HashSet<string> Changed { get; } = [];
    }
}
