namespace Folio.Storage;

/// <summary>Recognizes the file system's "no space" errors: ENOSPC and EDQUOT (Unix, where an
/// <see cref="IOException"/>'s HResult is the errno), ERROR_DISK_FULL and ERROR_HANDLE_DISK_FULL (Windows, as
/// HRESULTs of the Win32 facility).</summary>
internal static class DiskFullError
{
    private const int NoSpace = 28; // ENOSPC
    private const int QuotaExceeded = 122; // EDQUOT on Linux
    private const int Win32Facility = unchecked((int)0x80070000);
    private const int DiskFull = 0x70; // ERROR_DISK_FULL
    private const int HandleDiskFull = 0x27; // ERROR_HANDLE_DISK_FULL

    /// <summary>Whether <paramref name="e"/> says the disk (or the user's quota) has no room left.</summary>
    public static bool Matches(Exception e)
    {
        if (e is not IOException io)
        {
            return false;
        }

        int code = io.HResult;
        bool win32 = (code & unchecked((int)0xFFFF0000)) == Win32Facility;
        return win32 ? (code & 0xFFFF) is DiskFull or HandleDiskFull
            : code is NoSpace or QuotaExceeded
                || io.Message.Contains("No space left", StringComparison.OrdinalIgnoreCase);
    }
}
