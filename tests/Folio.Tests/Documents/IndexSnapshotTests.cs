using Folio.Documents;

namespace Folio.Tests.Documents;

/// <summary>
/// A snapshot's readers and its owner's release (<see cref="IndexSnapshot.Release"/>), racing on two threads: the
/// snapshot stays registered while any reader that began before the release reads, and closes once both ended,
/// whichever came last.
/// </summary>
public sealed class IndexSnapshotTests
{
    [Fact]
    public void A_snapshot_released_while_readers_end_on_other_threads_stays_open_for_them_and_closes_after_both()
    {
        const int Readers = 3;
        const int Rounds = 20_000;
        var index = new VersionedIndex();
        IndexSnapshot? snapshot = null;
        using var round = new Barrier(Readers + 1); // twice a round: start, then end
        Exception? failure = null;
        var threads = new Thread[Readers];
        for (int r = 0; r < Readers; r++)
        {
            threads[r] = new Thread(() =>
            {
                for (int i = 0; i < Rounds; i++)
                {
                    round.SignalAndWait();
                    try
                    {
                        // Whatever the release did meanwhile, this reader's snapshot is still registered.
                        int open = index.OpenSnapshots;
                        Volatile.Read(ref snapshot)!.EndRead();
                        if (open != 1)
                        {
                            Interlocked.CompareExchange(ref failure,
                                new InvalidOperationException($"round {i}: {open} snapshots open while read"), null);
                        }
                    }
                    finally
                    {
                        round.SignalAndWait();
                    }
                }
            });
            threads[r].IsBackground = true; // a failed assertion must not leave the run waiting for them
            threads[r].Start();
        }

        for (int i = 0; i < Rounds; i++)
        {
            IndexSnapshot current = index.OpenSnapshot();
            for (int r = 0; r < Readers; r++)
            {
                current.BeginRead();
            }

            Volatile.Write(ref snapshot, current);
            round.SignalAndWait();
            current.Release();
            round.SignalAndWait();
            Assert.Null(failure);
            Assert.Equal(0, index.OpenSnapshots);
        }

        foreach (Thread thread in threads)
        {
            thread.Join();
        }
    }

    [Fact]
    public void A_snapshot_released_without_readers_closes_at_once_and_a_late_end_of_read_does_not_reopen_it()
    {
        var index = new VersionedIndex();
        IndexSnapshot unread = index.OpenSnapshot();
        unread.Release();
        Assert.Equal(0, index.OpenSnapshots);

        IndexSnapshot read = index.OpenSnapshot();
        read.BeginRead();
        read.Release();
        Assert.Equal(1, index.OpenSnapshots);
        read.EndRead();
        Assert.Equal(0, index.OpenSnapshots);
        read.Dispose(); // closing again is harmless
        Assert.Equal(0, index.OpenSnapshots);
    }
}
