using System.Collections.Concurrent;
using System.Text;
using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Journal;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

public sealed class VersionedIndexTests
{
    private static readonly string[] s_ids = ["a", "a/1", "a/2", "ab", "b", "b/1", "c"];

    /// <summary>
    /// Random commits (puts and deletes over a few ids in two collections), snapshots opened and closed at random, and
    /// reads at every open snapshot (get, range, prefix, count, both directions) against a model that keeps a full copy
    /// of the state per commit. Pruning must never remove a version an open snapshot sees.
    /// </summary>
    [Property(MaxTest = 200, Arbitrary = [typeof(VersionedIndexTests)])]
    public void Every_open_snapshot_keeps_seeing_exactly_its_state_while_commits_prune_old_versions(int[] program) =>
        RunProgram(program, replayedCommits: 0);

    /// <summary>
    /// The same over replayed documents: the program's first commits go through a journal and a recovery replay (the
    /// index's base layer, <see cref="ReplayedDocuments"/>), the rest are applied as live commits that overwrite and
    /// delete replayed documents and add ids between them, while snapshots stay open across the overwrites.
    /// </summary>
    [Property(MaxTest = 100, Arbitrary = [typeof(VersionedIndexTests)])]
    public void Every_open_snapshot_over_replayed_documents_keeps_seeing_exactly_its_state(int[] program) =>
        RunProgram(program, replayedCommits: program.Count(op => (op & 7) <= 2) / 2);

    [Fact]
    public void Each_rewritten_key_is_one_change_per_checkpoint_and_one_head_across_checkpoints()
    {
        // Ten keys rewritten again and again, and checkpoints taken at sequences behind the newest writes (as a
        // checkpoint's snapshot is behind the commits that continue during it): every key is one change of each
        // checkpoint and stays one head for the next, not one per write.
        var index = new VersionedIndex();
        long sequence = 0;
        long checkpointed = 0;
        for (int round = 1; round <= 20; round++)
        {
            Write(50);
            using IndexSnapshot snapshot = index.OpenSnapshot(); // the checkpoint's snapshot, as the checkpointer holds
            Write(50);
            CheckpointChanges changes = index.CollectChanges(snapshot.Sequence, checkpointed);
            Assert.Equal(10, Assert.Single(changes.Collections).Changes.Count);
            index.ChangesCheckpointed(changes);
            checkpointed = snapshot.Sequence;
            Assert.Equal(10, index.HeadCount);
        }

        void Write(int writes)
        {
            for (int write = 0; write < writes; write++)
            {
                var batch = new CommitBatch().Put("c", $"k{write % 10}", Encoding.UTF8.GetBytes($"{{\"n\":{write}}}"));
                index.Apply(batch, ++sequence, 0);
                index.Publish(sequence);
            }
        }
    }

    private static void RunProgram(int[] program, int replayedCommits)
    {
        var index = new VersionedIndex();
        var states = new List<Dictionary<DocumentKey, (long Version, string Json)>> { new() };
        var open = new List<IndexSnapshot>();
        long sequence = 0;
        using var dir = new TempDirectory();
        WriteAheadJournal? journal = replayedCommits > 0
            ? WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(64 * 1024)) : null;
        foreach (int op in program)
        {
            int argument = op >>> 3;
            if (journal is not null && sequence == replayedCommits)
            {
                ReplayInto(index, journal);
                journal = null;
            }

            if (journal is not null && (op & 7) > 2)
            {
                continue; // no reader exists before the replay
            }

            switch (op & 7)
            {
                case 0 or 1 or 2:
                    {
                        sequence++;
                        var state = new Dictionary<DocumentKey, (long, string)>(states[^1]);
                        var batch = new CommitBatch();
                        for (int c = 0; c <= argument % 3; c++)
                        {
                            var key = new DocumentKey((argument >> (4 + c)) % 2 == 0 ? "x" : "y",
                                s_ids[(argument >> (6 + (3 * c))) % s_ids.Length]);
                            if ((argument >> (2 + c)) % 4 == 0)
                            {
                                batch.Delete(key.Collection, key.Id);
                                state.Remove(key);
                            }
                            else
                            {
                                string json = $"{{\"s\":{sequence},\"c\":{c}}}";
                                batch.Put(key.Collection, key.Id, Encoding.UTF8.GetBytes(json));
                                state[key] = (sequence, json);
                            }
                        }

                        if (journal is not null)
                        {
                            Assert.Equal(sequence, journal.AppendBatch(batch));
                        }
                        else
                        {
                            index.Apply(batch, sequence, sequence * 10);
                            index.Publish(sequence);
                        }

                        states.Add(state);
                        break;
                    }

                case 3 or 4:
                    open.Add(index.OpenSnapshot());
                    break;
                case 5:
                    if (open.Count > 0)
                    {
                        int at = argument % open.Count;
                        open[at].Dispose();
                        open.RemoveAt(at);
                    }

                    break;
                default:
                    foreach (IndexSnapshot snapshot in open.Append(index.OpenSnapshot()))
                    {
                        AssertSnapshot(index, snapshot.Sequence, states[(int)snapshot.Sequence], argument);
                    }

                    break;
            }
        }

        if (journal is not null)
        {
            ReplayInto(index, journal);
        }

        foreach (IndexSnapshot snapshot in open)
        {
            AssertSnapshot(index, snapshot.Sequence, states[(int)snapshot.Sequence], 0);
            snapshot.Dispose();
        }

        using IndexSnapshot last = index.OpenSnapshot();
        AssertSnapshot(index, last.Sequence, states[(int)last.Sequence], program.Length);
        Assert.Equal(states[^1].Count, index.LiveDocuments());
    }

    /// <summary>Replays <paramref name="journal"/> into the empty <paramref name="index"/> as a store's open does, then
    /// closes the journal.</summary>
    private static void ReplayInto(VersionedIndex index, WriteAheadJournal journal)
    {
        journal.Sync();
        JournalReplay.Run(journal, index);
        journal.Dispose();
    }

    public static Arbitrary<int[]> Programs() =>
        Arb.From(
            Gen.ArrayOf(Gen.Choose(0, int.MaxValue)),
            static program => Enumerable.Range(0, program.Length)
                .Select(skip => program.Where((_, i) => i != skip).ToArray()));

    private static void AssertSnapshot(VersionedIndex index, long snapshot, Dictionary<DocumentKey,
        (long Version, string Json)> state, int argument)
    {
        foreach (string collection in new[] { "x", "y" })
        {
            foreach (string id in s_ids)
            {
                DocumentVersion? version = index.Get(new DocumentKey(collection, id), snapshot);
                if (state.TryGetValue(new DocumentKey(collection, id), out var expected))
                {
                    Assert.NotNull(version);
                    Assert.Equal(expected.Version, version.Value.Sequence);
                    Assert.Equal(expected.Json, Encoding.UTF8.GetString(version.Value.Json.Span));
                }
                else
                {
                    Assert.Null(version);
                }
            }

            var live = state.Keys.Where(k => k.Collection == collection).Select(k => k.Id).Order(StringComparer.Ordinal)
                .ToList();
            Assert.Equal(live.Count, index.Count(collection, snapshot));
            bool descending = argument % 2 == 1;
            string from = s_ids[argument % s_ids.Length];
            string to = s_ids[(argument / 7) % s_ids.Length];
            if (string.CompareOrdinal(from, to) > 0)
            {
                (from, to) = (to, from);
            }

            var range = live.Where(id => string.CompareOrdinal(id, from) >= 0 && string.CompareOrdinal(id, to) < 0)
                .ToList();
            Assert.Equal(descending ? Enumerable.Reverse(range) : range,
                index.Range(collection, from, to, descending, snapshot).Select(e => e.Id));
            Assert.Equal(live, index.Range(collection, null, null, descending: false, snapshot).Select(e => e.Id));
            string prefix = from.Length > 0 ? from[..1] : from;
            var withPrefix = live.Where(id => id.StartsWith(prefix, StringComparison.Ordinal)).ToList();
            Assert.Equal(descending ? Enumerable.Reverse(withPrefix) : withPrefix,
                index.Prefix(collection, prefix, descending, snapshot).Select(e => e.Id));
        }
    }

    [Fact]
    public void An_inverted_range_is_rejected_and_an_unknown_collection_is_empty()
    {
        var index = new VersionedIndex();
        Assert.Throws<ArgumentException>(() => index.Range("x", "b", "a", descending: false, 0));
        Assert.Empty(index.Range("nothing", null, null, descending: false, 0));
        Assert.Empty(index.Prefix("nothing", "a", descending: true, 0));
        Assert.Equal(0, index.Count("nothing", 0));
    }

    [Fact]
    public void Versions_no_snapshot_can_see_are_pruned()
    {
        var index = new VersionedIndex();
        var key = new DocumentKey("x", "k");
        index.Apply(new CommitBatch().Put("x", "k", "1"u8.ToArray()), 1, 1 * 10);
        index.Publish(1);
        IndexSnapshot old = index.OpenSnapshot();
        index.Apply(new CommitBatch().Put("x", "k", "2"u8.ToArray()), 2, 2 * 10);
        index.Publish(2);
        index.Apply(new CommitBatch().Put("x", "k", "3"u8.ToArray()), 3, 3 * 10);
        index.Publish(3);
        Assert.Equal("1"u8.ToArray(), index.Get(key, old.Sequence)!.Value.Json.ToArray());
        Assert.Equal(3, index.ChainLength(key));

        old.Dispose();
        Assert.Equal(0, index.OpenSnapshots);
        index.Apply(new CommitBatch().Put("x", "k", "4"u8.ToArray()), 4, 4 * 10);
        index.Publish(4);
        Assert.Equal(2, index.ChainLength(key)); // version 4 and version 3 (visible at the oldest point, 3)
        Assert.Equal("4"u8.ToArray(), index.Get(key, index.VisibleSequence)!.Value.Json.ToArray());
    }

    /// <summary>
    /// 20,000 documents in two collections come from a recovery replay; the writer then overwrites or deletes each in
    /// turn (the first pass takes every replayed document from the base layer to the heads) while readers read random
    /// ones. A reader sees both collections' copies at one version (never a torn batch), never a version older than
    /// one committed before its snapshot, never loses a document nobody deleted, and never sees versions go back.
    /// </summary>
    [Fact]
    public async Task Readers_never_lose_a_replayed_document_while_the_writer_overwrites_it_for_the_first_time()
    {
        const int Keys = 20_000;
        using var dir = new TempDirectory();
        var index = new VersionedIndex();
        using (var journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(4 << 20)))
        {
            for (int start = 0; start < Keys; start += 1000)
            {
                var batch = new CommitBatch();
                for (int k = start; k < start + 1000; k++)
                {
                    batch.Put("x", $"k{k}", "0"u8.ToArray()).Put("y", $"k{k}", "0"u8.ToArray());
                }

                journal.AppendBatch(batch);
            }

            journal.Sync();
            JournalReplay.Run(journal, index);
        }

        long replayedTo = index.VisibleSequence;
        var written = new long[Keys]; // the sequence of the writer's latest write of each key, 0: the replayed put
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(2));
        var failures = new ConcurrentQueue<string>();
        var writer = Task.Factory.StartNew(() =>
        {
            // Two passes over every key however starved the host, then until the time is up.
            for (long s = replayedTo + 1; s <= replayedTo + (2 * Keys) || !stop.IsCancellationRequested; s++)
            {
                int k = (int)((s - replayedTo - 1) % Keys);
                var batch = new CommitBatch();
                if (s % 7 == 0)
                {
                    batch.Delete("x", $"k{k}").Delete("y", $"k{k}");
                }
                else
                {
                    byte[] value = Encoding.UTF8.GetBytes(
                        s.ToString(System.Globalization.CultureInfo.InvariantCulture));
                    batch.Put("x", $"k{k}", value).Put("y", $"k{k}", value);
                }

                index.Apply(batch, s, s * 10);
                index.Publish(s);
                Volatile.Write(ref written[k], s);
            }
        }, TaskCreationOptions.LongRunning);

        var readers = Enumerable.Range(0, 3).Select(r => Task.Run(() =>
        {
            var random = new Random(r);
            var lastSeen = new long[Keys];
            while (!writer.IsCompleted)
            {
                int k = random.Next(Keys);
                long before = Volatile.Read(ref written[k]);
                using IndexSnapshot snapshot = index.OpenSnapshot();
                DocumentVersion? x = index.Get(new DocumentKey("x", $"k{k}"), snapshot.Sequence);
                DocumentVersion? y = index.Get(new DocumentKey("y", $"k{k}"), snapshot.Sequence);
                if ((x is null) != (y is null)
                    || (x is { } xv && y is { } yv
                        && (xv.Sequence != yv.Sequence || !xv.Json.Span.SequenceEqual(yv.Json.Span))))
                {
                    failures.Enqueue($"torn batch on k{k} at snapshot {snapshot.Sequence}");
                }

                bool beforeWasPut = before == 0 || before % 7 != 0;
                long nextWrite = before == 0 ? replayedTo + 1 + k : before + Keys;
                if (x is null && beforeWasPut && snapshot.Sequence < nextWrite)
                {
                    failures.Enqueue(
                        $"k{k} lost at snapshot {snapshot.Sequence}: put at {before} and not written since");
                }

                if (x is { Sequence: long seen })
                {
                    if (seen > snapshot.Sequence || seen < before || (!beforeWasPut && seen == before)
                        || seen < lastSeen[k])
                    {
                        failures.Enqueue(
                            $"k{k}: version {seen} at snapshot {snapshot.Sequence}, written at {before} before " +
                            $"it, {lastSeen[k]} seen before");
                    }

                    lastSeen[k] = seen;
                }
            }
        })).ToArray();

        await Task.WhenAll(readers.Append(writer));
        Assert.Empty(failures);
        Assert.Equal(0, index.OpenSnapshots);
    }

    /// <summary>
    /// A writer commits batches that put the same value under two keys (atomically) while readers take snapshots:
    /// a reader sees both keys at one version (never a torn batch), and versions never go back across its snapshots.
    /// </summary>
    [Fact]
    public async Task Readers_see_whole_batches_in_increasing_order_while_the_writer_commits()
    {
        var index = new VersionedIndex();
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(2));
        var failures = new ConcurrentQueue<string>();
        long committed = 0;
        var writer = Task.Factory.StartNew(() =>
        {
            // At least a thousand batches however starved the host, then until the time is up.
            for (long s = 1; s <= 1000 || !stop.IsCancellationRequested; s++)
            {
                byte[] value = Encoding.UTF8.GetBytes(s.ToString(System.Globalization.CultureInfo.InvariantCulture));
                var batch = new CommitBatch().Put("x", $"k{s % 5}", value).Put("y", $"k{s % 5}", value);
                if (s % 11 == 0)
                {
                    batch.Delete("x", $"k{(s + 1) % 5}").Delete("y", $"k{(s + 1) % 5}");
                }

                index.Apply(batch, s, s * 10);
                index.Publish(s);
                Volatile.Write(ref committed, s);
            }
        }, TaskCreationOptions.LongRunning);

        var readers = Enumerable.Range(0, 4).Select(r => Task.Run(() =>
        {
            var lastSeen = new long[5];
            long lastSnapshot = 0;
            while (!writer.IsCompleted)
            {
                using IndexSnapshot snapshot = index.OpenSnapshot();
                if (snapshot.Sequence < lastSnapshot)
                {
                    failures.Enqueue("snapshot went back");
                }

                lastSnapshot = snapshot.Sequence;
                for (int k = 0; k < 5; k++)
                {
                    DocumentVersion? x = index.Get(new DocumentKey("x", $"k{k}"), snapshot.Sequence);
                    DocumentVersion? y = index.Get(new DocumentKey("y", $"k{k}"), snapshot.Sequence);
                    if ((x is null) != (y is null)
                        || (x is { } xv && y is { } yv
                        && (xv.Sequence != yv.Sequence || !xv.Json.Span.SequenceEqual(yv.Json.Span))))
                    {
                        failures.Enqueue($"torn batch on k{k} at snapshot {snapshot.Sequence}");
                    }

                    if (x is { Sequence: long seen })
                    {
                        if (seen > snapshot.Sequence || seen < lastSeen[k])
                        {
                            failures.Enqueue(
                                $"k{k}: version {seen} after {lastSeen[k]} at snapshot {snapshot.Sequence}");
                        }

                        lastSeen[k] = seen;
                    }
                }

                if (index.Count("x", snapshot.Sequence) != index.Count("y", snapshot.Sequence))
                {
                    failures.Enqueue("collections disagree within one snapshot");
                }
            }
        })).ToArray();

        await Task.WhenAll(readers.Append(writer));
        Assert.Empty(failures);
        Assert.True(Volatile.Read(ref committed) > 1000);
        Assert.Equal(0, index.OpenSnapshots);
    }
}
