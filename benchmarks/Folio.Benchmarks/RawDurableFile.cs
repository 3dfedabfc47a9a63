using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace Folio.Benchmarks;

/// <summary>The baselines: a plain file written with pwrite and made durable with fdatasync, no journal around
/// it.</summary>
public sealed partial class RawDurableFile : IDisposable
{
    private readonly SafeFileHandle _handle;
    private long _offset;

    public RawDurableFile(string path, long zeroFill = 0, FileOptions options = FileOptions.None,
        bool openExisting = false)
    {
        if (zeroFill > 0)
        {
            using SafeFileHandle fill = File.OpenHandle(path, FileMode.Create, FileAccess.ReadWrite);
            var zeros = new byte[1 << 20];
            for (long at = 0; at < zeroFill; at += zeros.Length)
            {
                RandomAccess.Write(fill, zeros.AsSpan(0, (int)Math.Min(zeros.Length, zeroFill - at)), at);
            }

            _ = fdatasync((int)fill.DangerousGetHandle());
        }

        _handle = File.OpenHandle(path, zeroFill > 0 || openExisting ? FileMode.Open : FileMode.Create,
            FileAccess.ReadWrite, FileShare.Read, options);
    }

    public long Offset => _offset;

    public void Write(ReadOnlySpan<byte> bytes, long offset) => RandomAccess.Write(_handle, bytes, offset);

    public void Append(ReadOnlySpan<byte> bytes)
    {
        RandomAccess.Write(_handle, bytes, _offset);
        _offset += bytes.Length;
    }

    public void Rewind() => _offset = 0;

    public void Sync()
    {
        if (fdatasync((int)_handle.DangerousGetHandle()) != 0)
        {
            throw new IOException($"fdatasync failed: {Marshal.GetLastPInvokeError()}");
        }
    }

    public void Dispose() => _handle.Dispose();

    [LibraryImport("libc", SetLastError = true)]
    private static partial int fdatasync(int fd);
}
