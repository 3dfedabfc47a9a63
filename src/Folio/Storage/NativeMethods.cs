using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace Folio.Storage;

/// <summary>libc calls .NET does not expose: fdatasync, early write-back of a range, fsync of a folder, populating
/// fresh memory in one call, read ahead advice, and a thread's scheduling priority.</summary>
internal static partial class NativeMethods
{
    private const int ReadOnly = 0; // O_RDONLY
    private const int CloseOnExec = 0x80000; // O_CLOEXEC on Linux x64 and arm64

    // O_DIRECTORY and O_DIRECT swap their values between Linux's generic flags (x64) and arm64's.
    private static readonly int s_directory =
        RuntimeInformation.ProcessArchitecture is Architecture.Arm64 or Architecture.Arm ? 0x4000 : 0x10000;

    private static readonly int s_direct = RuntimeInformation.ProcessArchitecture switch
    {
        Architecture.X64 or Architecture.X86 => 0x4000,
        Architecture.Arm64 or Architecture.Arm => 0x10000,
        _ => 0, // unknown here: no uncached reads
    };

    [LibraryImport("libc", SetLastError = true)]
    internal static partial int fdatasync(int fd);

    [LibraryImport("libc", SetLastError = true)]
    internal static partial int fsync(int fd);

    /// <summary>fdatasync of an open file (Linux only): its data and the metadata needed to read it back, not its
    /// timestamps. Works on a handle opened for reading too.</summary>
    /// <exception cref="IOException">The call failed; the message names <paramref name="path"/> and the
    /// errno.</exception>
    internal static void DataSync(SafeFileHandle handle, string path)
    {
        bool added = false;
        handle.DangerousAddRef(ref added);
        try
        {
            if (fdatasync((int)handle.DangerousGetHandle()) != 0)
            {
                int errno = Marshal.GetLastPInvokeError();
                throw new IOException($"fdatasync of '{path}' failed (errno {errno}).", errno);
            }
        }
        finally
        {
            if (added)
            {
                handle.DangerousRelease();
            }
        }
    }

    private const uint WaitBefore = 1; // SYNC_FILE_RANGE_WAIT_BEFORE
    private const uint StartWrite = 2; // SYNC_FILE_RANGE_WRITE
    private const uint WaitAfter = 4; // SYNC_FILE_RANGE_WAIT_AFTER
    private const int NotSupported = 38; // ENOSYS
    private const int NoSeek = 29; // ESPIPE

    [LibraryImport("libc", EntryPoint = "sync_file_range", SetLastError = true)]
    private static partial int SyncFileRange(int fd, long offset, long length, uint flags);

    /// <summary>
    /// Starts writing the dirty pages of <paramref name="length"/> bytes at <paramref name="offset"/> to the disk
    /// (Linux <c>sync_file_range</c>), and with <paramref name="wait"/> waits until every page of the range written
    /// before the call is on its way and back; a no-op elsewhere. Nothing is durable by this (no metadata, no cache
    /// flush): it spreads a large write's flush over the time it is written, so the fsync after it has little left
    /// to do. A kernel or file system without the call is not an error.
    /// </summary>
    /// <exception cref="IOException">The write-back failed (errno). The failure must fail the writes it covers: a
    /// wait reports a write-back error to this call, and the next fsync of the file no longer does.</exception>
    internal static void WriteBack(SafeFileHandle handle, string path, long offset, long length, bool wait)
    {
        if (!OperatingSystem.IsLinux() || length <= 0)
        {
            return;
        }

        bool added = false;
        handle.DangerousAddRef(ref added);
        try
        {
            uint flags = wait ? WaitBefore | StartWrite | WaitAfter : StartWrite;
            if (SyncFileRange((int)handle.DangerousGetHandle(), offset, length, flags) != 0)
            {
                int errno = Marshal.GetLastPInvokeError();
                if (errno is not NotSupported and not NoSeek and not InvalidArgument)
                {
                    throw new IOException(
                        $"Write-back of {length} bytes at {offset} of '{path}' failed (errno {errno}).", errno);
                }
            }
        }
        catch (EntryPointNotFoundException)
        {
            // A C library without sync_file_range: the fsync after the writes flushes them all.
        }
        finally
        {
            if (added)
            {
                handle.DangerousRelease();
            }
        }
    }

    private const int PopulateWrite = 23; // MADV_POPULATE_WRITE, Linux 5.14 and later
    private const int InvalidArgument = 22; // EINVAL

    private static int s_populateUnsupported;

    [LibraryImport("libc", EntryPoint = "madvise", SetLastError = true)]
    private static unsafe partial int MAdvise(void* address, nuint length, int advice);

    [LibraryImport("libc", EntryPoint = "open", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Open(string path, int flags);

    [LibraryImport("libc", EntryPoint = "close", SetLastError = true)]
    private static partial int Close(int fd);

    /// <summary>
    /// A second handle on the file at <paramref name="path"/> for reads that bypass the page cache (Linux
    /// <c>open(O_RDONLY | O_DIRECT)</c>), or null where that is not available: another operating system or
    /// architecture, or a file system that refuses the flag (tmpfs, some network file systems).
    /// </summary>
    public static SafeFileHandle? OpenForUncachedReads(string path)
    {
        if (!OperatingSystem.IsLinux() || s_direct == 0)
        {
            return null;
        }

        int fd = Open(path, ReadOnly | s_direct | CloseOnExec);
        return fd < 0 ? null : new SafeFileHandle(fd, ownsHandle: true);
    }

    /// <summary>fsync of a folder, so that created, renamed and deleted entries survive a crash (Linux only; a no-op
    /// elsewhere).</summary>
    public static void SyncDirectory(string path)
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        int fd = Open(path, ReadOnly | s_directory);
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

    /// <summary>
    /// Faults in, with one system call, the whole pages of fresh memory inside <paramref name="memory"/> that the
    /// caller is about to fill, instead of one page fault per 4 KiB page as it writes them (Linux 5.14 and later,
    /// <c>madvise(MADV_POPULATE_WRITE)</c>; a no-op elsewhere and when the kernel refuses). The contents are unchanged.
    /// On a virtual machine that backs guest memory lazily a page fault is expensive, and populating costs a fraction
    /// of it (docs/measurements.md, "Recovery replay").
    /// </summary>
    public static unsafe void PopulateForWrite(Span<byte> memory)
    {
        const nuint Page = 4096;
        if (!OperatingSystem.IsLinux() || memory.Length < 2 * (int)Page
            || Volatile.Read(ref s_populateUnsupported) != 0)
        {
            return;
        }

        fixed (byte* start = memory)
        {
            nuint first = ((nuint)start + Page - 1) & ~(Page - 1);
            nuint end = ((nuint)start + (nuint)memory.Length) & ~(Page - 1);
            if (end > first && MAdvise((void*)first, end - first, PopulateWrite) != 0
                && Marshal.GetLastPInvokeError() == InvalidArgument)
            {
                // A kernel without MADV_POPULATE_WRITE: stop asking. Any other failure (out of memory, say) only means
                // these pages fault in one by one as they are written, as they would without the call.
                Volatile.Write(ref s_populateUnsupported, 1);
            }
        }
    }

    private const int HugePage = 14; // MADV_HUGEPAGE

    /// <summary>
    /// Asks the kernel to back <paramref name="length"/> bytes at <paramref name="address"/> (2 MiB aligned) with
    /// transparent huge pages where it can (Linux <c>madvise(MADV_HUGEPAGE)</c>, which matters when the system's
    /// policy is "madvise"; a no-op elsewhere). Advice: a refusal is ignored.
    /// </summary>
    public static unsafe void AdviseHugePages(void* address, nuint length)
    {
        if (OperatingSystem.IsLinux())
        {
            _ = MAdvise(address, length, HugePage);
        }
    }

    private const int WillNeed = 3; // POSIX_FADV_WILLNEED on Linux
    private const int PriorityOfProcess = 0; // PRIO_PROCESS: on Linux, with a thread id, that thread alone
    private const int LowestPriority = 19; // the highest nice value

    [LibraryImport("libc", EntryPoint = "posix_fadvise")]
    private static partial int PosixFAdvise(int fd, long offset, long length, int advice);

    [LibraryImport("libc", EntryPoint = "gettid")]
    private static partial int GetThreadId();

    [LibraryImport("libc", EntryPoint = "setpriority", SetLastError = true)]
    private static partial int SetPriority(int which, uint who, int priority);

    /// <summary>
    /// Asks the kernel to start reading <paramref name="length"/> bytes at <paramref name="offset"/> of the file behind
    /// <paramref name="handle"/> into its page cache and returns without waiting (Linux
    /// <c>posix_fadvise(POSIX_FADV_WILLNEED)</c>; a no-op elsewhere). Advice: a failure is ignored.
    /// </summary>
    public static void AdviseWillNeed(Microsoft.Win32.SafeHandles.SafeFileHandle handle, long offset, long length)
    {
        if (!OperatingSystem.IsLinux() || handle.IsInvalid || handle.IsClosed)
        {
            return;
        }

        bool added = false;
        try
        {
            handle.DangerousAddRef(ref added);
            _ = PosixFAdvise((int)handle.DangerousGetHandle(), offset, length, WillNeed);
        }
        catch (ObjectDisposedException)
        {
            // Closed meanwhile: nothing to advise.
        }
        finally
        {
            if (added)
            {
                handle.DangerousRelease();
            }
        }
    }

    /// <summary>Gives the calling thread the lowest CPU scheduling priority an unprivileged process may set (Linux:
    /// nice 19 for this thread alone; a no-op elsewhere, where <see cref="Thread.Priority"/> does it).
    /// Best effort.</summary>
    public static void LowerCurrentThreadPriority()
    {
        if (!OperatingSystem.IsLinux())
        {
            return;
        }

        try
        {
            _ = SetPriority(PriorityOfProcess, (uint)GetThreadId(), LowestPriority);
        }
        catch (EntryPointNotFoundException)
        {
            // A C library without gettid (glibc before 2.30): the thread keeps its priority.
        }
    }
}
