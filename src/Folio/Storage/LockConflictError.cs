namespace Folio.Storage;

/// <summary>Recognizes the error of a lock another handle holds (<see cref="IFileSystem.AcquireExclusiveLock"/>):
/// EWOULDBLOCK from <c>flock</c> (Unix, where an <see cref="IOException"/>'s HResult is the errno: 11 on Linux, 35 on
/// macOS and the BSDs), ERROR_SHARING_VIOLATION and ERROR_LOCK_VIOLATION (Windows, as HRESULTs of the Win32
/// facility). Any other failure to take a lock (a read-only file system, a missing folder, a full disk) is not a
/// conflict, and must not be reported as one.</summary>
internal static class LockConflictError
{
    private const int WouldBlockLinux = 11; // EAGAIN, EWOULDBLOCK
    private const int WouldBlockBsd = 35; // EAGAIN, EWOULDBLOCK on macOS and the BSDs
    private const int Win32Facility = unchecked((int)0x80070000);
    private const int SharingViolation = 0x20; // ERROR_SHARING_VIOLATION
    private const int LockViolation = 0x21; // ERROR_LOCK_VIOLATION

    /// <summary>Whether <paramref name="e"/> says the lock is held by another handle, in this or another
    /// process.</summary>
    public static bool Matches(Exception e)
    {
        if (e is not IOException io)
        {
            return false;
        }

        int code = io.HResult;
        if (OperatingSystem.IsWindows())
        {
            return (code & unchecked((int)0xFFFF0000)) == Win32Facility
                && (code & 0xFFFF) is SharingViolation or LockViolation;
        }

        return OperatingSystem.IsLinux() ? code == WouldBlockLinux : code == WouldBlockBsd;
    }
}
