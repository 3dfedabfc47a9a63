namespace Folio.Storage;

/// <summary>
/// One open file: positional reads and writes (no shared file pointer, so concurrent readers need no lock), a
/// durable sync, and a read-only memory mapping for lock-free readers.
/// </summary>
internal interface IStorageFile : IDisposable
{
    /// <summary>The full path of the file.</summary>
    string Path { get; }

    /// <summary>The current length in bytes.</summary>
    long Length { get; }

    /// <summary>Reads up to <paramref name="destination"/>.Length bytes at <paramref name="offset"/>; returns the count
    /// read.</summary>
    int Read(Span<byte> destination, long offset);

    /// <summary>The alignment, in bytes, that <see cref="ReadUncached"/> needs of its offset, its length and its
    /// buffer's address; 0 when this file cannot read around the operating system's page cache (the default), and
    /// callers use <see cref="Read"/>.</summary>
    int UncachedAlignment => 0;

    /// <summary>Reads up to <paramref name="destination"/>.Length bytes at <paramref name="offset"/> straight from the
    /// disk, not through the operating system's page cache (Linux <c>O_DIRECT</c>): for a caller that caches what it
    /// reads itself, so the page cache holds no second copy and the kernel spends nothing on it. The offset, the length
    /// and the buffer's address are multiples of <see cref="UncachedAlignment"/>; returns the count read (less at the
    /// end of the file). Coherent with <see cref="Write"/>: dirty cached bytes of the range are written first.
    /// </summary>
    int ReadUncached(Span<byte> destination, long offset) => Read(destination, offset);

    /// <summary>Writes all of <paramref name="source"/> at <paramref name="offset"/> (a short write is an
    /// error).</summary>
    void Write(ReadOnlySpan<byte> source, long offset);

    /// <summary>Makes every completed write durable (fdatasync on Linux, FlushFileBuffers on Windows).</summary>
    void Sync();

    /// <summary>Asks the operating system to start reading <paramref name="length"/> bytes at
    /// <paramref name="offset"/> ahead of a read, without waiting (advice: a file system may ignore it, and the default
    /// does).</summary>
    void AdviseWillNeed(long offset, long length)
    {
    }

    /// <summary>Starts writing <paramref name="length"/> bytes at <paramref name="offset"/> that were written to the
    /// file to the disk without making them durable, and with <paramref name="wait"/> waits until they are written.
    /// A writer of many megabytes calls it as it goes, so the disk takes them in steps rather than all at the fsync
    /// that makes them durable, where a journal's fsync on the same disk would queue behind them. Advice: a file
    /// system may ignore it (the default does), and only <see cref="Sync"/> makes anything durable.</summary>
    /// <exception cref="IOException">The write-back failed: the writes it covers must be treated as failed (the next
    /// <see cref="Sync"/> may not report the error again).</exception>
    void WriteBack(long offset, long length, bool wait)
    {
    }

    /// <summary>Cuts the file to <paramref name="length"/> bytes (a size change, durable with the next
    /// <see cref="Sync"/> or at the file system's leisure). A file system that cannot may ignore it (the default
    /// does): callers use it only to give unused space back.</summary>
    void Truncate(long length)
    {
    }

    /// <summary>Sets the file's length: a longer file ends in a hole that reads as zeros (where the file system keeps
    /// sparse files, no blocks are allocated until written), a shorter one is cut. Durable with the next
    /// <see cref="Sync"/>.</summary>
    void SetLength(long length);

    /// <summary>Maps the first <paramref name="length"/> bytes of the file read-only.</summary>
    StorageMapping MapReadOnly(long length);
}
