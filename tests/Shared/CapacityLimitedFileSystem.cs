namespace Folio.Storage;

/// <summary>
/// A small disk for the tests that fill one, without a file system of that size: the real file system, where a
/// write that would make the files under <see cref="Root"/> (the store's and any other, such as a filler the test
/// deletes to free space) take more than <see cref="Capacity"/> bytes fails with ENOSPC as .NET reports it on Linux
/// (an <see cref="IOException"/> whose HResult is errno 28), and writes nothing. A write within a file's written
/// blocks needs no space, as an overwrite on ext4 or xfs. A file lengthened with <see cref="IStorageFile.SetLength"/>
/// is sparse: its hole takes no space until written (a write into it needs space as one past the end does), and it
/// counts what was written below the hole. Space freed by deleting or truncating a file is free again at once. The
/// sizes are summed from the folder at every write that needs space, under one lock, so the threads of one process
/// see one disk; compiled into the tests and the crash host, not into the product.
/// </summary>
internal sealed class CapacityLimitedFileSystem(string root, long capacity) : IFileSystem
{
    private readonly PhysicalFileSystem _inner = PhysicalFileSystem.Instance;
    private readonly Lock _extending = new();
    private readonly SparseFiles _sparse = new();
    private int _refused;

    /// <summary>The folder whose files count against <see cref="Capacity"/>, its subfolders included.</summary>
    public string Root { get; } = Path.GetFullPath(root);

    /// <summary>Bytes the files under <see cref="Root"/> may take.</summary>
    public long Capacity { get; } = capacity;

    /// <summary>Writes refused for want of space.</summary>
    public int Refused => Volatile.Read(ref _refused);

    public IStorageFile OpenFile(string path, FileMode mode) => new LimitedFile(this, _inner.OpenFile(path, mode));

    public IStorageFile OpenFileForReading(string path) => _inner.OpenFileForReading(path);

    public void DeleteFile(string path)
    {
        lock (_extending)
        {
            _inner.DeleteFile(path);
            _sparse.Deleted(path);
        }
    }

    public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
    {
        lock (_extending)
        {
            _inner.MoveFile(sourcePath, destinationPath, overwrite);
            _sparse.Moved(sourcePath, destinationPath);
        }
    }

    public bool FileExists(string path) => _inner.FileExists(path);

    public string[] GetFiles(string directory, string searchPattern) => _inner.GetFiles(directory, searchPattern);

    public void CreateDirectory(string path) => _inner.CreateDirectory(path);

    public void SyncDirectory(string path) => _inner.SyncDirectory(path);

    public IDisposable AcquireExclusiveLock(string lockFilePath) => _inner.AcquireExclusiveLock(lockFilePath);

    /// <summary>Bytes the files under <see cref="Root"/> take now.</summary>
    public long Used()
    {
        long used = 0;
        foreach (FileInfo file in new DirectoryInfo(Root).EnumerateFiles("*", SearchOption.AllDirectories))
        {
            try
            {
                used += _sparse.Allocated(file.FullName, file.Length);
            }
            catch (FileNotFoundException)
            {
                // deleted while the folder was listed
            }
        }

        return used;
    }

    private sealed class LimitedFile(CapacityLimitedFileSystem owner, IStorageFile inner) : IStorageFile
    {
        public string Path => inner.Path;

        public long Length => inner.Length;

        public int Read(Span<byte> destination, long offset) => inner.Read(destination, offset);

        public void Write(ReadOnlySpan<byte> source, long offset)
        {
            long end = offset + source.Length;
            lock (owner._extending)
            {
                long allocated = owner._sparse.Allocated(Path, inner.Length);
                if (end > allocated)
                {
                    long growth = end - allocated;
                    if (owner.Used() + growth > owner.Capacity)
                    {
                        Interlocked.Increment(ref owner._refused);
                        throw new IOException(
                            $"No space left on device : '{Path}' (a disk of {owner.Capacity} bytes)", 28);
                    }
                }

                inner.Write(source, offset);
                owner._sparse.Wrote(Path, end);
            }
        }

        public void SetLength(long length)
        {
            lock (owner._extending)
            {
                long before = inner.Length;
                inner.SetLength(length);
                owner._sparse.LengthSet(Path, before, length);
            }
        }

        public void Sync() => inner.Sync();

        public void AdviseWillNeed(long offset, long length) => inner.AdviseWillNeed(offset, length);

        public void Truncate(long length)
        {
            lock (owner._extending)
            {
                inner.Truncate(length);
                owner._sparse.Truncated(Path, length);
            }
        }

        public StorageMapping MapReadOnly(long length) => inner.MapReadOnly(length);

        public void Dispose() => inner.Dispose();
    }
}
