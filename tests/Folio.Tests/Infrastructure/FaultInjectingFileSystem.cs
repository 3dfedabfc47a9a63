using Folio.Storage;

namespace Folio.Tests.Infrastructure;

/// <summary>What a <see cref="FaultInjectingFileSystem"/> does to the next matching operation.</summary>
public enum FileFault
{
    None,
    WriteFails,
    ShortWrite,
    DiskFull,
    SyncFails,
    WriteBackFails,
}

/// <summary>
/// The real file system with faults on demand: arm a fault and the next write or sync of a matching file fails
/// the way the fault says (an I/O error, a short write that lands half the bytes, ENOSPC, a failed fsync, a failed
/// early write-back). Matching write-backs are recorded (<see cref="WriteBacks"/>).
/// </summary>
internal sealed class FaultInjectingFileSystem : IFileSystem
{
    private readonly PhysicalFileSystem _inner = PhysicalFileSystem.Instance;
    private int _fault;

    public Func<string, bool> Matches { get; set; } = static path
        => path.EndsWith(".journal", StringComparison.Ordinal);

    public int Writes;
    public int Syncs;

    /// <summary>Every write-back asked of a matching file, in order: its range and whether it waited.</summary>
    public System.Collections.Concurrent.ConcurrentQueue<(string Path, long Offset, long Length, bool Wait)> WriteBacks
        { get; } = new();

    /// <summary>Matching syncs that returned successfully.</summary>
    public int SyncsCompleted;

    /// <summary>Matching files opened through this file system (journal segments open extra handles for concurrent
    /// syncs; the next segment, prepared in the background as a .tmp file, does not match).</summary>
    public int Opens;

    private ManualResetEventSlim? _syncGate;

    /// <summary>When set, every matching sync waits for it first: tests hold the committer inside an fsync.</summary>
    public ManualResetEventSlim? SyncGate
    {
        get => Volatile.Read(ref _syncGate);
        set => Volatile.Write(ref _syncGate, value);
    }

    /// <summary>When true, only the first sync to arrive waits on <see cref="SyncGate"/> (it takes the gate
    /// away).</summary>
    public bool SyncGateHoldsOne { get; set; }

    /// <summary>Signalled when a sync starts waiting on <see cref="SyncGate"/>.</summary>
    public ManualResetEventSlim SyncWaiting { get; } = new();

    /// <summary>Holds the next sync (every sync, unless <see cref="SyncGateHoldsOne"/>) until the returned gate is set:
    /// runs <paramref name="start"/>, which must lead to a sync, and returns once a sync waits in the gate, with the
    /// task <paramref name="start"/> returned.</summary>
    public (ManualResetEventSlim Gate, TTask Started) HoldNextSync<TTask>(Func<TTask> start)
        where TTask : Task
    {
        ManualResetEventSlim gate = ArmSyncGate();
        TTask started = start();
        Assert.True(SyncWaiting.Wait(TestDeadline.Hang), "a sync reached the gate");
        return (gate, started);
    }

    /// <summary>Holds the next sync (every sync, unless <see cref="SyncGateHoldsOne"/>) until the returned gate is set,
    /// with <see cref="SyncWaiting"/> reset so that it tells when a sync waits.</summary>
    public ManualResetEventSlim ArmSyncGate()
    {
        var gate = new ManualResetEventSlim();
        SyncWaiting.Reset();
        SyncGate = gate;
        return gate;
    }

    private int _skip;
    private volatile bool _noSpace;
    private readonly SparseFiles _sparse = new();

    /// <summary>While true, every matching write that needs new blocks fails with ENOSPC (errno 28, as .NET reports it
    /// on Unix): a disk that stays full until space is freed. A write within the blocks a file has written succeeds,
    /// as an overwrite needs no new ones on ext4 or xfs; a write past them, at the end or into the hole of a file
    /// lengthened with <see cref="IStorageFile.SetLength"/>, needs new ones.</summary>
    public bool NoSpace
    {
        get => _noSpace;
        set => _noSpace = value;
    }

    /// <summary>Arms <paramref name="fault"/> for the matching operation of its kind after the next
    /// <paramref name="skip"/> ones.</summary>
    public void Arm(FileFault fault, int skip = 0)
    {
        Volatile.Write(ref _skip, skip);
        Volatile.Write(ref _fault, (int)fault);
    }

    public FileFault Armed => (FileFault)Volatile.Read(ref _fault);

    private volatile IOException? _openFailure;

    /// <summary>While set, every open of a matching file that would create it throws this (a process out of file
    /// descriptors, a folder that refuses new files); opens of existing files are unaffected.</summary>
    public IOException? CreateFailure
    {
        get => _openFailure;
        set => _openFailure = value;
    }

    private volatile IOException? _openExistingFailure;

    /// <summary>While set, every open of an existing matching file (<see cref="FileMode.Open"/>) throws this (a
    /// process out of file descriptors).</summary>
    public IOException? OpenExistingFailure
    {
        get => _openExistingFailure;
        set => _openExistingFailure = value;
    }

    private volatile IOException? _writableOpenFailure;

    /// <summary>While set, every open of a matching file through <see cref="OpenFile"/>, which opens for writing,
    /// throws this (a read-only file system or a snapshot mounted read-only); <see cref="OpenFileForReading"/> is
    /// unaffected.</summary>
    public IOException? WritableOpenFailure
    {
        get => _writableOpenFailure;
        set => _writableOpenFailure = value;
    }

    internal bool TryTake(FileFault fault)
    {
        if (Volatile.Read(ref _fault) != (int)fault || Interlocked.Decrement(ref _skip) >= 0)
        {
            return false;
        }

        return Interlocked.CompareExchange(ref _fault, (int)FileFault.None, (int)fault) == (int)fault;
    }

    public IStorageFile OpenFile(string path, FileMode mode)
    {
        if (Matches(path))
        {
            Interlocked.Increment(ref Opens);
            if (_openFailure is { } failure && mode is FileMode.CreateNew or FileMode.Create or FileMode.OpenOrCreate)
            {
                throw failure;
            }

            if (_openExistingFailure is { } existing && mode is FileMode.Open)
            {
                throw existing;
            }

            if (_writableOpenFailure is { } readOnly)
            {
                throw readOnly;
            }
        }

        return new FaultingFile(this, _inner.OpenFile(path, mode));
    }

    public IStorageFile OpenFileForReading(string path)
    {
        if (Matches(path))
        {
            Interlocked.Increment(ref Opens);
            if (_openExistingFailure is { } existing)
            {
                throw existing;
            }
        }

        return new FaultingFile(this, _inner.OpenFileForReading(path));
    }

    public void DeleteFile(string path)
    {
        _inner.DeleteFile(path);
        _sparse.Deleted(path);
    }

    public bool FileExists(string path) => _inner.FileExists(path);

    public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
    {
        _inner.MoveFile(sourcePath, destinationPath, overwrite);
        _sparse.Moved(sourcePath, destinationPath);
    }

    public string[] GetFiles(string directory, string searchPattern) => _inner.GetFiles(directory, searchPattern);

    public void CreateDirectory(string path) => _inner.CreateDirectory(path);

    public void SyncDirectory(string path) => _inner.SyncDirectory(path);

    public IDisposable AcquireExclusiveLock(string lockFilePath) => _inner.AcquireExclusiveLock(lockFilePath);

    private sealed class FaultingFile(FaultInjectingFileSystem owner, IStorageFile inner) : IStorageFile
    {
        public string Path => inner.Path;

        public long Length => inner.Length;

        public int Read(Span<byte> destination, long offset) => inner.Read(destination, offset);

        public void Truncate(long length) => inner.Truncate(length);

        public void Write(ReadOnlySpan<byte> source, long offset)
        {
            if (owner.Matches(Path))
            {
                Interlocked.Increment(ref owner.Writes);
                if (owner.NoSpace && offset + source.Length > owner._sparse.Allocated(Path, inner.Length))
                {
                    throw new IOException("No space left on device (injected).", 28);
                }

                if (owner.TryTake(FileFault.WriteFails))
                {
                    throw new IOException("Injected write failure.");
                }

                if (owner.TryTake(FileFault.DiskFull))
                {
                    throw new IOException("No space left on device (injected).", unchecked((int)0x80070070));
                }

                if (owner.TryTake(FileFault.ShortWrite))
                {
                    inner.Write(source[..(source.Length / 2)], offset);
                    throw new IOException("Injected short write.");
                }
            }

            inner.Write(source, offset);
            owner._sparse.Wrote(Path, offset + source.Length);
        }

        public void SetLength(long length)
        {
            long before = inner.Length;
            inner.SetLength(length);
            owner._sparse.LengthSet(Path, before, length);
        }

        public void Sync()
        {
            if (owner.Matches(Path))
            {
                Interlocked.Increment(ref owner.Syncs);
                bool fail = owner.TryTake(FileFault.SyncFails);
                ManualResetEventSlim? gate = owner.SyncGateHoldsOne ? Interlocked.Exchange(ref owner._syncGate, null)
                    : owner.SyncGate;
                if (gate is not null)
                {
                    owner.SyncWaiting.Set();
                    gate.Wait();
                }

                if (fail)
                {
                    throw new IOException("Injected fsync failure (EIO).");
                }
            }

            inner.Sync();
            if (owner.Matches(Path))
            {
                Interlocked.Increment(ref owner.SyncsCompleted);
            }
        }

        public void WriteBack(long offset, long length, bool wait)
        {
            if (owner.Matches(Path))
            {
                owner.WriteBacks.Enqueue((Path, offset, length, wait));
                if (owner.TryTake(FileFault.WriteBackFails))
                {
                    throw new IOException("Injected write-back failure (EIO).", 5);
                }
            }

            inner.WriteBack(offset, length, wait);
        }

        public StorageMapping MapReadOnly(long length) => inner.MapReadOnly(length);

        public void Dispose() => inner.Dispose();
    }
}
