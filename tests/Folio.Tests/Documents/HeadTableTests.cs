using System.Collections.Concurrent;
using System.Text;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The heads of a collection without an object per version (<see cref="HeadTable"/>) and the rebuild that evicts ids
/// beside the writer (<see cref="HeadTableRebuild"/>): against a model of every id's versions, and under readers that
/// check every value they see while a writer commits, grows the table and rebuilds run.
/// </summary>
public sealed class HeadTableTests
{
    /// <summary>
    /// Random writes (puts and deletes of a few dozen ids, so the id table grows), prunes at a moving oldest point and
    /// rebuilds that evict ids, some with writes between the rebuild's start and its last pass; after every step each
    /// id's chain holds exactly the model's versions down to the one visible at the oldest point, and every read at
    /// every sequence from there on gives the model's answer.
    /// </summary>
    [Property(MaxTest = 300, Arbitrary = [typeof(HeadTableTests)])]
    public void Every_id_keeps_exactly_its_versions_through_writes_prunes_and_rebuilds(int[] program)
    {
        var writer = new Writer();
        var model = new Dictionary<string, List<(long Sequence, bool Deleted)>>(StringComparer.Ordinal);
        long oldest = 0;
        foreach (int op in program)
        {
            int argument = op >>> 3;
            string id = $"id/{argument % 40}";
            switch (op & 7)
            {
                case <= 3:
                    Write(id, deleted: (op & 7) == 3);
                    break;
                case 4:
                    // The oldest point moves up to the newest sequence, and the id's chain is cut behind the version
                    // it sees, as the committer does before a write.
                    oldest = Math.Max(oldest, writer.Sequence - (argument % 5));
                    if (writer.Heads.Find(Bytes(id), IdBytes.HashOf(Bytes(id))) is int head and not 0
                        && writer.Heads.At(head, oldest) is int visible and not 0)
                    {
                        writer.Heads.Prune(visible);
                        Trim(model, id, oldest);
                    }

                    break;
                default:
                    Rebuild(argument, interleaved: (op & 7) == 6);
                    break;
            }

            AssertModel(writer.Heads, model, oldest, writer.Sequence);
        }

        void Write(string id, bool deleted)
        {
            writer.Write(id, deleted);
            if (!model.TryGetValue(id, out List<(long, bool)>? versions))
            {
                model[id] = versions = [];
            }

            versions.Insert(0, (writer.Sequence, deleted));
        }

        void Rebuild(int argument, bool interleaved)
        {
            oldest = Math.Max(oldest, writer.Sequence - (argument % 3));
            var rebuild = new HeadTableRebuild(writer.Heads, oldest);
            var evicted = new List<string>();
            foreach ((string id, List<(long Sequence, bool Deleted)> versions) in model)
            {
                // A checkpoint offers ids whose newest version is at or below the oldest point.
                if (versions[0].Sequence <= oldest && (argument + id.Length + (int)versions[0].Sequence) % 3 != 0
                    && rebuild.Evict(writer.Heads.Find(Bytes(id), IdBytes.HashOf(Bytes(id)))))
                {
                    evicted.Add(id);
                }
            }

            if (interleaved)
            {
                Write($"id/{argument % 40}", deleted: false); // a commit while the rebuild copies
            }

            rebuild.CopyHeads();
            if (interleaved)
            {
                Write($"id/{(argument + 1) % 40}", deleted: false); // one between the two passes
            }

            rebuild.CatchUp();
            if (interleaved)
            {
                Write($"id/{(argument + 7) % 40}", deleted: true); // one the last pass replays
            }

            rebuild.CatchUp();
            writer.Heads = rebuild.Result;
            foreach (string id in evicted)
            {
                if (model[id][0].Sequence <= oldest)
                {
                    model.Remove(id); // not written since it was offered
                }
            }

            foreach (string id in model.Keys)
            {
                Trim(model, id, oldest);
            }
        }
    }

    [Fact]
    public void A_rebuild_keeps_an_evicted_id_that_a_commit_writes_again_before_its_last_pass_with_its_older_version()
    {
        var writer = new Writer();
        writer.Write("a", deleted: false); // 1
        writer.Write("b", deleted: false); // 2
        writer.Write("c", deleted: false); // 3
        var rebuild = new HeadTableRebuild(writer.Heads, oldest: 3);
        Assert.True(rebuild.Evict(Head(writer.Heads, "a")));
        Assert.True(rebuild.Evict(Head(writer.Heads, "b")));
        Assert.False(rebuild.Evict(Head(writer.Heads, "b"))); // marked once
        rebuild.CopyHeads();
        writer.Write("b", deleted: false); // 4: written again after the candidate was matched
        writer.Write("d", deleted: false); // 5: a new id
        rebuild.CatchUp();
        writer.Write("c", deleted: true); // 6: after the first pass
        rebuild.CatchUp();
        HeadTable result = rebuild.Result;
        Assert.True(result.IsConsistent());
        Assert.Equal(3, result.Count);
        Assert.Equal(0, Head(result, "a"));
        Assert.Equal([4, 2], Chain(result, "b")); // 2 is what a snapshot at 3 reads
        Assert.Equal([6, 3], Chain(result, "c"));
        Assert.True(result.Record(Head(result, "c")).IsDeleted);
        Assert.Equal([5], Chain(result, "d"));
        Assert.Equal("value of d at 5", Encoding.UTF8.GetString(result.Record(Head(result, "d")).Value.Span));
    }

    [Theory]
    [InlineData("users/ada", true)]
    [InlineData("caf\u00e9/\u6771\u4eac/\U0001F600", true)]
    [InlineData("users/adb", false)]
    [InlineData("users/ad", false)]
    public void A_stored_id_matches_exactly_the_id_it_was_written_as(string asked, bool same)
    {
        string stored = same ? asked : "users/ada";
        Assert.Equal(same, IdBytes.Matches(Encoding.UTF8.GetBytes(stored), asked));
        Assert.Equal(same, IdBytes.HashOf(Encoding.UTF8.GetBytes(stored)) == IdBytes.HashOf(asked));
    }

    [Fact]
    public void Ids_kept_in_the_record_and_ids_read_from_the_entry_are_told_apart_when_their_hashes_collide()
    {
        // Ids of 31, 32 (kept in the record) and 33 bytes (read from the entry), two sharing their first 32 bytes,
        // and a 32-byte id of multi-byte characters; every one written under the same hash, so only the bytes decide.
        string prefix = new('x', 31);
        string[] ids =
            [prefix, prefix + "a", prefix + "b", prefix + "ab", prefix + "ac", "\u6771\u4eac" + new string('y', 26)];
        Assert.Equal(32, Encoding.UTF8.GetByteCount(ids[^1]));
        var heads = new HeadTable();
        const int Hash = 12345;
        for (int i = 0; i < ids.Length; i++)
        {
            byte[] id = Bytes(ids[i]);
            byte[] entry = [0, .. id];
            int slot = heads.Locate(id, Hash, out int head);
            Assert.Equal(0, head);
            int written = heads.Append(new HeadRecord
            {
                Buffer = entry, Sequence = i + 1, ValueOffset = 0, ValueLength = 0, IdOffset = 1,
                IdLength = id.Length, Hash = Hash,
            });
            heads.SetHead(slot, Hash, written, inserted: true);
            bool inline = (heads.Record(written).Flags & HeadRecord.InlineIdFlag) != 0;
            Assert.Equal(id.Length <= HeadRecord.InlineIdBytes, inline);
        }

        for (int i = 0; i < ids.Length; i++)
        {
            int found = heads.Find(ids[i], Hash);
            Assert.Equal(i + 1, heads.Record(found).Sequence);
            Assert.Equal(found, heads.Find(Bytes(ids[i]), Hash));
            Assert.Equal(Bytes(ids[i]), heads.Record(found).Id.ToArray());
        }

        Assert.Equal(0, heads.Find(prefix + "c", Hash));
        Assert.Equal(0, heads.Find(prefix + "abc", Hash));
        Assert.Equal(88, System.Runtime.CompilerServices.Unsafe.SizeOf<HeadRecord>());
    }

    [Fact]
    public void An_id_with_a_lone_surrogate_matches_no_stored_id_even_the_one_a_replacing_encoder_would_write()
    {
        // A replacing encoder writes "dup\uD800" as the bytes of "dup\uFFFD": a lookup must not find that document.
        byte[] replaced = Encoding.UTF8.GetBytes("dup\uD800");
        Assert.Equal(Encoding.UTF8.GetBytes("dup\uFFFD"), replaced);
        Assert.False(IdBytes.Matches(replaced, "dup\uD800"));
        Assert.False(IdBytes.Matches(replaced, "dup\uDBFF"));
        Assert.True(IdBytes.Matches(replaced, "dup\uFFFD"));

        var writer = new Writer();
        writer.Write("dup\uFFFD", deleted: false);
        Assert.NotEqual(0, writer.Heads.Find("dup\uFFFD", IdBytes.HashOf("dup\uFFFD")));
        Assert.Equal(0, writer.Heads.Find("dup\uD800", IdBytes.HashOf("dup\uFFFD"))); // even with the same hash
    }

    /// <summary>
    /// One writer commits round-robin over 2,000 ids (sequence n writes id n mod 2,000 with a value naming both),
    /// publishing each sequence after its version is in the heads, and prunes at the oldest registered snapshot; a
    /// rebuild replaces the table every few milliseconds beside it, waiting for the writer only for its last pass.
    /// Readers register snapshots and assert, for random ids, exactly the version the round-robin put at or below
    /// their snapshot, with its bytes, through every growth, prune and rebuild.
    /// </summary>
    [Fact]
    public void Readers_see_exactly_the_newest_version_at_their_snapshot_while_a_writer_grows_prunes_and_rebuilds()
    {
        const int Ids = 2_000;
        double seconds = StressDuration.Seconds(2);
        var registry = new SnapshotRegistry(Timeout.InfiniteTimeSpan, TimeProvider.System);
        var writeLock = new Lock();
        var shared = new Shared();
        var failures = new ConcurrentQueue<string>();
        byte[][] ids = [.. Enumerable.Range(0, Ids).Select(i => Encoding.UTF8.GetBytes($"doc/{i}"))];
        int[] hashes = [.. ids.Select(id => IdBytes.HashOf(id))];
        long reads = 0;
        long rebuilds = 0;
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Interlocked.Read(ref reads) < 10_000 || Interlocked.Read(ref rebuilds) < 20,
            TimeSpan.FromSeconds(60));

        var writerThread = new Thread(() =>
        {
            for (long sequence = 1; !stop.IsCancellationRequested && failures.IsEmpty; sequence++)
            {
                int i = (int)(sequence % Ids);
                lock (writeLock)
                {
                    HeadTable heads = shared.Heads;
                    byte[] entry = Entry(ids[i], sequence, out int valueOffset, out int valueLength);
                    int slot = heads.Locate(ids[i], hashes[i], out int head);
                    if (head != 0 && heads.At(head, registry.Oldest(Volatile.Read(ref shared.Visible))) is int cut
                        and not 0)
                    {
                        heads.Prune(cut);
                    }

                    int written = heads.Append(new HeadRecord
                    {
                        Buffer = entry, Sequence = sequence, Older = head, ValueOffset = valueOffset,
                        ValueLength = valueLength, IdOffset = 0, IdLength = ids[i].Length, Hash = hashes[i],
                    });
                    heads.SetHead(slot, hashes[i], written, inserted: head == 0);
                }

                Interlocked.Exchange(ref shared.Visible, sequence); // a full fence, as the index publishes
            }
        });

        var rebuilder = new Thread(() =>
        {
            while (!stop.IsCancellationRequested && failures.IsEmpty)
            {
                Thread.Sleep(2);
                long oldest = registry.OldestOpen(Volatile.Read(ref shared.Visible));
                HeadTableRebuild rebuild;
                lock (writeLock)
                {
                    rebuild = new HeadTableRebuild(shared.Heads, oldest); // started with no record unpublished
                }

                rebuild.CopyHeads();
                rebuild.CatchUp();
                lock (writeLock)
                {
                    rebuild.CatchUp();
                    shared.Heads = rebuild.Result;
                }

                Interlocked.Increment(ref rebuilds);
            }
        });

        Thread[] readers = [.. Enumerable.Range(0, 2).Select(r => new Thread(() =>
        {
            var random = new Random(r);
            while ((!stop.IsCancellationRequested || Interlocked.Read(ref reads) < 10) && failures.Count < 10)
            {
                SnapshotRegistry.Entry snapshot = registry.Open(ref shared.Visible);
                try
                {
                    for (int n = 0; n < 64; n++)
                    {
                        int i = random.Next(Ids);
                        // The newest sequence at or below the snapshot that wrote id i (round-robin), if any.
                        long expected = snapshot.Sequence - ((snapshot.Sequence - i) % Ids + Ids) % Ids;
                        HeadTable heads = shared.Heads;
                        int head = heads.Find(ids[i], hashes[i]);
                        int version = head == 0 ? 0 : heads.At(head, snapshot.Sequence);
                        long seen = version == 0 ? 0 : heads.Record(version).Sequence;
                        if (seen != (expected > 0 ? expected : 0))
                        {
                            failures.Enqueue($"doc/{i} at {snapshot.Sequence}: sequence {seen}, expected {expected}");
                        }
                        else if (version != 0 && Encoding.UTF8.GetString(heads.Record(version).Value.Span)
                            != $"value of doc/{i} at {seen}")
                        {
                            failures.Enqueue($"doc/{i} at {snapshot.Sequence}: wrong bytes");
                        }

                        Interlocked.Increment(ref reads);
                    }
                }
                finally
                {
                    snapshot.Close();
                }
            }
        }))];

        writerThread.Start();
        rebuilder.Start();
        foreach (Thread reader in readers)
        {
            reader.Start();
        }

        writerThread.Join();
        rebuilder.Join();
        foreach (Thread reader in readers)
        {
            reader.Join();
        }

        Assert.Empty(failures);
        Assert.True(shared.Heads.IsConsistent());
        Assert.Equal(Ids, shared.Heads.Count);
    }

    /// <summary>
    /// Eviction as the index runs it, on a handful of ids so a whole rebuild fits between two steps of a commit: the
    /// writer commits round-robin over 8 ids and, now and then, yields between appending a version and publishing it
    /// (as a committer preempted mid-batch does). The evictor "checkpoints" (copies each id's newest version at or
    /// below the visible sequence into a tree, published before the eviction), starts a rebuild under the writer's
    /// lock, evicts every id whose head is still the checkpointed version, and publishes the new table after a last
    /// pass under the lock. Readers read as the index does (the heads, else the tree, then the heads again) and must
    /// see exactly the newest version at or below their snapshot: an id evicted while its newer version was being
    /// published would send them to the tree's older one. The writer links an evicted id's new version to the tree's,
    /// as the index does.
    /// </summary>
    [Fact]
    public void Eviction_never_drops_an_id_whose_newer_version_a_commit_is_publishing()
    {
        const int Ids = 8;
        double seconds = StressDuration.Seconds(2);
        var registry = new SnapshotRegistry(Timeout.InfiniteTimeSpan, TimeProvider.System);
        var writeLock = new Lock();
        var shared = new Shared();
        var tree = new ConcurrentDictionary<int, long>(); // id -> the version the last "checkpoint" holds
        var failures = new ConcurrentQueue<string>();
        byte[][] ids = [.. Enumerable.Range(0, Ids).Select(i => Encoding.UTF8.GetBytes($"doc/{i}"))];
        int[] hashes = [.. ids.Select(id => IdBytes.HashOf(id))];
        long reads = 0;
        long evicted = 0;
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Interlocked.Read(ref reads) < 10_000 || Interlocked.Read(ref evicted) < 1_000,
            TimeSpan.FromSeconds(60));

        var writerThread = new Thread(() =>
        {
            for (long sequence = 1; !stop.IsCancellationRequested && failures.IsEmpty; sequence++)
            {
                int i = (int)(sequence % Ids);
                lock (writeLock)
                {
                    HeadTable heads = shared.Heads;
                    byte[] entry = Entry(ids[i], sequence, out int valueOffset, out int valueLength);
                    int slot = heads.Locate(ids[i], hashes[i], out int head);
                    int older = head;
                    if (head != 0 && heads.At(head, registry.Oldest(Volatile.Read(ref shared.Visible))) is int cut
                        and not 0)
                    {
                        heads.Prune(cut);
                    }
                    else if (head == 0 && tree.TryGetValue(i, out long checkpointed))
                    {
                        // An evicted id: its checkpointed version becomes the oldest of the chain, as the index does.
                        byte[] old = Entry(ids[i], checkpointed, out int oldOffset, out int oldLength);
                        older = heads.Append(new HeadRecord
                        {
                            Buffer = old, Sequence = checkpointed, ValueOffset = oldOffset, ValueLength = oldLength,
                            IdOffset = -1,
                        });
                    }

                    int written = heads.Append(new HeadRecord
                    {
                        Buffer = entry, Sequence = sequence, Older = older, ValueOffset = valueOffset,
                        ValueLength = valueLength, IdOffset = 0, IdLength = ids[i].Length, Hash = hashes[i],
                    });
                    if (sequence % 16 == 0)
                    {
                        Thread.Yield(); // appended, not yet published
                    }

                    heads.SetHead(slot, hashes[i], written, inserted: head == 0);
                }

                Interlocked.Exchange(ref shared.Visible, sequence);
            }
        });

        var evictor = new Thread(() =>
        {
            while (!stop.IsCancellationRequested && failures.IsEmpty)
            {
                // The checkpoint: each id's version at the visible sequence, into the tree (published first).
                using var checkpoint = new SnapshotHolder(registry, ref shared.Visible);
                long checkpointed = checkpoint.Sequence;
                var candidates = new List<(int Id, long Sequence)>();
                HeadTable current = shared.Heads;
                for (int i = 0; i < Ids; i++)
                {
                    int head = current.Find(ids[i], hashes[i]);
                    int version = head == 0 ? 0 : current.At(head, checkpointed);
                    if (version != 0)
                    {
                        long sequence = current.Record(version).Sequence;
                        tree[i] = sequence;
                        if (sequence == current.Record(head).Sequence)
                        {
                            candidates.Add((i, sequence)); // the head is the checkpointed version
                        }
                    }
                }

                long oldest = registry.OldestOpen(Volatile.Read(ref shared.Visible));
                HeadTableRebuild rebuild;
                lock (writeLock)
                {
                    rebuild = new HeadTableRebuild(shared.Heads, oldest);
                }

                foreach ((int i, long sequence) in candidates)
                {
                    int head = rebuild.Source.Find(ids[i], hashes[i]);
                    if (head != 0 && rebuild.Source.Record(head).Sequence == sequence && sequence <= oldest
                        && rebuild.Evict(head))
                    {
                        Interlocked.Increment(ref evicted);
                    }
                }

                rebuild.CopyHeads();
                rebuild.CatchUp();
                lock (writeLock)
                {
                    rebuild.CatchUp();
                    shared.Heads = rebuild.Result;
                }
            }
        });

        Thread[] readers = [.. Enumerable.Range(0, 2).Select(r => new Thread(() =>
        {
            var random = new Random(r);
            while ((!stop.IsCancellationRequested || Interlocked.Read(ref reads) < 10) && failures.Count < 10)
            {
                using var snapshot = new SnapshotHolder(registry, ref shared.Visible);
                int i = random.Next(Ids);
                long expected = snapshot.Sequence - ((snapshot.Sequence - i) % Ids + Ids) % Ids;
                long seen;
                while (true)
                {
                    HeadTable heads = shared.Heads;
                    int head = heads.Find(ids[i], hashes[i]);
                    if (head != 0)
                    {
                        int version = heads.At(head, snapshot.Sequence);
                        seen = version == 0 ? 0 : heads.Record(version).Sequence;
                        break;
                    }

                    seen = tree.GetValueOrDefault(i);
                    if (shared.Heads.Find(ids[i], hashes[i]) == 0)
                    {
                        break;
                    }
                }

                if (seen != Math.Max(expected, 0))
                {
                    failures.Enqueue($"doc/{i} at {snapshot.Sequence}: sequence {seen}, expected {expected}");
                }

                Interlocked.Increment(ref reads);
            }
        }))];

        writerThread.Start();
        evictor.Start();
        foreach (Thread reader in readers)
        {
            reader.Start();
        }

        writerThread.Join();
        evictor.Join();
        foreach (Thread reader in readers)
        {
            reader.Join();
        }

        Assert.Empty(failures);
        Assert.True(shared.Heads.IsConsistent());
    }

    public static Arbitrary<int[]> Programs() =>
        Arb.From(
            Gen.ArrayOf(Gen.Choose(0, int.MaxValue)),
            static program => Enumerable.Range(0, program.Length)
                .Select(skip => program.Where((_, i) => i != skip).ToArray()));

    private static void AssertModel(HeadTable heads, Dictionary<string, List<(long Sequence, bool Deleted)>> model,
        long oldest, long newest)
    {
        // Reads at the oldest point, the newest sequence, and at and just below every version: between them the
        // answer cannot change.
        Assert.True(heads.IsConsistent());
        Assert.Equal(model.Count, heads.Count);
        foreach ((string id, List<(long Sequence, bool Deleted)> versions) in model)
        {
            int head = Head(heads, id);
            Assert.NotEqual(0, head);
            Assert.Equal(id, Encoding.UTF8.GetString(heads.Record(head).Id));
            var points = new HashSet<long> { oldest, newest };
            foreach ((long sequence, _) in versions)
            {
                points.Add(sequence);
                points.Add(sequence - 1);
            }

            foreach (long at in points.Where(at => at >= oldest && at <= newest))
            {
                int version = heads.At(head, at);
                (long Sequence, bool Deleted) expected = versions.FirstOrDefault(v => v.Sequence <= at);
                Assert.Equal(expected.Sequence, version == 0 ? 0 : heads.Record(version).Sequence);
                if (version != 0)
                {
                    Assert.Equal(expected.Deleted, heads.Record(version).IsDeleted);
                    Assert.Equal($"value of {id} at {expected.Sequence}",
                        Encoding.UTF8.GetString(heads.Record(version).Value.Span));
                }
            }
        }
    }

    /// <summary>Drops the model's versions older than the one visible at <paramref name="oldest"/>.</summary>
    private static void Trim(Dictionary<string, List<(long Sequence, bool Deleted)>> model, string id, long oldest)
    {
        List<(long Sequence, bool Deleted)> versions = model[id];
        int visible = versions.FindIndex(v => v.Sequence <= oldest);
        if (visible >= 0)
        {
            versions.RemoveRange(visible + 1, versions.Count - visible - 1);
        }
    }

    private static int Head(HeadTable heads, string id) => heads.Find(Bytes(id), IdBytes.HashOf(Bytes(id)));

    private static long[] Chain(HeadTable heads, string id)
    {
        var chain = new List<long>();
        for (int version = Head(heads, id); version != 0; version = heads.OlderOf(version))
        {
            chain.Add(heads.Record(version).Sequence);
        }

        return [.. chain];
    }

    private static byte[] Bytes(string id) => Encoding.UTF8.GetBytes(id);

    /// <summary>An entry as the committer keeps it: the id's bytes, then the value's (here "value of {id} at {n}"),
    /// in one buffer.</summary>
    private static byte[] Entry(byte[] id, long sequence, out int valueOffset, out int valueLength)
    {
        byte[] value = Encoding.UTF8.GetBytes($"value of {Encoding.UTF8.GetString(id)} at {sequence}");
        byte[] entry = [.. id, .. value];
        valueOffset = id.Length;
        valueLength = value.Length;
        return entry;
    }

    /// <summary>A registered snapshot, closed at disposal.</summary>
    private readonly ref struct SnapshotHolder
    {
        private readonly SnapshotRegistry.Entry _entry;

        public SnapshotHolder(SnapshotRegistry registry, ref long visible) => _entry = registry.Open(ref visible);

        public long Sequence => _entry.Sequence;

        public void Dispose() => _entry.Close();
    }

    /// <summary>The table a test's threads share and the visible sequence.</summary>
    private sealed class Shared
    {
        private HeadTable _heads = new();
        public long Visible;

        public HeadTable Heads
        {
            get => Volatile.Read(ref _heads);
            set => Volatile.Write(ref _heads, value);
        }
    }

    /// <summary>A single-threaded writer as the index's committer writes: each version hangs off the id's previous
    /// head, in sequence order.</summary>
    private sealed class Writer
    {
        public HeadTable Heads { get; set; } = new();

        public long Sequence { get; private set; }

        public void Write(string id, bool deleted)
        {
            long sequence = ++Sequence;
            byte[] idBytes = Bytes(id);
            byte[] entry = Entry(idBytes, sequence, out int valueOffset, out int valueLength);
            int hash = IdBytes.HashOf(idBytes);
            int slot = Heads.Locate(idBytes, hash, out int head);
            int written = Heads.Append(new HeadRecord
            {
                Buffer = entry, Sequence = sequence, Older = head, ValueOffset = valueOffset,
                ValueLength = valueLength, IdOffset = 0, IdLength = idBytes.Length, Hash = hash,
                Flags = deleted ? HeadRecord.DeletedFlag : (byte)0,
            });
            Heads.SetHead(slot, hash, written, inserted: head == 0);
        }
    }
}
