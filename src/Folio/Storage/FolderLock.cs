using Microsoft.Win32.SafeHandles;

namespace Folio.Storage;

/// <summary>
/// Whether a lock file a process holds is still where it was when it was taken. A store's folder deleted (or moved)
/// while the store is open leaves the process holding a lock on a file no longer there; another process may then
/// create a new store at the same path and take a new lock file's lock. The first process must then stop writing by
/// path (new segments, marks, watermarks, purges), or it would rename over and delete the new store's files. On Linux
/// the kernel names a descriptor's file in <c>/proc/self/fd</c>: its path as it is now (symbolic links resolved),
/// with " (deleted)" once it is unlinked; the name read when the lock was taken is compared with the name now.
/// Elsewhere nothing is known (Windows refuses to delete a file held open without delete sharing, which the lock
/// does not grant).
/// </summary>
internal static class FolderLock
{
    /// <summary>The kernel's name for the file of <paramref name="heldLock"/> (a lock from
    /// <see cref="IFileSystem.AcquireExclusiveLock"/>), or null when there is none to ask.</summary>
    public static string? NameOf(IDisposable heldLock)
    {
        if (!OperatingSystem.IsLinux() || heldLock is not FileStream { SafeFileHandle: SafeFileHandle handle }
            || handle.IsClosed)
        {
            return null;
        }

        try
        {
            return new FileInfo($"/proc/self/fd/{handle.DangerousGetHandle()}").LinkTarget;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null; // no /proc to ask
        }
    }

    /// <summary>False when <paramref name="heldLock"/>'s file is known to be no longer the one named
    /// <paramref name="nameWhenTaken"/> (<see cref="NameOf"/> when the lock was taken; null: nothing known).</summary>
    public static bool IsStillAt(IDisposable heldLock, string? nameWhenTaken)
    {
        if (nameWhenTaken is null)
        {
            return true;
        }

        string? now = NameOf(heldLock);
        return now is null || string.Equals(now, nameWhenTaken, StringComparison.Ordinal);
    }
}
