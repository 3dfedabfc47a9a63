using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// How to make a small append durable on this machine, measured side by side (Mean per durable write of one
/// 200-byte record): pwrite + fdatasync into a growing file, into a zero-filled file, into an fallocate'd file, and
/// an O_DSYNC (<see cref="FileOptions.WriteThrough"/>) handle with page-aligned writes (rewriting the tail page) or
/// plain unaligned writes. The journal uses the winner.
/// </summary>
public class DurabilityTechniqueBenchmarks : BenchmarkDirectory
{
    private const int WritesPerInvoke = 100;
    private const long FileSize = 16L << 20;
    private const int PageSize = 4096;

    private readonly byte[] _record = new byte[200];
    private readonly byte[] _page = new byte[2 * PageSize];
    private RawDurableFile _growing = null!;
    private RawDurableFile _zeroFilled = null!;
    private RawDurableFile _fallocated = null!;
    private RawDurableFile _writeThroughAligned = null!;
    private RawDurableFile _writeThrough = null!;
    private long _alignedOffset;
    private string _growingPath = string.Empty;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        new Random(1).NextBytes(_record);
        _growingPath = Path.Combine(Root, "growing.bin");
        _growing = new RawDurableFile(_growingPath);
        _zeroFilled = new RawDurableFile(Path.Combine(Root, "zero-filled.bin"), zeroFill: FileSize);
        string fallocated = Path.Combine(Root, "fallocated.bin");
        File.OpenHandle(fallocated, FileMode.CreateNew, FileAccess.ReadWrite, FileShare.None, FileOptions.None,
            preallocationSize: FileSize).Dispose();
        _fallocated = new RawDurableFile(fallocated, openExisting: true);
        string aligned = Path.Combine(Root, "write-through-aligned.bin");
        new RawDurableFile(aligned, zeroFill: FileSize).Dispose();
        _writeThroughAligned = OpenExisting(aligned, FileOptions.WriteThrough);
        string unaligned = Path.Combine(Root, "write-through.bin");
        new RawDurableFile(unaligned, zeroFill: FileSize).Dispose();
        _writeThrough = OpenExisting(unaligned, FileOptions.WriteThrough);
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _growing.Dispose();
        _zeroFilled.Dispose();
        _fallocated.Dispose();
        _writeThroughAligned.Dispose();
        _writeThrough.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = WritesPerInvoke)]
    public void GrowingFileFdatasync()
    {
        if (_growing.Offset > FileSize)
        {
            _growing.Dispose();
            _growing = new RawDurableFile(_growingPath);
        }

        for (int i = 0; i < WritesPerInvoke; i++)
        {
            _growing.Append(_record);
            _growing.Sync();
        }
    }

    [Benchmark(OperationsPerInvoke = WritesPerInvoke)]
    public void ZeroFilledFdatasync() => Cycle(_zeroFilled, sync: true);

    [Benchmark(OperationsPerInvoke = WritesPerInvoke)]
    public void FallocatedFdatasync() => Cycle(_fallocated, sync: true);

    [Benchmark(OperationsPerInvoke = WritesPerInvoke)]
    public void WriteThroughUnaligned() => Cycle(_writeThrough, sync: false);

    [Benchmark(OperationsPerInvoke = WritesPerInvoke)]
    public void WriteThroughAlignedPages()
    {
        for (int i = 0; i < WritesPerInvoke; i++)
        {
            if (_alignedOffset + _record.Length > FileSize)
            {
                _alignedOffset = 0;
                Array.Clear(_page);
            }

            long pageStart = _alignedOffset & ~(long)(PageSize - 1);
            int inPage = (int)(_alignedOffset - pageStart);
            _record.CopyTo(_page, inPage);
            int length = (inPage + _record.Length + PageSize - 1) & ~(PageSize - 1);
            _writeThroughAligned.Write(_page.AsSpan(0, length), pageStart);
            _alignedOffset += _record.Length;
            if ((_alignedOffset & ~(long)(PageSize - 1)) != pageStart)
            {
                Array.Copy(_page, PageSize, _page, 0, PageSize);
                Array.Clear(_page, PageSize, PageSize);
            }
        }
    }

    private void Cycle(RawDurableFile file, bool sync)
    {
        for (int i = 0; i < WritesPerInvoke; i++)
        {
            if (file.Offset + _record.Length > FileSize)
            {
                file.Rewind();
            }

            file.Append(_record);
            if (sync)
            {
                file.Sync();
            }
        }
    }

    private static RawDurableFile OpenExisting(string path, FileOptions options)
        => new(path, zeroFill: 0, options, openExisting: true);
}
