using BenchmarkDotNet.Attributes;
using Folio.Journal;

namespace Folio.Benchmarks;

/// <summary>
/// Durable appends of 100-byte entries, one record of <see cref="EntriesPerRecord"/> entries per sync; Mean is per
/// record. Baselines in the same class: <see cref="RawFdatasync"/> writes the same bytes to a plain growing file with
/// pwrite + fdatasync, <see cref="RawFdatasyncPreallocated"/> does so into a zero-filled file (the physical limit).
/// </summary>
public class JournalAppendBenchmarks : BenchmarkDirectory
{
    private const int RecordsPerInvoke = 100;
    private const int EntrySize = 100;
    private const long RawFileSize = 64L << 20;

    private WriteAheadJournal _journal = null!;
    private ReadOnlyMemory<byte>[] _entries = null!;
    private RawDurableFile _raw = null!;
    private RawDurableFile _rawPreallocated = null!;
    private byte[] _rawRecord = null!;
    private string _rawPath = string.Empty;

    [Params(1, 64)]
    public int EntriesPerRecord { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _journal = WriteAheadJournal.Open(NewFolder("journal"));
        var random = new Random(42);
        _entries = new ReadOnlyMemory<byte>[EntriesPerRecord];
        for (int i = 0; i < _entries.Length; i++)
        {
            byte[] entry = new byte[EntrySize];
            random.NextBytes(entry);
            _entries[i] = entry;
        }

        _rawRecord = new byte[32 + (EntriesPerRecord * (4 + EntrySize))];
        random.NextBytes(_rawRecord);
        _rawPath = Path.Combine(NewFolder("raw"), "raw.bin");
        _raw = new RawDurableFile(_rawPath);
        _rawPreallocated = new RawDurableFile(Path.Combine(Root, "raw", "preallocated.bin"), zeroFill: RawFileSize);
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _journal.Dispose();
        _raw.Dispose();
        _rawPreallocated.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = RecordsPerInvoke)]
    public void RawFdatasync()
    {
        if (_raw.Offset > RawFileSize)
        {
            _raw.Dispose();
            _raw = new RawDurableFile(_rawPath);
        }

        for (int i = 0; i < RecordsPerInvoke; i++)
        {
            _raw.Append(_rawRecord);
            _raw.Sync();
        }
    }

    [Benchmark(OperationsPerInvoke = RecordsPerInvoke)]
    public void RawFdatasyncPreallocated()
    {
        for (int i = 0; i < RecordsPerInvoke; i++)
        {
            if (_rawPreallocated.Offset + _rawRecord.Length > RawFileSize)
            {
                _rawPreallocated.Rewind();
            }

            _rawPreallocated.Append(_rawRecord);
            _rawPreallocated.Sync();
        }
    }

    [Benchmark(OperationsPerInvoke = RecordsPerInvoke)]
    public long Journal()
    {
        long last = 0;
        for (int i = 0; i < RecordsPerInvoke; i++)
        {
            _journal.Append(_entries);
            last = _journal.Sync();
        }

        if (_journal.SegmentCount > 2)
        {
            _journal.Purge(last);
        }

        return last;
    }
}
