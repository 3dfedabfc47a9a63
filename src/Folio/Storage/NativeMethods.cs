using System.Runtime.InteropServices;

namespace Folio.Storage;

/// <summary>libc calls .NET does not expose: fdatasync, and fsync of a folder.</summary>
internal static partial class NativeMethods
{
    private const int ReadOnly = 0; // O_RDONLY
    private const int Directory = 0x10000; // O_DIRECTORY on Linux x64/arm64

    [LibraryImport("libc", SetLastError = true)]
    internal static partial int fdatasync(int fd);

    [LibraryImport("libc", SetLastError = true)]
    internal static partial int fsync(int fd);

    [LibraryImport("libc", EntryPoint = "open", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Open(string path, int flags);

    [LibraryImport("libc", EntryPoint = "close", SetLastError = true)]
    private static partial int Close(int fd);

    /// <summary>fsync of a folder, so that created, renamed and deleted entries survive a crash (Linux only; a no-op elsewhere).</summary>
    public static void SyncDirectory(string path)
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        int fd = Open(path, ReadOnly | Directory);
        if (fd < 0)
        {
            throw new IOException($"Cannot open folder '{path}' to sync it (errno {Marshal.GetLastPInvokeError()}).");
        }

        try
        {
            if (fsync(fd) != 0)
            {
                throw new IOException($"fsync of folder '{path}' failed (errno {Marshal.GetLastPInvokeError()}).");
            }
        }
        finally
        {
            _ = Close(fd);
        }
    }
}
