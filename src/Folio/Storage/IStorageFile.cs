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
