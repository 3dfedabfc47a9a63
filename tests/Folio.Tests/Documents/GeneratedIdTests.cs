using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Generated ids come from counters that several sessions advance at once (<see cref="AtomicMaximum.Advance"/>):
/// every call gets a value no other call gets, each thread's values grow, and a raise at a store's open
/// (<see cref="AtomicMaximum.TryRaise"/>) racing the advances never lets a later value fall to it.
/// </summary>
public sealed class GeneratedIdTests
{
    [Fact]
    public void Concurrent_advances_give_every_caller_a_distinct_value_above_its_last_and_above_every_raise()
    {
        const int Advancers = 3;
        const int PerThread = 300_000;
        long location = 0;
        long raisedTo = 0;
        var values = new long[Advancers][];
        var floors = new long[Advancers][];
        using var start = new Barrier(Advancers + 1);
        var threads = new List<Thread>();
        for (int t = 0; t < Advancers; t++)
        {
            int thread = t;
            values[t] = new long[PerThread];
            floors[t] = new long[PerThread];
            threads.Add(new Thread(() =>
            {
                long[] mine = values[thread];
                long[] floor = floors[thread];
                start.SignalAndWait();
                for (int i = 0; i < PerThread; i++)
                {
                    floor[i] = Volatile.Read(ref raisedTo);
                    // "now" as a clock gives it: mostly behind the counter, now and then ahead of it
                    mine[i] = AtomicMaximum.Advance(ref location, i % 7 == 0 ? Volatile.Read(ref location) + 3 : 0);
                }
            }));
        }

        // A raiser, as a store's open: each raise is a floor for every advance that starts after it returns.
        threads.Add(new Thread(() =>
        {
            start.SignalAndWait();
            for (int i = 1; i <= 2_000; i++)
            {
                long floor = i * 500L;
                AtomicMaximum.TryRaise(ref location, floor);
                Volatile.Write(ref raisedTo, floor);
            }
        }));
        threads.ForEach(thread => thread.Start());
        threads.ForEach(thread => Assert.True(thread.Join(TestDeadline.Hang)));

        for (int t = 0; t < Advancers; t++)
        {
            for (int i = 0; i < PerThread; i++)
            {
                Assert.True(values[t][i] > floors[t][i], $"thread {t}: {values[t][i]} not above the raise to " +
                    $"{floors[t][i]}");
                if (i > 0 && values[t][i] <= values[t][i - 1])
                {
                    Assert.Fail($"thread {t}: {values[t][i]} after {values[t][i - 1]}");
                }
            }
        }

        long[] all = values.SelectMany(v => v).Order().ToArray();
        for (int i = 1; i < all.Length; i++)
        {
            Assert.True(all[i] != all[i - 1], $"{all[i]} given twice");
        }

        Assert.Equal(all[^1], Volatile.Read(ref location));
    }
}
