using System.Buffers.Binary;
using System.Runtime.CompilerServices;
using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// The data file's bytes: reads pages for any thread (<see cref="PageCache"/> reads through it), and writes chunks and
/// header slots for the checkpoint's thread.
/// <para>
/// Protocol. The chunk map (chunk id to <see cref="ChunkInfo"/>) is an immutable dictionary replaced by the
/// checkpoint's thread (a release store) and read by page readers (an acquire load); a chunk leaves the map only
/// when no published root and no pinned checkpoint reaches it (<see cref="PageStore"/>), so a reader that reached a
/// position through a pinned root always finds its chunk. Reads are positional (pread) and need no lock; every
/// page read from disk is checked against its CRC-32C, which covers its position.
/// </para>
/// </summary>
internal sealed class DataFile : IDisposable
{
    private readonly IStorageFile _file;
    private Dictionary<uint, ChunkInfo> _chunks = [];

    public DataFile(IStorageFile file) => _file = file;

    public string Path => _file.Path;

    public long Length => _file.Length;

    /// <summary>The chunks readers can reach (acquire).</summary>
    public IReadOnlyDictionary<uint, ChunkInfo> Chunks => Volatile.Read(ref _chunks);

    /// <summary>Publishes a new chunk map (the checkpoint's thread).</summary>
    public void PublishChunks(Dictionary<uint, ChunkInfo> chunks) => Volatile.Write(ref _chunks, chunks);

    /// <summary>Reads the value of <paramref name="length"/> bytes held by the overflow page at
    /// <paramref name="position"/>.</summary>
    public ReadOnlyMemory<byte> ReadOverflow(PagePosition position, int length)
    {
        int pageLength = Locate(position, out long offset);
        byte[] page = GC.AllocateUninitializedArray<byte>(pageLength);
        ReadPage(position, page, offset);
        if (page[8] != PageFormat.OverflowType || page.Length != PageFormat.OverflowPageSize(length))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset,
                $"{position} should be an overflow page of {length} bytes (type {page[8]}, {page.Length} bytes)");
        }

        return page.AsMemory(PageFormat.PageHeaderSize);
    }

    /// <summary>The length of the page at <paramref name="position"/> and its offset in the file, from its chunk's
    /// table of contents (read and checked on the chunk's first page).</summary>
    public int Locate(PagePosition position, out long offset)
    {
        if (!Chunks.TryGetValue(position.ChunkId, out ChunkInfo? chunk))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, 0, $"{position} is in no chunk of the data file");
        }

        long[] toc = chunk.Toc ?? LoadToc(chunk);
        if (position.PageNumber >= (uint)toc.Length)
        {
            ThrowHelper.ThrowStoreCorrupted(Path, chunk.FileOffset,
                $"{position}: chunk {chunk.Id} holds {toc.Length} pages");
        }

        long entry = toc[position.PageNumber];
        offset = chunk.FileOffset + (entry >>> 32);
        int length = (int)(entry & 0xFFFF_FFFF);
        if (length < PageFormat.PageHeaderSize)
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset, $"{position} is listed with {length} bytes");
        }

        return length;
    }

    /// <summary>Reads the page at <paramref name="position"/> (at <paramref name="offset"/>, as long as
    /// <paramref name="destination"/>, both from <see cref="Locate"/>) and checks its length and checksum.</summary>
    public void ReadPage(PagePosition position, Span<byte> destination, long offset)
    {
        if (!TryReadExactly(destination, offset))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset,
                $"{position} ({destination.Length} bytes) runs past the end of the file");
        }

        CheckPage(position, destination, offset);
    }

    /// <summary>Checks the structure of a tree page whose length and checksum passed (<see cref="PageFormat.Check"/>),
    /// read from <paramref name="offset"/>; throws <see cref="StoreCorruptedException"/> naming the file and
    /// offset.</summary>
    public void CheckStructure(PagePosition position, ReadOnlySpan<byte> page, long offset)
    {
        if (!PageFormat.Check(page, out string? problem))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset, $"{position}: {problem}");
        }
    }

    /// <summary>Checks the length and checksum (with its position) of a page read from
    /// <paramref name="offset"/>; throws <see cref="StoreCorruptedException"/> naming the file and offset.</summary>
    public void CheckPage(PagePosition position, ReadOnlySpan<byte> page, long offset)
    {
        if (BinaryPrimitives.ReadInt32LittleEndian(page) != page.Length
            || BinaryPrimitives.ReadUInt32LittleEndian(page[4..]) != PageFormat.Checksum(page, position))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset, $"{position} ({page.Length} bytes) fails its checksum");
        }
    }

    /// <summary>Reads exactly <paramref name="destination"/>.Length bytes at <paramref name="offset"/>; false when
    /// the file ends first.</summary>
    public bool TryReadExactly(Span<byte> destination, long offset)
    {
        while (destination.Length > 0)
        {
            int read = _file.Read(destination, offset);
            if (read <= 0)
            {
                return false;
            }

            destination = destination[read..];
            offset += read;
        }

        return true;
    }

    /// <summary>What <see cref="TryReadUncached"/> needs its offset, length and buffer aligned to; 0 when the file
    /// reads only through the operating system's page cache (<see cref="IStorageFile.UncachedAlignment"/>).</summary>
    public int UncachedAlignment => _file.UncachedAlignment;

    /// <summary>Reads into <paramref name="destination"/> at <paramref name="offset"/> around the operating system's
    /// page cache (all three aligned to <see cref="UncachedAlignment"/>), until at least <paramref name="needed"/>
    /// bytes are in; false when the file ends first. A file whose uncached reads were refused meanwhile (its
    /// alignment now 0) reads through the cache.</summary>
    public bool TryReadUncached(Span<byte> destination, long offset, int needed)
    {
        int total = 0;
        while (total < needed)
        {
            int read = _file.ReadUncached(destination[total..], offset + total);
            if (read <= 0)
            {
                return false; // the end of the file
            }

            total += read;
            int alignment = UncachedAlignment;
            if (total < needed && alignment > 0 && total % alignment != 0)
            {
                return false; // a short uncached read ends at the end of the file
            }
        }

        return true;
    }

    public void Write(ReadOnlySpan<byte> bytes, long offset) => _file.Write(bytes, offset);

    public void Sync() => _file.Sync();

    /// <summary>Starts (and with <paramref name="wait"/> waits for) the write-back of written bytes
    /// (<see cref="IStorageFile.WriteBack"/>).</summary>
    public void WriteBack(long offset, long length, bool wait) => _file.WriteBack(offset, length, wait);

    /// <summary>Cuts the file to <paramref name="length"/> bytes (its free tail; see the page store).</summary>
    public void Truncate(long length) => _file.Truncate(length);

    /// <summary>Asks the operating system to start reading the bytes at <paramref name="offset"/> ahead of a read
    /// (advice, returns at once).</summary>
    public void AdviseWillNeed(long offset, long length) => _file.AdviseWillNeed(offset, length);

    /// <summary>
    /// Reads a chunk's header and metadata (table of contents and chunk table) and checks them; throws
    /// <see cref="StoreCorruptedException"/> when they fail, or when the chunk is not the one expected.
    /// </summary>
    public (ChunkFormat.Header Header, byte[] Metadata) ReadChunkMetadata(uint expectedId, long offset,
        long expectedLength)
    {
        Span<byte> headerBytes = stackalloc byte[ChunkFormat.HeaderSize];
        if (offset < DataFileHeader.DataStart || offset + ChunkFormat.HeaderSize > Length
            || !TryReadExactly(headerBytes, offset))
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset,
                $"chunk {expectedId} should start here, but the file is {Length} bytes long");
        }

        ChunkFormat.Header? decoded = ChunkFormat.Header.TryRead(headerBytes);
        if (decoded is not { } header || header.ChunkId != expectedId
            || (expectedLength >= 0 && header.Length != expectedLength) || header.PageCount < 0
            || header.TableEntries < 0 || header.TocOffset < ChunkFormat.HeaderSize
            || header.TocOffset + header.MetadataLength != header.Length)
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset, $"no valid header of chunk {expectedId} here");
            return default;
        }

        if (offset + header.Length > Length)
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset,
                $"chunk {expectedId} of {header.Length} bytes runs past the end of the file ({Length} bytes)");
        }

        byte[] metadata = GC.AllocateUninitializedArray<byte>(checked((int)header.MetadataLength));
        if (!TryReadExactly(metadata, offset + header.TocOffset)
            || ChunkFormat.Checksum(headerBytes, metadata) != header.Checksum)
        {
            ThrowHelper.ThrowStoreCorrupted(Path, offset, $"chunk {expectedId} fails its metadata checksum");
        }

        return (header, metadata);
    }

    public void Dispose() => _file.Dispose();

    /// <summary>Reads the chunk's metadata and every page it lists from disk, in reads of about 1 MiB, and checks each
    /// (metadata checksum, table of contents inside the pages, page length and checksum with its position, tree page
    /// structure); returns the pages checked or throws <see cref="StoreCorruptedException"/>.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // a scrub checks every chunk once per process
    public int VerifyChunk(ChunkInfo chunk)
    {
        const int ReadSize = 1 << 20;
        (ChunkFormat.Header header, byte[] metadata) = ReadChunkMetadata(chunk.Id, chunk.FileOffset, chunk.Length);
        long[] toc = CheckedToc(chunk, header, metadata);
        byte[] buffer = System.Buffers.ArrayPool<byte>.Shared.Rent(ReadSize);
        long windowStart = 0; // chunk-relative range the buffer holds
        long windowEnd = 0;
        try
        {
            for (int i = 0; i < toc.Length; i++)
            {
                int length = (int)(toc[i] & 0xFFFF_FFFF);
                long at = toc[i] >>> 32;
                long offset = chunk.FileOffset + at;
                if (length < PageFormat.PageHeaderSize)
                {
                    ThrowHelper.ThrowStoreCorrupted(Path, offset, $"page {i} of chunk {chunk.Id} is listed with "
                        + $"{length} bytes");
                }

                if (at < windowStart || at + length > windowEnd)
                {
                    if (buffer.Length < length)
                    {
                        System.Buffers.ArrayPool<byte>.Shared.Return(buffer);
                        buffer = System.Buffers.ArrayPool<byte>.Shared.Rent(length);
                    }

                    int size = (int)Math.Max(length, Math.Min(buffer.Length, header.TocOffset - at));
                    if (!TryReadExactly(buffer.AsSpan(0, size), offset))
                    {
                        ThrowHelper.ThrowStoreCorrupted(Path, offset,
                            $"chunk {chunk.Id} runs past the end of the file");
                    }

                    windowStart = at;
                    windowEnd = at + size;
                }

                var position = new PagePosition(chunk.Id, (uint)i);
                ReadOnlySpan<byte> page = buffer.AsSpan((int)(at - windowStart), length);
                CheckPage(position, page, offset);
                if (page[8] != PageFormat.OverflowType)
                {
                    CheckStructure(position, page, offset);
                }
            }

            return toc.Length;
        }
        finally
        {
            System.Buffers.ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private long[] LoadToc(ChunkInfo chunk)
    {
        (ChunkFormat.Header header, byte[] metadata) = ReadChunkMetadata(chunk.Id, chunk.FileOffset, chunk.Length);
        return chunk.PublishToc(CheckedToc(chunk, header, metadata));
    }

    /// <summary>Decodes a chunk's table of contents and checks that every entry lies inside its pages.</summary>
    private long[] CheckedToc(ChunkInfo chunk, ChunkFormat.Header header, byte[] metadata)
    {
        long[] toc = ChunkInfo.DecodeToc(metadata, header.PageCount);
        long pagesEnd = header.TocOffset;
        foreach (long entry in toc)
        {
            if ((entry >>> 32) < ChunkFormat.HeaderSize || (entry >>> 32) + (entry & 0xFFFF_FFFF) > pagesEnd)
            {
                ThrowHelper.ThrowStoreCorrupted(Path, chunk.FileOffset,
                    $"chunk {chunk.Id}'s table of contents points outside its pages");
            }
        }

        return toc;
    }
}
