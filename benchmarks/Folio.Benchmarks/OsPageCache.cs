using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace Folio.Benchmarks;

/// <summary>
/// The benchmarks' control of the operating system's page cache (Linux <c>posix_fadvise</c>; no-ops elsewhere): drop a
/// store's files so a case starts cold, and advise reads ahead for the disk probe. Dropped pages must be clean (the
/// files closed, or their writes fsynced): the kernel keeps dirty ones.
/// </summary>
internal static class OsPageCache
{
    private const int WillNeedAdvice = 3; // POSIX_FADV_WILLNEED
    private const int DontNeedAdvice = 4; // POSIX_FADV_DONTNEED

    /// <summary>Drops the files of <paramref name="folder"/> (with <paramref name="search"/>, those of its subfolders
    /// too) from the page cache.</summary>
    public static void Drop(string folder, SearchOption search) =>
        Drop(Directory.EnumerateFiles(folder, "*", search));

    /// <summary>Drops <paramref name="files"/> from the page cache.</summary>
    public static void Drop(IEnumerable<string> files)
    {
        foreach (string file in files)
        {
            using var stream = new FileStream(file, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete);
            Drop(stream.SafeFileHandle);
        }
    }

    /// <summary>Copies every file of <paramref name="source"/> and its subfolders to the same place under
    /// <paramref name="destination"/> (created; files there are replaced), 4 MiB at a time, dropping what it read and
    /// wrote from the page cache as it goes (the copy is synced file by file, so its pages can be dropped); returns the
    /// bytes copied.</summary>
    public static long CopyThrough(string source, string destination)
    {
        long total = 0;
        byte[] buffer = new byte[4 * 1024 * 1024];
        foreach (string file in Directory.EnumerateFiles(source, "*", SearchOption.AllDirectories))
        {
            string target = Path.Combine(destination, Path.GetRelativePath(source, file));
            Directory.CreateDirectory(Path.GetDirectoryName(target)!);
            using var input = new FileStream(file, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete, 1, FileOptions.SequentialScan);
            using var output = new FileStream(target, FileMode.Create, FileAccess.ReadWrite, FileShare.None, 1);
            long offset = 0;
            int read;
            while ((read = RandomAccess.Read(input.SafeFileHandle, buffer, offset)) > 0)
            {
                RandomAccess.Write(output.SafeFileHandle, buffer.AsSpan(0, read), offset);
                Advise(input.SafeFileHandle, offset, read, DontNeedAdvice);
                offset += read;
                if (offset % (64L * 1024 * 1024) == 0)
                {
                    output.Flush(flushToDisk: true); // written back, so the advice can drop it
                    Advise(output.SafeFileHandle, 0, offset, DontNeedAdvice);
                }
            }

            output.Flush(flushToDisk: true);
            Advise(output.SafeFileHandle, 0, 0, DontNeedAdvice);
            total += offset;
        }

        return total;
    }

    /// <summary>Reads every file of <paramref name="folder"/> and its subfolders through once, 4 MiB at a time, and
    /// drops what it read from the page cache as it goes; returns the bytes read. A virtual disk's host caches the
    /// blocks a machine reads or writes (a block read again takes a third of the time), so stores that were built,
    /// copied or read at different times read at different speeds; a read through each before a comparison leaves
    /// every store's blocks in the same state there, while this machine's page cache stays cold.</summary>
    public static long ReadThrough(string folder)
    {
        long total = 0;
        byte[] buffer = new byte[4 * 1024 * 1024];
        foreach (string file in Directory.EnumerateFiles(folder, "*", SearchOption.AllDirectories))
        {
            using var stream = new FileStream(file, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete, 1, FileOptions.SequentialScan);
            long offset = 0;
            int read;
            while ((read = RandomAccess.Read(stream.SafeFileHandle, buffer, offset)) > 0)
            {
                Advise(stream.SafeFileHandle, offset, read, DontNeedAdvice);
                offset += read;
            }

            total += offset;
        }

        return total;
    }

    /// <summary>Drops the file behind <paramref name="handle"/> from the page cache.</summary>
    public static void Drop(SafeFileHandle handle) => Advise(handle, 0, 0, DontNeedAdvice);

    /// <summary>Asks the kernel to start reading <paramref name="length"/> bytes at
    /// <paramref name="offset"/>.</summary>
    public static void WillNeed(SafeFileHandle handle, long offset, long length) =>
        Advise(handle, offset, length, WillNeedAdvice);

    private static void Advise(SafeFileHandle handle, long offset, long length, int advice)
    {
        if (OperatingSystem.IsLinux())
        {
            _ = PosixFAdvise((int)handle.DangerousGetHandle(), offset, length, advice);
        }
    }

    [DllImport("libc", EntryPoint = "posix_fadvise")]
    private static extern int PosixFAdvise(int fd, long offset, long length, int advice);
}
