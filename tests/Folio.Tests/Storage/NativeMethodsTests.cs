using System.Runtime.InteropServices;
using Folio.Storage;

namespace Folio.Tests.Storage;

/// <summary>
/// <see cref="NativeMethods.PopulateForWrite"/>: one system call faults in the pages of fresh memory a replay is about
/// to fill. The page faults are counted for the calling thread (<c>getrusage(RUSAGE_THREAD)</c>), so other threads of
/// the test run do not disturb the count.
/// </summary>
public sealed unsafe partial class NativeMethodsTests
{
    private const int Pages = 2048; // 8 MiB

    [Fact]
    public void Populating_fresh_memory_faults_its_pages_in_with_one_call()
    {
        if (!OperatingSystem.IsLinux())
        {
            return; // madvise is Linux's; elsewhere the call is a no-op
        }

        // Control: writing fresh memory page by page faults once per page, so the count below measures something.
        Assert.True(FaultsWhileWriting(populateFirst: false) >= Pages / 2);

        Assert.True(FaultsWhileWriting(populateFirst: true) < Pages / 16);
    }

    [Fact]
    public void Populating_keeps_the_contents_including_the_partial_pages_at_both_ends()
    {
        byte[] buffer = GC.AllocateUninitializedArray<byte>(1 << 20);
        new Random(7).NextBytes(buffer);
        byte[] expected = buffer.ToArray();

        NativeMethods.PopulateForWrite(buffer.AsSpan(1000, buffer.Length - 2000)); // starts and ends mid-page
        NativeMethods.PopulateForWrite(buffer.AsSpan(10, 100)); // under a page: nothing to populate
        NativeMethods.PopulateForWrite([]);

        Assert.Equal(expected, buffer);
    }

    private static long FaultsWhileWriting(bool populateFirst)
    {
        // A fresh anonymous mapping: malloc may hand back memory freed earlier in the process (glibc raises its mmap
        // threshold after a large free), whose pages are already faulted in, and the control below would fail.
        nuint length = Pages * 4096;
        const int ReadWrite = 3; // PROT_READ | PROT_WRITE
        const int PrivateAnonymous = 0x22; // MAP_PRIVATE | MAP_ANONYMOUS
        byte* memory = (byte*)Map(0, length, ReadWrite, PrivateAnonymous, -1, 0);
        Assert.True(memory != (byte*)-1, "mmap failed");
        try
        {
            long before = ThreadMinorFaults();
            if (populateFirst)
            {
                NativeMethods.PopulateForWrite(new Span<byte>(memory, (int)length));
            }

            long afterPopulate = ThreadMinorFaults();
            for (nuint offset = 0; offset < length; offset += 4096)
            {
                memory[offset] = 1;
            }

            long faults = ThreadMinorFaults() - afterPopulate;
            Assert.True(afterPopulate - before < Pages * 2, "populating counts at most a fault per page");
            return faults;
        }
        finally
        {
            Assert.Equal(0, Unmap(memory, length));
        }
    }

    private static long ThreadMinorFaults()
    {
        // struct rusage: two struct timevals (16 bytes each), then longs: maxrss, ixrss, idrss, isrss, minflt, ...
        long* usage = stackalloc long[18];
        Assert.Equal(0, GetResourceUsage(1 /* RUSAGE_THREAD */, usage));
        return usage[8];
    }

    [LibraryImport("libc", EntryPoint = "mmap", SetLastError = true)]
    private static partial void* Map(nint address, nuint length, int protection, int flags, int fd, nint offset);

    [LibraryImport("libc", EntryPoint = "munmap", SetLastError = true)]
    private static partial int Unmap(void* address, nuint length);

    [LibraryImport("libc", EntryPoint = "getrusage", SetLastError = true)]
    private static partial int GetResourceUsage(int who, long* usage);
}
