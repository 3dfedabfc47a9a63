namespace Folio.Storage;

/// <summary>
/// The file operations the storage engine uses. Production code uses <see cref="PhysicalFileSystem"/>; tests put a
/// fault-injecting decorator in front of it to make writes, syncs and allocations fail on demand.
/// </summary>
internal interface IFileSystem
{
    /// <summary>Opens (or creates, per <paramref name="mode"/>) a file for random-access reads and writes.</summary>
    IStorageFile OpenFile(string path, FileMode mode);

    /// <summary>Opens an existing file for reads only, sharing it with a process that writes it (a store's files read
    /// without opening the store).</summary>
    IStorageFile OpenFileForReading(string path) => OpenFile(path, FileMode.Open);

    /// <summary>Deletes a file; a missing file is not an error.</summary>
    void DeleteFile(string path);

    /// <summary>Renames a file; replaces the destination only when <paramref name="overwrite"/> is set.</summary>
    void MoveFile(string sourcePath, string destinationPath, bool overwrite);

    /// <summary>Whether a file exists.</summary>
    bool FileExists(string path);

    /// <summary>Whether a folder exists.</summary>
    bool DirectoryExists(string path) => System.IO.Directory.Exists(path);

    /// <summary>Lists the files of a folder that match a pattern, in no particular order.</summary>
    string[] GetFiles(string directory, string searchPattern);

    /// <summary>Creates a folder and its parents when missing.</summary>
    void CreateDirectory(string path);

    /// <summary>Makes the folder's entries (created, renamed, deleted files) durable (fsync of the folder on
    /// Unix).</summary>
    void SyncDirectory(string path);

    /// <summary>
    /// Takes an exclusive lock on <paramref name="lockFilePath"/>, held until the result is disposed. Throws
    /// <see cref="IOException"/> when the lock is held by another handle, in this or another process (one that
    /// <see cref="LockConflictError.Matches"/> recognizes), and the file system's own error when the lock file cannot
    /// be opened at all (a read-only file system, a missing folder).
    /// </summary>
    IDisposable AcquireExclusiveLock(string lockFilePath);
}
