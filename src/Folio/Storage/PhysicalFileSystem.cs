namespace Folio.Storage;

/// <summary>The real file system.</summary>
internal sealed class PhysicalFileSystem : IFileSystem
{
    public static PhysicalFileSystem Instance { get; } = new();

    public IStorageFile OpenFile(string path, FileMode mode) => new PhysicalStorageFile(path, mode);

    public IStorageFile OpenFileForReading(string path) => new PhysicalStorageFile(path, FileMode.Open, readOnly: true);

    public void DeleteFile(string path) => File.Delete(path);

    public bool FileExists(string path) => File.Exists(path);

    public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
        => File.Move(sourcePath, destinationPath, overwrite);

    public string[] GetFiles(string directory, string searchPattern)
        => System.IO.Directory.GetFiles(directory, searchPattern);

    public void CreateDirectory(string path) => System.IO.Directory.CreateDirectory(path);

    public void SyncDirectory(string path) => NativeMethods.SyncDirectory(path);

    public IDisposable AcquireExclusiveLock(string lockFilePath) =>
        // FileShare.None takes flock(LOCK_EX | LOCK_NB) on Unix and a share-mode lock on Windows; both conflict with
        // a second open in this process as well as in another one.
        new FileStream(lockFilePath, FileMode.OpenOrCreate, FileAccess.ReadWrite, FileShare.None, bufferSize: 1,
            FileOptions.None);
}
