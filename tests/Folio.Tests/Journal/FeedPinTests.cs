using Folio.Journal;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

public sealed class FeedPinTests
{
    [Fact]
    public void A_pin_decodes_only_whole_and_unchanged()
    {
        byte[] bytes = FeedPin.Encode(123_456_789);
        Assert.True(FeedPin.TryDecode(bytes, out long next));
        Assert.Equal(123_456_789, next);
        for (int bit = 0; bit < bytes.Length * 8; bit++)
        {
            byte[] flipped = (byte[])bytes.Clone();
            flipped[bit / 8] ^= (byte)(1 << (bit % 8));
            Assert.False(FeedPin.TryDecode(flipped, out _), $"bit {bit} flipped");
        }

        Assert.False(FeedPin.TryDecode(bytes.AsSpan(0, FeedPin.Size - 1), out _));
        Assert.False(FeedPin.TryDecode([.. bytes, 0], out _));
        Assert.False(FeedPin.TryDecode(FeedPin.Encode(0), out _)); // sequences start at 1
    }

    [Fact]
    public void The_writer_sees_the_oldest_live_pin_as_it_moves_and_deletes_the_pins_of_dead_readers()
    {
        using var dir = new TempDirectory();
        string folder = Path.Combine(dir.Path, "readers");
        IFileSystem files = PhysicalFileSystem.Instance;
        Assert.Null(FeedPin.OldestLive(files, folder)); // no folder yet

        using FeedPin first = FeedPin.TryCreate(dir.Path, 10)!;
        using FeedPin second = FeedPin.TryCreate(dir.Path, 40)!;
        Assert.Equal(10, FeedPin.OldestLive(files, folder));

        first.Advance(50);
        first.Advance(20); // never backwards
        Assert.Equal(40, FeedPin.OldestLive(files, folder));

        // A pin nobody holds (its reader died) keeps nothing and is deleted; a pin being written (.tmp) is ignored.
        string dead = Path.Combine(folder, "dead" + FeedPin.Extension);
        File.WriteAllBytes(dead, FeedPin.Encode(1));
        File.WriteAllBytes(Path.Combine(folder, "writing.tmp"), FeedPin.Encode(2));
        Assert.Equal(40, FeedPin.OldestLive(files, folder));
        Assert.False(File.Exists(dead));

        // A live pin whose bytes fail their checksum holds everything (within the writer's bound).
        using (FileStream damaged = new(Path.Combine(folder, "damaged" + FeedPin.Extension), FileMode.CreateNew,
            FileAccess.ReadWrite, FileShare.Read | FileShare.Delete))
        {
            byte[] bytes = FeedPin.Encode(7);
            bytes[17] ^= 1;
            damaged.Write(bytes);
            damaged.Flush();
            Assert.Equal(1, FeedPin.OldestLive(files, folder));
            File.Delete(damaged.Name);
        }

        second.Dispose();
        second.Dispose(); // idempotent
        Assert.False(File.Exists(second.Path));
        Assert.Equal(50, FeedPin.OldestLive(files, folder));
        first.Dispose();
        Assert.Null(FeedPin.OldestLive(files, folder));
    }

    [Fact]
    public void A_reader_that_cannot_write_the_store_folder_reads_without_a_pin()
    {
        using var dir = new TempDirectory();
        File.WriteAllText(Path.Combine(dir.Path, "readers"), "a file where the folder would be");
        Assert.Null(FeedPin.TryCreate(dir.Path, 1));
    }
}
