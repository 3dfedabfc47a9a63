using Microsoft.Win32.SafeHandles;

namespace Folio.Storage;

/// <summary>
/// Whether a lock file a process holds is still the file at its path. A store's folder deleted (or moved) while the
/// store is open leaves the process holding a lock on a file no longer there; another process may then create a new
/// store at the same path and take a new lock file's lock. The first process must then stop writing by path (new
/// segments, marks, watermarks, purges), or it would rename over and delete the new store's files. On Linux the
/// answer comes from the descriptor's link in <c>/proc/self/fd</c> (the kernel names the file's current path, with
/// " (deleted)" once it is unlinked); elsewhere it is assumed true (Windows refuses to delete a file held open without
/// delete sharing, which the lock does not grant).
/// </summary>
internal static class FolderLock
{
    /// <summary>True unless <paramref name="heldLock"/> (a lock from <see cref="IFileSystem.AcquireExclusiveLock"/>)
    /// is known to be no longer the file at <paramref name="lockFilePath"/>.</summary>
    public static bool IsStillAt(IDisposable heldLock, string lockFilePath)
    {
        if (!OperatingSystem.IsLinux() || heldLock is not FileStream { SafeFileHandle: SafeFileHandle handle }
            || handle.IsClosed)
        {
            return true;
        }

        string? target;
        try
        {
            target = new FileInfo($"/proc/self/fd/{handle.DangerousGetHandle()}").LinkTarget;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return true; // no /proc to ask: nothing known
        }

        return target is null || string.Equals(target, Path.GetFullPath(lockFilePath), StringComparison.Ordinal);
    }
}
