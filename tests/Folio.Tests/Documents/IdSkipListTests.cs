using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The sorted ids of a collection (<see cref="IdSkipList"/>): against a sorted-set model, and with readers walking
/// while the single writer inserts, asserting every walk they make.
/// </summary>
public sealed class IdSkipListTests
{
    private static readonly string[] s_alphabet = ["a", "b", "ab", "a/", "a/1", "a/10", "a/2", "b/", "\uffff",
        "a\uffff", "é", "\U0001F600"];

    /// <summary>
    /// Random inserts (duplicates included) of ids built from a small alphabet, then every range and prefix query over
    /// bounds from the same alphabet, both directions, against a sorted set.
    /// </summary>
    [Property(MaxTest = 300)]
    public void Walks_match_a_sorted_set_for_every_range_and_prefix(int[] program)
    {
        var list = new IdSkipList();
        var model = new SortedSet<string>(StringComparer.Ordinal);
        foreach (int op in program)
        {
            string id = IdFrom(op);
            Assert.Equal(model.Add(id), list.Add(id));
        }

        Assert.True(list.LevelsAreOrdered());
        Assert.Equal(model.Count, list.Count);
        Assert.Equal([.. model], Walk(list, null, null, descending: false));
        Assert.Equal(model.Reverse(), Walk(list, null, null, descending: true));
        foreach (string from in s_alphabet.Append(""))
        {
            string? prefixEnd = VersionedIndex.PrefixEnd(from);
            Assert.Equal(model.Where(id => id.StartsWith(from, StringComparison.Ordinal)),
                Walk(list, from, prefixEnd, descending: false));
            Assert.Equal(model.Where(id => id.StartsWith(from, StringComparison.Ordinal)).Reverse(),
                Walk(list, from, prefixEnd, descending: true));
            foreach (string to in s_alphabet)
            {
                IEnumerable<string> expected = model.Where(id => string.CompareOrdinal(id, from) >= 0
                    && string.CompareOrdinal(id, to) < 0);
                Assert.Equal(expected, Walk(list, from, to, descending: false));
                Assert.Equal(expected.Reverse(), Walk(list, from, to, descending: true));
            }
        }
    }

    /// <summary>
    /// Sorted batches (<see cref="IdSkipList.AddSorted"/>) of ids from the same alphabet, duplicates within a batch and
    /// of ids present included, mixed with single inserts: the count each batch reports and every walk match a sorted
    /// set.
    /// </summary>
    [Property(MaxTest = 300)]
    public void Sorted_batches_match_a_sorted_set(int[][] batches)
    {
        var list = new IdSkipList();
        var model = new SortedSet<string>(StringComparer.Ordinal);
        foreach (int[] batch in batches)
        {
            if (batch.Length == 1)
            {
                string single = IdFrom(batch[0]);
                Assert.Equal(model.Add(single), list.Add(single));
                continue;
            }

            string[] ids = batch.Select(IdFrom).Order(StringComparer.Ordinal).ToArray();
            int added = ids.Count(model.Add);
            Assert.Equal(added, list.AddSorted(ids));
        }

        Assert.True(list.LevelsAreOrdered());
        Assert.Equal(model.Count, list.Count);
        Assert.Equal([.. model], Walk(list, null, null, descending: false));
        Assert.Equal(model.Reverse(), Walk(list, null, null, descending: true));
        foreach (string from in s_alphabet)
        {
            Assert.Equal(model.Where(id => string.CompareOrdinal(id, from) >= 0),
                Walk(list, from, null, descending: false));
            Assert.Equal(model.Where(id => string.CompareOrdinal(id, from) < 0).Reverse(),
                Walk(list, null, from, descending: true));
        }
    }

    /// <summary>Many ids in sorted batches of random sizes land where single inserts put them (the finger search over
    /// a list tall enough to climb several levels).</summary>
    [Fact]
    public void Large_sorted_batches_build_the_same_order_as_single_inserts()
    {
        var random = new Random(7);
        var list = new IdSkipList();
        var model = new SortedSet<string>(StringComparer.Ordinal);
        for (int round = 0; round < 60; round++)
        {
            string[] ids = Enumerable.Range(0, random.Next(1, 5000))
                .Select(_ => $"id{random.Next(200_000)}").Order(StringComparer.Ordinal).ToArray();
            Assert.Equal(ids.Count(model.Add), list.AddSorted(ids));
        }

        Assert.True(list.LevelsAreOrdered());
        Assert.Equal([.. model], Walk(list, null, null, descending: false));
        Assert.Equal(model.Reverse(), Walk(list, null, null, descending: true));
    }

    [Theory]
    [InlineData("", null)]
    [InlineData("a", "b")]
    [InlineData("a/", "a0")]
    [InlineData("a\uffff", "b")]
    [InlineData("\uffff\uffff", null)]
    [InlineData("ab\uffff\uffff", "ac")]
    public void The_end_of_a_prefix_is_the_first_string_after_every_string_that_starts_with_it(string prefix,
        string? end)
    {
        Assert.Equal(end, VersionedIndex.PrefixEnd(prefix));
    }

    /// <summary>
    /// One writer inserts shuffled ids (one at a time, or in sorted batches) and, after each insert or batch, publishes
    /// how many it inserted (a release store, as the index publishes a commit); readers walk forward and backward from
    /// random bounds and assert each walk is strictly in order, holds only inserted ids, and holds every id inserted
    /// before the walk began that lies in its range.
    /// </summary>
    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public void Readers_walking_while_the_writer_inserts_see_every_published_id_in_order(bool sortedBatches)
    {
        double seconds = StressDuration.Seconds(2);
        const int Ids = 200_000;
        const int MaxBatch = 2048;
        string[] ids = Enumerable.Range(0, Ids).Select(i => $"k{i * 7919 % Ids:D6}").ToArray();
        var list = new IdSkipList();
        int published = 0;
        var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Volatile.Read(ref published) <= 1000, TimeSpan.FromSeconds(60));

        var writer = new Thread(() =>
        {
            var random = new Random(3);
            for (int i = 0; i < ids.Length && !stop.IsCancellationRequested;)
            {
                if (!sortedBatches)
                {
                    list.Add(ids[i++]);
                }
                else
                {
                    int count = Math.Min(random.Next(1, MaxBatch + 1), ids.Length - i);
                    string[] batch = ids[i..(i + count)];
                    Array.Sort(batch, StringComparer.Ordinal);
                    list.AddSorted(batch);
                    i += count;
                }

                Volatile.Write(ref published, i);
            }
        });
        var readers = Enumerable.Range(0, 3).Select(r => new Thread(() =>
        {
            var random = new Random(r);
            long walks = 0;
            while (!stop.IsCancellationRequested || walks < 10)
            {
                walks++;
                int before = Volatile.Read(ref published);
                string from = $"k{random.Next(Ids):D6}";
                string to = $"k{random.Next(Ids):D6}";
                if (string.CompareOrdinal(from, to) > 0)
                {
                    (from, to) = (to, from);
                }

                bool descending = random.Next(2) == 0;
                List<string> seen = Walk(list, from, to, descending);
                for (int i = 1; i < seen.Count; i++)
                {
                    if ((string.CompareOrdinal(seen[i - 1], seen[i]) < 0) == descending)
                    {
                        failures.Enqueue(
                            $"out of order: {seen[i - 1]}, {seen[i]} ({(descending ? "descending" : "ascending")})");
                    }
                }

                var set = new HashSet<string>(seen, StringComparer.Ordinal);
                for (int i = 0; i < before; i++)
                {
                    string id = ids[i];
                    if (string.CompareOrdinal(id, from) >= 0 && string.CompareOrdinal(id, to) < 0 && !set.Contains(id))
                    {
                        failures.Enqueue($"missed {id} in [{from}, {to}) {(descending ? "descending" : "ascending")}");
                        break;
                    }
                }

                // A walk may also see ids of the batch being inserted, which are published after it.
                int after = Volatile.Read(ref published) + (sortedBatches ? MaxBatch : 0);
                if (seen.Count > after)
                {
                    failures.Enqueue($"a walk of [{from}, {to}) saw {seen.Count} ids, at most {after} were inserted");
                }

                if (failures.Count > 10)
                {
                    return;
                }
            }
        })).ToList();

        writer.Start();
        readers.ForEach(t => t.Start());
        writer.Join();
        readers.ForEach(t => t.Join());
        Assert.Empty(failures);
        Assert.True(Volatile.Read(ref published) > 1000, "the writer made progress");
        Assert.True(list.LevelsAreOrdered());
    }

    private static string IdFrom(int op)
    {
        uint bits = (uint)op;
        string id = s_alphabet[bits % (uint)s_alphabet.Length];
        bits /= (uint)s_alphabet.Length;
        if (bits % 2 == 1)
        {
            id += s_alphabet[(bits / 2) % (uint)s_alphabet.Length];
        }

        return id;
    }

    /// <summary>The ids in [<paramref name="fromInclusive"/>, <paramref name="toExclusive"/>) (null: unbounded), walked
    /// with the list's links in the given direction.</summary>
    internal static List<string> Walk(IdSkipList list, string? fromInclusive, string? toExclusive, bool descending)
    {
        var ids = new List<string>();
        for (IdSkipList.Node? node = descending ? list.Last(toExclusive)
            : list.First(fromInclusive); node is not null; node = descending ? node.Previous : node.Next)
        {
            bool inRange = (fromInclusive is null || string.CompareOrdinal(node.Id, fromInclusive) >= 0)
                && (toExclusive is null || string.CompareOrdinal(node.Id, toExclusive) < 0);
            if (!inRange)
            {
                break;
            }

            ids.Add(node.Id);
        }

        return ids;
    }
}
