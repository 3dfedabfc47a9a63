using Folio.Journal;
using Folio.Transactions;

namespace Folio.Tests.Infrastructure;

/// <summary>A journal plus a transaction merger over a version table, in a temp folder, with a fault-injecting file
/// system.</summary>
internal sealed class MergerFixture : IDisposable
{
    private readonly TempDirectory _dir = new();
    private readonly long _segmentSize;

    public MergerFixture(Action<TransactionMergerOptions>? configure = null, long segmentSize = 1L << 20,
        TestState? state = null)
    {
        Files = new FaultInjectingFileSystem();
        _segmentSize = segmentSize;
        Journal = WriteAheadJournal.Open(_dir.Path,
            new JournalOptions { SegmentSize = segmentSize, FileSystem = Files });
        State = state ?? new TestState();
        var options = new TransactionMergerOptions();
        configure?.Invoke(options);
        Merger = new TransactionMerger(Journal, State, options);
    }

    public string Path => _dir.Path;

    public FaultInjectingFileSystem Files { get; }

    public WriteAheadJournal Journal { get; private set; }

    public TestState State { get; }

    public TransactionMerger Merger { get; }

    /// <summary>Every batch in the journal from <paramref name="from"/>: sequence, record (group) first sequence,
    /// commands.</summary>
    public List<(long Sequence, long Record, List<BatchCommand> Commands)> ReadBatches(long from = 1)
    {
        var result = new List<(long, long, List<BatchCommand>)>();
        using JournalReader reader = Journal.OpenReader(from);
        while (reader.TryRead(out JournalEntry entry))
        {
            result.Add((entry.Sequence, reader.RecordFirstSequence, BatchEncoding.Decode(entry.Data)));
        }

        return result;
    }

    /// <summary>
    /// Closes the merger and the journal, reopens the journal (recovery) and reads every batch in it: what a reopened
    /// store would replay, including records written but never published to readers.
    /// </summary>
    public List<(long Sequence, long Record, List<BatchCommand> Commands)> ReadBatchesAfterReopen()
    {
        Merger.Dispose();
        Journal.Dispose();
        Journal = WriteAheadJournal.Open(_dir.Path,
            new JournalOptions { SegmentSize = _segmentSize, FileSystem = Files });
        return ReadBatches();
    }

    /// <summary>Holds the next fsync until the returned gate is set; returns once a committer is waiting in
    /// it.</summary>
    public ManualResetEventSlim HoldNextSync(Func<Task> start) => Files.HoldNextSync(start).Gate;

    /// <summary>Disposes on another thread and reports whether that finished in time (a stuck committer role would hang
    /// Dispose).</summary>
    public bool DisposeWithin(TimeSpan timeout) => Task.Run(Dispose).Wait(timeout);

    public void Dispose()
    {
        Files.SyncGate?.Set();
        Files.SyncGate = null;
        Merger.Dispose();
        Journal.Dispose();
        _dir.Dispose();
    }
}

/// <summary>A version table whose validation, or application, throws for batches the test marks.</summary>
internal sealed class TestState : ICommitState
{
    private readonly VersionTable _versions = new();

    public Func<CommitBatch, Exception?> Validator { get; set; } = static _ => null;

    public Func<CommitBatch, Exception?> ApplyFault { get; set; } = static _ => null;

    public long GetVersion(in DocumentKey key) => _versions.GetVersion(key);

    public void Validate(CommitBatch batch)
    {
        if (Validator(batch) is { } error)
        {
            throw error;
        }
    }

    public void Apply(CommitBatch batch, ReadOnlyMemory<byte> encoded, long sequence, long timestampTicks)
    {
        if (ApplyFault(batch) is { } error)
        {
            throw error;
        }

        _versions.Apply(batch, encoded, sequence, timestampTicks);
    }

    public void Publish(long sequence) => _versions.Publish(sequence);
}
