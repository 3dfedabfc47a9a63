using Folio.Journal;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>The striped reference counts of <see cref="JournalSegment"/> (protocol at the top of the type).</summary>
public sealed class JournalSegmentReferenceTests
{
    /// <summary>
    /// Four readers enter and leave a segment as fast as they can (reading its mapping while inside) while the owner
    /// drops its reference at a random moment, on 200 segments: each segment is finalized exactly once, never while a
    /// reader is inside, and no reader gets in after the owner left. A mapping released under a reader would fault.
    /// </summary>
    [Fact]
    public void Readers_entering_and_leaving_never_see_a_finalized_segment_and_the_last_one_out_finalizes_once()
    {
        using var dir = new TempDirectory();
        var random = new Random(7);
        for (int round = 0; round < 200; round++)
        {
            string path = Path.Combine(dir.Path, $"{round}.seg");
            File.WriteAllBytes(path, Enumerable.Repeat((byte)(round % 251), 4096).ToArray());
            int finalized = 0;
            var segment = new JournalSegment(new PhysicalStorageFile(path, FileMode.Open), 1, 4096, 4096, _
                => Interlocked.Increment(ref finalized));
            segment.MarkForDeletion();
            int ownerReleased = 0;
            int failures = 0;
            using var start = new Barrier(5);
            var readers = Enumerable.Range(0, 4).Select(_ => new Thread(() =>
            {
                start.SignalAndWait();
                for (int i = 0; i < 2000; i++)
                {
                    bool ownerGoneBefore = Volatile.Read(ref ownerReleased) != 0;
                    if (!segment.TryAcquire(out int stripe))
                    {
                        continue;
                    }

                    if (ownerGoneBefore || segment.IsFinalized || segment.Span(4095, 1)[0] != (byte)(round % 251))
                    {
                        Interlocked.Increment(ref failures);
                    }

                    segment.Release(stripe);
                }
            })).ToList();
            readers.ForEach(t => t.Start());
            start.SignalAndWait();
            Thread.SpinWait(random.Next(20_000));
            segment.ReleaseOwner();
            Volatile.Write(ref ownerReleased, 1); // after: a reader that saw it must not get in
            readers.ForEach(t => t.Join());

            Assert.Equal(0, failures);
            Assert.True(segment.IsFinalized);
            Assert.Equal(1, finalized);
            Assert.Equal(0, segment.ReferenceCount);
            Assert.False(segment.TryAcquire(out _));
            segment.ReleaseOwner(); // idempotent
            Assert.Equal(1, finalized);
        }
    }

    [Fact]
    public void A_segment_stays_mapped_while_a_reader_holds_it_after_the_owner_left()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "held.seg");
        File.WriteAllBytes(path, new byte[4096]);
        int finalized = 0;
        var segment = new JournalSegment(new PhysicalStorageFile(path, FileMode.Open), 1, 4096, 4096, _ => finalized++);
        Assert.True(segment.TryAcquire(out int first));
        Assert.True(segment.TryAcquire(out int second));
        Assert.Equal(3, segment.ReferenceCount);

        segment.ReleaseOwner();
        Assert.False(segment.IsFinalized);
        Assert.False(segment.TryAcquire(out _)); // no new reader once the owner left
        Assert.Equal(0, segment.Span(0, 1)[0]);

        segment.Release(first);
        Assert.False(segment.IsFinalized);
        segment.Release(second);
        Assert.True(segment.IsFinalized);
        Assert.Equal(0, finalized); // not marked for deletion: finalized (unmapped, closed) but the file stays
        Assert.True(File.Exists(path));
    }
}
