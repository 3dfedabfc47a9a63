using Folio.Storage;

namespace Folio.Tests.Storage;

/// <summary>
/// <see cref="WriteBackWindow"/> against a recording file: every range written is started once, the oldest ranges are
/// waited for first and only to make room, and no more than the limit is on its way unless one range alone is larger.
/// </summary>
public sealed class WriteBackWindowTests
{
    [Fact]
    public void Ranges_are_started_once_and_waited_for_oldest_first_only_to_keep_the_limit()
    {
        var calls = new List<(long Offset, long Length, bool Wait)>();
        var window = new WriteBackWindow((offset, length, wait) => calls.Add((offset, length, wait)), limit: 10);
        long[] lengths = [4, 4, 4, 1, 12, 3, 0, 7];
        long offset = 0;
        var onItsWay = new Queue<(long Offset, long Length)>();
        long inFlight = 0;
        foreach (long length in lengths)
        {
            int before = calls.Count;
            window.MakeRoom(length);
            window.Start(offset, length);

            // Model: wait for the oldest while the new range does not fit and something is on its way.
            var expected = new List<(long, long, bool)>();
            while (onItsWay.Count > 0 && inFlight + length > 10)
            {
                (long o, long l) = onItsWay.Dequeue();
                inFlight -= l;
                expected.Add((o, l, true));
            }

            if (length > 0)
            {
                expected.Add((offset, length, false));
                onItsWay.Enqueue((offset, length));
                inFlight += length;
            }

            Assert.Equal(expected, calls.Skip(before));
            Assert.Equal(inFlight, window.InFlightBytes);
            Assert.True(window.InFlightBytes <= 10 || onItsWay.Count == 1,
                $"{window.InFlightBytes} bytes on their way");
            offset += length;
        }

        // The 12-byte range went alone (it waited for everything before it).
        Assert.Contains((13L, 12L, false), calls);
        Assert.Equal(lengths.Sum(), calls.Where(c => !c.Wait).Sum(c => c.Length));
    }

    [Fact]
    public void A_failed_write_back_reaches_the_writer()
    {
        var window = new WriteBackWindow((_, _, wait) =>
        {
            if (wait)
            {
                throw new IOException("write-back failed");
            }
        }, limit: 8);
        window.Start(0, 8);
        Assert.Throws<IOException>(() => window.MakeRoom(1));
        Assert.Throws<ArgumentOutOfRangeException>(() => new WriteBackWindow((_, _, _) => { }, 0));
    }
}
