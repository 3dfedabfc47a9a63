namespace Folio;

/// <summary>How a store reads the pages of its data file that its cache (<see cref="DocumentStoreOptions.CacheSize"/>)
/// does not hold: through the operating system's page cache, or around it.</summary>
public enum DataFileReadMode
{
    /// <summary>
    /// Direct when the data file is larger than the memory the process may use beyond its cache (the garbage
    /// collector's <see cref="GCMemoryInfo.TotalAvailableMemoryBytes"/>, which in a container is its share of the
    /// container's limit, less <see cref="DocumentStoreOptions.CacheSize"/>), else buffered; decided when the store
    /// opens and again after each checkpoint, as the file grows or shrinks. The default. A file that large cannot stay
    /// in the page cache, so its reads mostly miss it anyway, and each copy the kernel caches costs it work to insert
    /// and, once memory is full, work to reclaim another: reads that go around it cost less and leave the memory to
    /// the rest of the process.
    /// </summary>
    Automatic = 0,

    /// <summary>Through the operating system's page cache (buffered reads): a page read again after the store's cache
    /// evicted it comes from memory while the page cache still holds it. Best when the machine's free memory holds
    /// the data file.</summary>
    Buffered = 1,

    /// <summary>Around the operating system's page cache (Linux <c>O_DIRECT</c>, in reads aligned to 4 KiB): every read
    /// the store's cache misses goes to the disk, and the page cache holds none of the data file's pages for it. Where
    /// the file system or the operating system cannot (Windows, macOS, tmpfs), reads are buffered. Writes and the
    /// store's other reads (backups, scrubs) are buffered in every mode.</summary>
    Direct = 2,
}
