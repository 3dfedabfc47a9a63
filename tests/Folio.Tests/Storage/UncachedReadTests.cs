using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Storage;

/// <summary>
/// Reads around the operating system's page cache (<see cref="IStorageFile.ReadUncached"/>, Linux <c>O_DIRECT</c>)
/// through the physical file system and <see cref="DataFile.TryReadUncached"/>: aligned reads return the file's bytes,
/// including bytes written and not yet synced; the end of the file gives a short read; a read the direct handle
/// refuses is read through the cache and turns uncached reads off, and a reader still reading with them then reads
/// through the cache and still sees the end of the file; a file system that cannot (or another operating
/// system) reports no alignment and reads through the cache.
/// </summary>
public sealed class UncachedReadTests
{
    private const int Alignment = 4096;

    [Fact]
    public void Aligned_reads_around_the_page_cache_return_the_files_bytes_and_end_short_at_its_end()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        byte[] contents = new byte[(5 * Alignment) + 100]; // ends mid-block
        new Random(3).NextBytes(contents);
        using IStorageFile file = PhysicalFileSystem.Instance.OpenFile(path, FileMode.CreateNew);
        file.Write(contents, 0);
        file.Sync();
        if (!OperatingSystem.IsLinux())
        {
            Assert.Equal(0, file.UncachedAlignment);
            return;
        }

        Assert.Equal(Alignment, file.UncachedAlignment);
        var buffers = new RunBuffers(8 * Alignment);
        byte[] buffer = buffers.Rent();
        int at = RunBuffers.AlignedIndex(buffer, Alignment);
        Span<byte> aligned = buffer.AsSpan(at, 3 * Alignment);

        Assert.Equal(3 * Alignment, file.ReadUncached(aligned, Alignment));
        Assert.True(aligned.SequenceEqual(contents.AsSpan(Alignment, 3 * Alignment)));

        // The last block is read as far as the file goes.
        Assert.Equal(Alignment + 100, file.ReadUncached(buffer.AsSpan(at, 2 * Alignment), 4 * Alignment));
        Assert.True(buffer.AsSpan(at, Alignment + 100).SequenceEqual(contents.AsSpan(4 * Alignment)));

        // Written and not synced: still what the read returns (the kernel writes the cached bytes back first).
        byte[] rewritten = new byte[2 * Alignment];
        new Random(4).NextBytes(rewritten);
        file.Write(rewritten, 1_000);
        Assert.Equal(2 * Alignment, file.ReadUncached(buffer.AsSpan(at, 2 * Alignment), 0));
        Assert.True(buffer.AsSpan(at + 1_000, 2 * Alignment - 1_000).SequenceEqual(rewritten.AsSpan(0,
            2 * Alignment - 1_000)));
        buffers.Return(buffer);
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)] // a reader that chose direct reads before they were refused: its reads go through the cache
    public void A_data_file_read_around_the_page_cache_reports_a_read_past_its_end(bool refusedFirst)
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        using var file = new DataFile(PhysicalFileSystem.Instance.OpenFile(path, FileMode.CreateNew));
        byte[] contents = new byte[(2 * Alignment) + 10];
        new Random(5).NextBytes(contents);
        file.Write(contents, 0);
        if (file.UncachedAlignment == 0)
        {
            Assert.False(OperatingSystem.IsLinux(), "Linux reads around the page cache on this file system");
            return;
        }

        var buffers = new RunBuffers(8 * Alignment);
        byte[] buffer = buffers.Rent();
        int at = RunBuffers.AlignedIndex(buffer, Alignment);
        if (refusedFirst)
        {
            Assert.True(file.TryReadUncached(buffer.AsSpan(at, Alignment), 100, Alignment)); // refused (misaligned)
            Assert.True(buffer.AsSpan(at, Alignment).SequenceEqual(contents.AsSpan(100, Alignment)));
            Assert.Equal(0, file.UncachedAlignment);
        }

        Assert.True(file.TryReadUncached(buffer.AsSpan(at, 3 * Alignment), 0, (2 * Alignment) + 10));
        Assert.True(buffer.AsSpan(at, contents.Length).SequenceEqual(contents));
        Assert.False(file.TryReadUncached(buffer.AsSpan(at, 3 * Alignment), 0, (2 * Alignment) + 11));
        Assert.False(file.TryReadUncached(buffer.AsSpan(at, Alignment), 4 * Alignment, 1));
    }

    [Fact]
    public void A_read_the_direct_handle_refuses_is_read_through_the_page_cache_and_turns_uncached_reads_off()
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        byte[] contents = new byte[3 * Alignment];
        new Random(6).NextBytes(contents);
        using IStorageFile file = PhysicalFileSystem.Instance.OpenFile(path, FileMode.CreateNew);
        file.Write(contents, 0);
        if (file.UncachedAlignment == 0)
        {
            Assert.False(OperatingSystem.IsLinux(), "Linux reads around the page cache on this file system");
            return;
        }

        // An offset off the alignment: O_DIRECT refuses it (EINVAL), as a file system that wants more would.
        byte[] read = new byte[Alignment];
        Assert.Equal(Alignment, file.ReadUncached(read, 100));
        Assert.True(read.AsSpan().SequenceEqual(contents.AsSpan(100, Alignment)));
        Assert.Equal(0, file.UncachedAlignment);

        // Later reads, aligned or not, go through the page cache and return the file's bytes.
        Assert.Equal(Alignment, file.ReadUncached(read, Alignment));
        Assert.True(read.AsSpan().SequenceEqual(contents.AsSpan(Alignment, Alignment)));
    }

    [Fact]
    public void A_file_system_that_cannot_read_around_the_page_cache_reads_through_it()
    {
        IStorageFile file = new ByteArrayFile([1, 2, 3, 4, 5]);
        Assert.Equal(0, file.UncachedAlignment);
        byte[] read = new byte[5];
        Assert.Equal(5, file.ReadUncached(read, 0));
        Assert.Equal([1, 2, 3, 4, 5], read);
    }

    /// <summary>A file in memory that keeps the interface's defaults for uncached reads.</summary>
    private sealed class ByteArrayFile(byte[] bytes) : IStorageFile
    {
        public string Path => "memory";

        public long Length => bytes.Length;

        public int Read(Span<byte> destination, long offset)
        {
            int count = Math.Max(0, Math.Min(destination.Length, bytes.Length - (int)offset));
            bytes.AsSpan((int)offset, count).CopyTo(destination);
            return count;
        }

        public void Write(ReadOnlySpan<byte> source, long offset) => throw new NotSupportedException();

        public void Sync()
        {
        }

        public void SetLength(long length) => throw new NotSupportedException();

        public StorageMapping MapReadOnly(long length) => throw new NotSupportedException();

        public void Dispose()
        {
        }
    }
}
