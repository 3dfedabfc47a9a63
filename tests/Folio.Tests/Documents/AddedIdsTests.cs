using FsCheck.Xunit;
using Folio.Documents;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// The ids added since the open (<see cref="AddedIds"/>): appended by the committer, sorted later by readers and by
/// background merges; every reader must see every id appended before it asked, in order.
/// </summary>
public sealed class AddedIdsTests
{
    [Property(MaxTest = 100)]
    public void The_sorted_ids_are_every_id_appended_in_ordinal_order(int[] ids, int readEvery)
    {
        var added = new AddedIds();
        var model = new SortedSet<string>(StringComparer.Ordinal);
        int every = 1 + (Math.Abs(readEvery % 50));
        int n = 0;
        foreach (int value in ids.Distinct())
        {
            string id = $"k{value}";
            added.Append(id);
            model.Add(id);
            if (++n % every == 0)
            {
                Assert.Equal(model, Walk(added.Sorted()));
            }
        }

        Assert.Equal(model, Walk(added.Sorted()));
        Assert.Equal(model.Count, added.Count);
        Assert.Equal(model.Count, added.MergedCount);
    }

    /// <summary>
    /// The committer appends shuffled ids across many chunks (background merges start as they pile up) and publishes
    /// how many after each (a release store, as the index publishes a commit); readers ask for the sorted ids and
    /// assert that a walk holds every id published before they asked, only appended ids, in strict order.
    /// </summary>
    [Fact]
    public void Readers_and_background_merges_racing_the_committer_see_every_published_id_in_order()
    {
        double seconds = StressDuration.Seconds(2);
        const int Ids = 300_000;
        string[] ids = Enumerable.Range(0, Ids).Select(i => $"k{i * 7919 % Ids:D6}").ToArray();
        var added = new AddedIds();
        int published = 0;
        var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
        using CancellationTokenSource stop = DedicatedTimer.CancelAfter(TimeSpan.FromSeconds(seconds),
            () => Volatile.Read(ref published) <= AddedIds.BackgroundMergeThreshold, TimeSpan.FromSeconds(60));

        var committer = new Thread(() =>
        {
            for (int i = 0; i < ids.Length && !stop.IsCancellationRequested; i++)
            {
                added.Append(ids[i]);
                Volatile.Write(ref published, i + 1);
                if ((i & 1023) == 0)
                {
                    Thread.Yield(); // let readers and merges interleave with the appends
                }
            }
        });
        var readers = Enumerable.Range(0, 2).Select(r => new Thread(() =>
        {
            var random = new Random(r);
            long reads = 0;
            while ((!stop.IsCancellationRequested || reads < 5) && failures.Count < 10)
            {
                reads++;
                int before = Volatile.Read(ref published);
                IdSkipList sorted = added.Sorted();
                string from = $"k{random.Next(Ids):D6}";
                string to = $"k{random.Next(Ids):D6}";
                if (string.CompareOrdinal(from, to) > 0)
                {
                    (from, to) = (to, from);
                }

                List<string> seen = IdSkipListTests.Walk(sorted, from, to, descending: false);

                for (int i = 1; i < seen.Count; i++)
                {
                    if (string.CompareOrdinal(seen[i - 1], seen[i]) >= 0)
                    {
                        failures.Enqueue($"out of order: {seen[i - 1]}, {seen[i]}");
                    }
                }

                var set = new HashSet<string>(seen, StringComparer.Ordinal);
                for (int i = 0; i < before; i++)
                {
                    if (string.CompareOrdinal(ids[i], from) >= 0 && string.CompareOrdinal(ids[i], to) < 0
                        && !set.Contains(ids[i]))
                    {
                        failures.Enqueue($"missed {ids[i]}, published before the read of [{from}, {to})");
                        break;
                    }
                }
            }
        })).ToList();

        committer.Start();
        readers.ForEach(t => t.Start());
        committer.Join();
        readers.ForEach(t => t.Join());
        Assert.Empty(failures);
        Assert.True(Volatile.Read(ref published) > AddedIds.BackgroundMergeThreshold,
            "the committer got past a background merge");
        Assert.Equal(Volatile.Read(ref published), Walk(added.Sorted()).Count);
    }

    /// <summary>Until a reader asks for the order, appended ids only wait (nothing sorts them); the first read sorts
    /// them all, and from then on background merges keep up without reads.</summary>
    [Fact]
    public async Task Ids_wait_unsorted_until_the_first_read_and_merge_in_the_background_after_it()
    {
        var added = new AddedIds();
        int n = 3 * AddedIds.BackgroundMergeThreshold;
        for (int i = 0; i < n; i++)
        {
            added.Append($"k{i * 7919 % n:D6}");
        }

        await Task.Delay(200);
        Assert.Equal(0, added.MergedCount);
        Assert.False(added.WasRead);

        Assert.Equal(n, Walk(added.Sorted()).Count);
        Assert.Equal(n, added.MergedCount);
        Assert.True(added.WasRead);

        for (int i = 0; i < 2 * AddedIds.BackgroundMergeThreshold; i++)
        {
            added.Append($"m{i:D6}");
        }

        using var deadline = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        while (added.MergedCount < n + AddedIds.BackgroundMergeThreshold)
        {
            await Task.Delay(10, deadline.Token);
        }

        Assert.True(new AddedIds(readBefore: true).WasRead, "a list rebuilt from a read one merges in the background");
    }

    private static List<string> Walk(IdSkipList list) => IdSkipListTests.Walk(list, null, null, descending: false);
}
