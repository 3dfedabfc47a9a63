using System.Buffers.Binary;
using BenchmarkDotNet.Attributes;
using Folio.Journal;
using Microsoft.Win32.SafeHandles;

namespace Folio.Benchmarks;

/// <summary>
/// Eight concurrent readers of 100-byte entries (records of 16 entries, one record per simulated millisecond).
/// Mean is per entry read, except <see cref="ShortRangeQueries"/> (per iterator). With 2 cores, eight readers share
/// two cores: the CPU cost per entry per reader is about Mean x 2.
/// </summary>
public class JournalReadBenchmarks : BenchmarkDirectory
{
    private const int Readers = 8;
    private const int EntrySize = 100;
    private const int EntriesPerRecord = 16;
    private const int JournalEntries = 1_000_000;
    private const int ScanEntries = 250_000;
    private const int IteratorsPerReader = 1000;
    private const int EntriesPerIterator = 4;
    private const int TailRecords = 50;

    private WriteAheadJournal _journal = null!;
    private ReadOnlyMemory<byte>[] _group = null!;
    private SteppingClock _clock = null!;
    private long _firstTicks;
    private long _lastTicks;
    private Thread[] _readerThreads = null!;
    private Barrier _readersStart = null!;
    private Barrier _readersDone = null!;
    private volatile Action<int>? _readerBody;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _clock = new SteppingClock(new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero),
            TimeSpan.FromMilliseconds(1));
        _journal = WriteAheadJournal.Open(NewFolder("journal"), new JournalOptions { TimeProvider = _clock });
        var random = new Random(3);
        _group = new ReadOnlyMemory<byte>[EntriesPerRecord];
        for (int i = 0; i < _group.Length; i++)
        {
            byte[] bytes = new byte[EntrySize];
            random.NextBytes(bytes);
            _group[i] = bytes;
        }

        for (int i = 0; i < JournalEntries / EntriesPerRecord; i++)
        {
            _journal.Append(_group);
        }

        _journal.Sync();
        using JournalReader first = _journal.OpenReader(1);
        first.TryRead(out JournalEntry entry);
        _firstTicks = entry.TimestampTicks;
        _lastTicks = _clock.GetUtcNow().UtcTicks;
        StartReaderThreads();
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        StopReaderThreads();
        _journal.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Readers * ScanEntries)]
    public long RawRead()
    {
        string[] files = Directory.GetFiles(_journal.Directory, "*.journal").Order(StringComparer.Ordinal).ToArray();
        long total = 0;
        RunReaders(_ => Interlocked.Add(ref total, RawScan(files, ScanEntries)));
        return total;
    }

    [Benchmark(OperationsPerInvoke = Readers * ScanEntries)]
    public long ForwardScan()
    {
        long total = 0;
        RunReaders(_ => Interlocked.Add(ref total, Scan(ScanEntries)));
        return total;
    }

    [Benchmark(OperationsPerInvoke = Readers * ScanEntries)]
    public long ForwardScanWithWriter()
    {
        using var stop = new CancellationTokenSource();
        var writer = new Thread(() =>
        {
            while (!stop.IsCancellationRequested)
            {
                _journal.Append(_group);
                _journal.Sync();
            }
        });
        writer.Start();
        long total = 0;
        RunReaders(_ => Interlocked.Add(ref total, Scan(ScanEntries)));
        stop.Cancel();
        writer.Join();
        return total;
    }

    [Benchmark(OperationsPerInvoke = Readers * IteratorsPerReader)]
    public long ShortRangeQueries() => RunShortRangeQueries(IteratorsPerReader);

    /// <summary>
    /// <see cref="ShortRangeQueries"/> with ten times the iterators per reader per operation: the same work, with the
    /// start and end of an operation (eight threads on two cores meeting at a barrier, the last one's time slice)
    /// spread over 10x more iterators. The definition is <see cref="ShortRangeQueries"/>; this shows how much
    /// of its Mean is that harness cost.
    /// </summary>
    [Benchmark(OperationsPerInvoke = Readers * IteratorsPerReader * 10)]
    public long ShortRangeQueriesSustained() => RunShortRangeQueries(IteratorsPerReader * 10);

    private long RunShortRangeQueries(int iteratorsPerReader)
    {
        long total = 0;
        RunReaders(r =>
        {
            var random = new Random(r);
            long sum = 0;
            for (int i = 0; i < iteratorsPerReader; i++)
            {
                var at = new DateTimeOffset(random.NextInt64(_firstTicks, _lastTicks), TimeSpan.Zero);
                using JournalReader reader = _journal.OpenReader(at);
                for (int k = 0; k < EntriesPerIterator && reader.TryRead(out JournalEntry entry); k++)
                {
                    sum += entry.Data[0];
                }
            }

            Interlocked.Add(ref total, sum);
        });
        return total;
    }

    [Benchmark(OperationsPerInvoke = Readers * TailRecords * EntriesPerRecord)]
    public long TailFollow()
    {
        long from = _journal.CommittedSequence + 1;
        long total = 0;
        using var ready = new CountdownEvent(Readers);
        var readers = new Thread[Readers];
        for (int r = 0; r < Readers; r++)
        {
            readers[r] = new Thread(() =>
            {
                using JournalReader reader = _journal.OpenReader(from);
                ready.Signal();
                long read = 0;
                while (read < TailRecords * EntriesPerRecord)
                {
                    if (!reader.WaitToReadAsync().AsTask().GetAwaiter().GetResult())
                    {
                        return;
                    }

                    while (reader.TryRead(out _))
                    {
                        read++;
                    }
                }

                Interlocked.Add(ref total, read);
            });
            readers[r].Start();
        }

        ready.Wait();
        for (int i = 0; i < TailRecords; i++)
        {
            _journal.Append(_group);
            _journal.Sync();
        }

        foreach (Thread reader in readers)
        {
            reader.Join();
        }

        return total;
    }

    private long Scan(int entries)
    {
        using JournalReader reader = _journal.OpenReader(1);
        long sum = 0;
        for (int i = 0; i < entries && reader.TryRead(out JournalEntry entry); i++)
        {
            sum += entry.Data.Length;
        }

        return sum;
    }

    /// <summary>The ceiling: plain pread of the segment files in 1 MiB chunks, records and entries parsed by length
    /// only.</summary>
    private static long RawScan(string[] files, int entries)
    {
        byte[] buffer = new byte[1 << 20];
        long sum = 0;
        int read = 0;
        foreach (string path in files)
        {
            using SafeFileHandle file = File.OpenHandle(path, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete);
            long fileOffset = JournalFormat.SegmentHeaderSize;
            while (read < entries)
            {
                int got = RandomAccess.Read(file, buffer, fileOffset);
                int at = 0;
                while (read < entries && at + JournalFormat.RecordHeaderSize <= got)
                {
                    int length = BinaryPrimitives.ReadInt32LittleEndian(buffer.AsSpan(at + 8));
                    if (length == 0 || at + length > got)
                    {
                        break;
                    }

                    int count = BinaryPrimitives.ReadInt32LittleEndian(buffer.AsSpan(at + 12));
                    int entry = at + JournalFormat.RecordHeaderSize;
                    for (int i = 0; i < count; i++)
                    {
                        int entryLength = BinaryPrimitives.ReadInt32LittleEndian(buffer.AsSpan(entry));
                        sum += entryLength;
                        entry += 4 + entryLength;
                        read++;
                    }

                    at += length;
                }

                if (at == 0)
                {
                    break;
                }

                fileOffset += at;
            }
        }

        return sum;
    }

    /// <summary>
    /// Runs <paramref name="body"/> on the eight long-lived reader threads (started once in setup) and waits for all of
    /// them, so an operation measures reading, not starting and joining eight threads (about a quarter of a
    /// <see cref="ShortRangeQueries"/> operation when threads were started per operation).
    /// </summary>
    private void RunReaders(Action<int> body)
    {
        _readerBody = body;
        _readersStart.SignalAndWait();
        _readersDone.SignalAndWait();
    }

    private void StartReaderThreads()
    {
        _readersStart = new Barrier(Readers + 1);
        _readersDone = new Barrier(Readers + 1);
        _readerThreads = new Thread[Readers];
        for (int r = 0; r < Readers; r++)
        {
            int reader = r;
            _readerThreads[r] = new Thread(() =>
            {
                while (true)
                {
                    _readersStart.SignalAndWait();
                    if (_readerBody is not { } body)
                    {
                        return;
                    }

                    body(reader);
                    _readersDone.SignalAndWait();
                }
            })
            { IsBackground = true, Name = $"reader {r}" };
            _readerThreads[r].Start();
        }
    }

    private void StopReaderThreads()
    {
        _readerBody = null;
        _readersStart.SignalAndWait();
        foreach (Thread thread in _readerThreads)
        {
            thread.Join();
        }

        _readersStart.Dispose();
        _readersDone.Dispose();
    }

    /// <summary>A clock that moves forward by a fixed step at every reading: one record per step.</summary>
    private sealed class SteppingClock(DateTimeOffset start, TimeSpan step) : TimeProvider
    {
        private long _ticks = start.UtcTicks;

        public override DateTimeOffset GetUtcNow() => new(Interlocked.Add(ref _ticks, step.Ticks), TimeSpan.Zero);
    }
}
