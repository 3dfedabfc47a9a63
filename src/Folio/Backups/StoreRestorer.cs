using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using Folio.Journal;
using Folio.Pages;
using Folio.Storage;

namespace Folio.Backups;

/// <summary>
/// Restores a backup (format: <see cref="BackupFormat"/>) read from a <see cref="PipeReader"/> into a new store
/// folder.
/// <para>
/// Ownership: one restore call owns the restorer; nothing else sees its folder until the end. Frames are parsed with a
/// <see cref="SequenceReader{T}"/> straight from the pipe's buffers (a frame may span any number of reads), each
/// checked (checksum, index, type in its place) before any of its bytes is used. The store is built in a staging
/// folder beside the target: the data file from the chunks (at their original offsets) and the header slot of the
/// backup's checkpoint; a journal that starts after the checkpoint, filled record by record with the original commit
/// times, up to the point in time asked for. Only after the End frame matched, both files were synced and the staged
/// store opened and passed a full verification (every page and journal record from disk) is the staging folder
/// renamed to the target. Any failure deletes the staging folder: a restore leaves a verified store or nothing. The
/// chunks' bytes go to the disk as they are written, in pieces of <see cref="WriteBackPiece"/> with at most
/// <see cref="WriteBackLimit"/> on their way (<see cref="WriteBackWindow"/>), so the disk writes while the backup is
/// read rather than all at the sync and the page cache holds few of them dirty; a write-back that fails fails the
/// restore.
/// </para>
/// <para>
/// A restore killed midway cannot delete its staging folder. Each restore holds an exclusive lock on a file beside its
/// staging folder (its name and <see cref="LockSuffix"/>) until it ends, so the next restore into the same target
/// deletes every staging folder of that target whose lock it can take (its restore is gone) and leaves those whose
/// lock is held (a restore still running, in this process or another).
/// </para>
/// </summary>
internal sealed class StoreRestorer : IDisposable
{
    /// <summary>The staging folder's name: the target's, this suffix and a random part (two restores into one target
    /// never share one).</summary>
    internal const string StagingSuffix = ".restoring-";

    /// <summary>The suffix of the lock file beside a staging folder, held while its restore runs.</summary>
    internal const string LockSuffix = ".lock";

    /// <summary>Chunk bytes written before their write-back is started (the disk takes them in pieces this size).
    /// </summary>
    private const long WriteBackPiece = 4L * 1024 * 1024;

    /// <summary>The most chunk bytes on their way to the disk at a time: the restore waits when the disk is behind
    /// by more.</summary>
    private const long WriteBackLimit = 32L * 1024 * 1024;

    private readonly string _staging;
    private readonly RestoreOptions _options;
    private readonly IFileSystem _fileSystem;
    private readonly ReplayedClock _clock = new();
    private readonly byte[] _payload = ArrayPool<byte>.Shared.Rent(BackupFormat.MaxPayload);

    private long _offset; // bytes of the current source consumed, for error messages
    private long _bytesRead; // of every source
    private int _source; // which source of the chain is being read (0: the full backup)
    private uint _nextIndex;
    private BackupFormat.Begin _full;
    private BackupFormat.Begin _begin; // the current source's
    private int _version; // the current source's format version
    private long _sourceEntries;
    private bool _begun;
    private bool _ended;
    private long _stopAfter = long.MaxValue; // the last sequence to restore

    // Chunks.
    private IStorageFile? _data;
    private WriteBackWindow? _dataWriteBack;
    private readonly List<(long Offset, long Length)> _chunks = [];
    private long _chunkWritten = -1; // bytes of the current chunk written; -1: none open
    private long _chunkSent; // bytes of the current chunk whose write-back was started
    private long _chunkBytes;
    private bool _chunksDone;

    // Journal.
    private WriteAheadJournal? _journal;
    private long _nextEntry;
    private long _entriesRead;
    private long _entriesRestored;
    private long _lastTimestamp = long.MinValue;
    private long _chainTimestamp; // the record time of the last entry the sources so far hold (0: unknown)
    private long _record; // first sequence of the record being collected; 0: none
    private long _recordTimestamp;
    private readonly List<(byte[] Bytes, int Length)> _recordEntries = [];
    private byte[]? _large;
    private int _largeLength;
    private int _largeFilled;
    private long _largeSequence;
    private long _largeRecord;
    private long _largeTimestamp;

    private StoreRestorer(string target, RestoreOptions options, IFileSystem fileSystem)
    {
        _staging = target + StagingSuffix + Guid.NewGuid().ToString("N")[..8];
        _options = options;
        _fileSystem = fileSystem;
    }

    /// <summary>Restores a full backup followed by incremental backups, each following on from the one before
    /// (<paramref name="sources"/> in that order).</summary>
    public static async ValueTask<RestoreResult> RestoreAsync(IReadOnlyList<PipeReader> sources, string folder,
        RestoreOptions options, DocumentStoreOptions storeOptions, CancellationToken cancellationToken)
    {
        if (sources.Count == 0)
        {
            ThrowHelper.ThrowArgument(nameof(sources), "A restore reads at least one backup.");
        }

        string target = Path.GetFullPath(folder);
        if (File.Exists(target) || (Directory.Exists(target) && Directory.EnumerateFileSystemEntries(target).Any()))
        {
            throw new IOException($"Cannot restore into '{target}': it is not a new or empty folder.");
        }

        using var restorer = new StoreRestorer(target, options, storeOptions.FileSystem);
        restorer._fileSystem.CreateDirectory(Path.GetDirectoryName(target)!); // the target's parent may be new too
        DeleteAbandonedStaging(target, restorer._fileSystem);
        string lockFile = restorer._staging + LockSuffix;
        IDisposable stagingLock = restorer._fileSystem.AcquireExclusiveLock(lockFile);
        try
        {
            Directory.CreateDirectory(restorer._staging);
            for (int i = 0; i < sources.Count; i++)
            {
                restorer._source = i;
                await restorer.ReadAsync(sources[i], cancellationToken).ConfigureAwait(false);
            }

            restorer.CheckPointInTime();
            restorer.Finish();
            (long sequence, long documents) = await VerifyAsync(restorer._staging, storeOptions,
                restorer._full.SegmentSize, cancellationToken).ConfigureAwait(false);
            if (Directory.Exists(target))
            {
                Directory.Delete(target);
            }

            Directory.Move(restorer._staging, target);
            restorer._fileSystem.SyncDirectory(Path.GetDirectoryName(target)!);
            return new RestoreResult(sequence, restorer._full.CheckpointSequence, restorer._entriesRestored,
                documents, restorer._bytesRead);
        }
        catch
        {
            restorer.CloseFiles();
            if (Directory.Exists(restorer._staging))
            {
                Directory.Delete(restorer._staging, recursive: true);
            }

            throw;
        }
        finally
        {
            stagingLock.Dispose();
            restorer._fileSystem.DeleteFile(lockFile);
        }
    }

    /// <summary>Deletes the staging folders of <paramref name="target"/> that restores killed midway left behind, and
    /// their lock files: those whose lock nobody holds (see the protocol). A folder whose lock is held belongs to a
    /// running restore and is left alone. The target's parent exists (the caller created it).</summary>
    private static void DeleteAbandonedStaging(string target, IFileSystem fileSystem)
    {
        string parent = Path.GetDirectoryName(target)!;
        string prefix = Path.GetFileName(target) + StagingSuffix;
        foreach (string staging in Directory.GetDirectories(parent, prefix + "*"))
        {
            using (IDisposable? abandoned = TakeLockOfEndedRestore(fileSystem, staging + LockSuffix))
            {
                if (abandoned is null)
                {
                    continue;
                }

                try
                {
                    Directory.Delete(staging, recursive: true);
                }
                catch (DirectoryNotFoundException)
                {
                    // Its restore ended between the listing and the lock (its folder moved into place or deleted).
                }
            }

            fileSystem.DeleteFile(staging + LockSuffix);
        }

        // A restore killed after it moved its folder into place, before it deleted its lock file.
        foreach (string lockFile in Directory.GetFiles(parent, prefix + "*" + LockSuffix))
        {
            if (Directory.Exists(lockFile[..^LockSuffix.Length]))
            {
                continue; // a running restore's (the loop above left it)
            }

            IDisposable? abandoned = TakeLockOfEndedRestore(fileSystem, lockFile);
            if (abandoned is null)
            {
                continue;
            }

            abandoned.Dispose();
            fileSystem.DeleteFile(lockFile);
        }
    }

    /// <summary>The lock of a staging folder whose restore is gone, or null while its restore holds it.</summary>
    private static IDisposable? TakeLockOfEndedRestore(IFileSystem fileSystem, string lockFile)
    {
        try
        {
            return fileSystem.AcquireExclusiveLock(lockFile);
        }
        catch (IOException e) when (LockConflictError.Matches(e))
        {
            return null; // its restore is running
        }
    }

    public void Dispose()
    {
        CloseFiles();
        ArrayPool<byte>.Shared.Return(_payload);
        ReleaseRecord();
        if (_large is not null)
        {
            ArrayPool<byte>.Shared.Return(_large);
            _large = null;
        }
    }

    private void CloseFiles()
    {
        _data?.Dispose();
        _data = null;
        _journal?.Dispose();
        _journal = null;
    }

    /// <summary>Opens the staged store (its journal replays into a fresh index) and reads every page and record of it
    /// back from disk; any failure is the backup's.</summary>
    private static async ValueTask<(long Sequence, long Documents)> VerifyAsync(string staging,
        DocumentStoreOptions storeOptions, long segmentSize, CancellationToken cancellationToken)
    {
        var options = new DocumentStoreOptions
        {
            FileSystem = storeOptions.FileSystem,
            SegmentSize = segmentSize, // the backup's: the open does not replace the restored segments
            MaxDocumentSize = (int)Math.Clamp(segmentSize - 1024 - (2 * DocumentIds.MaxIdBytes), 1,
                DocumentStoreOptions.DefaultMaxDocumentSize),
            CacheSize = DocumentStoreOptions.MinCacheSize,
            CheckpointInterval = Timeout.InfiniteTimeSpan,
            CheckpointOnClose = false,
            LoggerFactory = storeOptions.LoggerFactory,
        };
        DocumentStore store;
        try
        {
            store = DocumentStore.OpenCore(staging, options, cancellationToken);
        }
        catch (StoreCorruptedException e)
        {
            throw new BackupCorruptedException($"The restored store does not open: {e.Message}", e);
        }

        await using (store.ConfigureAwait(false))
        {
            // A backup of a checkpoint written in slices (CheckpointPass) holds some documents as of the pass's
            // sequence: it restores that sequence and later ones only.
            long last = store.LastCommittedSequence;
            long pass = store.Pages.Current.PassSequence;
            if (pass > last)
            {
                ThrowHelper.ThrowArgumentOutOfRange("options", last,
                    $"This backup's checkpoint holds some documents as of sequence {pass}: it restores sequences "
                    + $"{pass} and later.");
            }

            VerifyResult verified = await store.VerifyAsync(null, cancellationToken).ConfigureAwait(false);
            if (!verified.IsHealthy)
            {
                throw new BackupCorruptedException(
                    $"The restored store fails verification: {string.Join("; ", verified.Problems)}");
            }

            return (store.LastCommittedSequence, store.Index.LiveDocuments());
        }
    }

    private async ValueTask ReadAsync(PipeReader source, CancellationToken cancellationToken)
    {
        _offset = 0;
        _nextIndex = 0;
        _begun = false;
        _ended = false;
        _sourceEntries = 0;
        long before = _bytesRead;
        bool headerRead = false;
        while (true)
        {
            ReadResult result = await source.ReadAsync(cancellationToken).ConfigureAwait(false);
            ReadOnlySequence<byte> buffer = result.Buffer;
            SequencePosition consumed = buffer.Start;
            try
            {
                if (!headerRead && buffer.Length >= BackupFormat.StreamHeaderSize)
                {
                    ReadStreamHeader(buffer.Slice(0, BackupFormat.StreamHeaderSize));
                    headerRead = true;
                    consumed = buffer.GetPosition(BackupFormat.StreamHeaderSize);
                }

                if (headerRead)
                {
                    var reader = new SequenceReader<byte>(buffer.Slice(consumed));
                    while (TryReadFrame(ref reader))
                    {
                        consumed = reader.Position;
                    }
                }
            }
            finally
            {
                source.AdvanceTo(consumed, buffer.End);
            }

            _bytesRead = before + _offset;
            _options.Progress?.Report(_bytesRead);
            if (result.IsCompleted)
            {
                long left = buffer.Slice(consumed).Length;
                if (!headerRead)
                {
                    Corrupt("the backup ends inside its header");
                }

                if (!_ended)
                {
                    Corrupt(left > 0 ? "the backup ends inside a frame" : "the backup ends before its End frame");
                }

                return;
            }

            if (result.IsCanceled)
            {
                throw new OperationCanceledException("The restore's source canceled the read.");
            }
        }
    }

    private void ReadStreamHeader(ReadOnlySequence<byte> header)
    {
        Span<byte> bytes = stackalloc byte[BackupFormat.StreamHeaderSize];
        header.CopyTo(bytes);
        if (BackupFormat.CheckStreamHeader(bytes, out _version) is { } problem)
        {
            Corrupt(problem);
        }

        _offset = BackupFormat.StreamHeaderSize;
    }

    /// <summary>Reads and handles one whole frame if the reader holds it; false (nothing consumed) if not.</summary>
    private bool TryReadFrame(ref SequenceReader<byte> reader)
    {
        if (reader.Remaining < BackupFormat.FrameHeaderSize)
        {
            return false;
        }

        if (_ended)
        {
            Corrupt("bytes follow the End frame");
        }

        Span<byte> header = stackalloc byte[BackupFormat.FrameHeaderSize];
        reader.TryCopyTo(header);
        uint type = BinaryPrimitives.ReadUInt32LittleEndian(header);
        uint index = BinaryPrimitives.ReadUInt32LittleEndian(header[4..]);
        int length = BinaryPrimitives.ReadInt32LittleEndian(header[8..]);
        if (length is < 0 or > BackupFormat.MaxPayload)
        {
            Corrupt($"a frame claims {length} bytes (at most {BackupFormat.MaxPayload})");
        }

        if (reader.Remaining < BackupFormat.FrameHeaderSize + length + BackupFormat.FrameTrailerSize)
        {
            return false;
        }

        reader.Advance(BackupFormat.FrameHeaderSize);
        Span<byte> payload = _payload.AsSpan(0, length);
        reader.TryCopyTo(payload);
        reader.Advance(length);
        Span<byte> trailer = stackalloc byte[BackupFormat.FrameTrailerSize];
        reader.TryCopyTo(trailer);
        reader.Advance(BackupFormat.FrameTrailerSize);
        uint checksum = Crc32C.Finish(Crc32C.Append(Crc32C.Append(Crc32C.Seed, header), payload));
        if (BinaryPrimitives.ReadUInt32LittleEndian(trailer) != checksum)
        {
            Corrupt("a frame fails its checksum");
        }

        if (index != _nextIndex)
        {
            Corrupt($"frame {index} found where frame {_nextIndex} belongs: frames are missing or out of order");
        }

        Handle((BackupFormat.FrameType)type, payload);
        _nextIndex++;
        _offset += BackupFormat.FrameHeaderSize + length + BackupFormat.FrameTrailerSize;
        return true;
    }

    private void Handle(BackupFormat.FrameType type, ReadOnlySpan<byte> payload)
    {
        if (!_begun && type != BackupFormat.FrameType.Begin)
        {
            Corrupt($"the backup starts with a {type} frame instead of Begin");
        }

        switch (type)
        {
            case BackupFormat.FrameType.Begin when !_begun
                && payload.Length == (_version >= 2 ? BackupFormat.BeginSize : BackupFormat.LegacyBeginSize):
                Begin(BackupFormat.Begin.Read(payload));
                break;
            case BackupFormat.FrameType.Chunk when payload.Length == BackupFormat.ChunkSize:
                StartChunk(payload);
                break;
            case BackupFormat.FrameType.ChunkData when _chunkWritten >= 0:
                WriteChunkData(payload);
                break;
            case BackupFormat.FrameType.Entries when payload.Length >= BackupFormat.EntriesHeaderSize
                && _large is null:
                EndChunks();
                ReadEntries(payload);
                break;
            case BackupFormat.FrameType.LargeEntry when payload.Length == BackupFormat.LargeEntrySize
                && _large is null:
                EndChunks();
                StartLargeEntry(payload);
                break;
            case BackupFormat.FrameType.EntryData when _large is not null:
                AddLargeEntryData(payload);
                break;
            case BackupFormat.FrameType.End when payload.Length == BackupFormat.EndSize && _large is null:
                EndChunks();
                End(BackupFormat.End.Read(payload));
                break;
            default:
                Corrupt($"an unexpected frame (type {(uint)type}, {payload.Length} bytes) at this place");
                break;
        }
    }

    private void Begin(BackupFormat.Begin begin)
    {
        _begin = begin;
        _begun = true;
        if (_source > 0)
        {
            BeginIncrement(begin);
            return;
        }

        long c = begin.CheckpointSequence;
        if (begin.Kind == BackupFormat.IncrementKind)
        {
            ThrowHelper.ThrowArgument("sources",
                "The first backup of a restore is an incremental backup: give the full backup first, then every "
                + "incremental backup in order.");
        }

        if (begin.Kind != BackupFormat.FullKind)
        {
            Corrupt($"the Begin frame names an unknown kind of backup ({begin.Kind})");
        }

        if (begin.DataFileVersion is < DataFileHeader.OldestReadableVersion or > DataFileHeader.FormatVersion
            || begin.Generation < 0 || c < 0 || begin.FirstEntry != c + 1 || begin.LastEntry < c
            || begin.ChunkCount < 0 || begin.ChunkBytes < 0
            || (begin.Generation == 0 && (begin.ChunkCount != 0 || c != 0))
            || (begin.Generation > 0 && begin.ChunkCount == 0)
            || begin.SegmentSize is < JournalOptions.MinSegmentSize or > JournalOptions.MaxSegmentSize)
        {
            Corrupt("the Begin frame describes an impossible backup");
        }

        _full = begin;
        _nextEntry = c + 1;
        _chainTimestamp = begin.CheckpointTimestamp;
        if (_options.ToSequence is long to)
        {
            if (to < c)
            {
                ThrowHelper.ThrowArgumentOutOfRange("options", to,
                    $"This backup's checkpoint holds everything up to {c}: it restores sequences {c} and later.");
            }

            _stopAfter = to;
        }

        if (begin.Generation > 0)
        {
            _data = _fileSystem.OpenFile(Path.Combine(_staging, DocumentStore.DataFileName), FileMode.CreateNew);
            _dataWriteBack = new WriteBackWindow(_data.WriteBack, WriteBackLimit);
        }
    }

    /// <summary>An incremental backup must continue exactly where the backups before it ended: at the next
    /// sequence, after the same commit (the time of its record; a backup of version 1 does not say it).</summary>
    private void BeginIncrement(BackupFormat.Begin begin)
    {
        if (begin.Kind == BackupFormat.FullKind)
        {
            ThrowHelper.ThrowArgument("sources",
                $"Backup {_source + 1} of the restore is a full backup: a restore reads one full backup, then "
                + "incremental backups in order.");
        }

        if (begin.Kind != BackupFormat.IncrementKind || begin.Generation != 0 || begin.ChunkCount != 0
            || begin.ChunkBytes != 0 || begin.FirstEntry != begin.CheckpointSequence + 1
            || begin.LastEntry < begin.CheckpointSequence)
        {
            Corrupt("a backup after the first is not a valid incremental backup");
        }

        if (begin.FirstEntry != _nextEntry)
        {
            ThrowHelper.ThrowArgument("sources",
                $"Backup {_source + 1} of the restore starts at sequence {begin.FirstEntry}, but the backups before it "
                + $"end at {_nextEntry - 1}: give the full backup first, then every incremental backup in order.");
        }

        long previous = begin.CheckpointSequence;
        if (begin.CheckpointTimestamp != 0 && _chainTimestamp != 0 && begin.CheckpointTimestamp != _chainTimestamp)
        {
            ThrowHelper.ThrowArgument("sources",
                $"Backup {_source + 1} of the restore does not continue the backups before it: it follows commit "
                + $"{previous} made at {Time(begin.CheckpointTimestamp)}, but the commit {previous} they hold was made "
                + $"at {Time(_chainTimestamp)}. It is a backup of another store, or of a copy of this store whose "
                + "history has since diverged.");
        }
    }

    private static string Time(long ticks) => new DateTimeOffset(ticks, TimeSpan.Zero).ToString("O",
        System.Globalization.CultureInfo.InvariantCulture);

    /// <summary>After the last source: the point in time asked for must lie within what the chain holds.</summary>
    private void CheckPointInTime()
    {
        long last = _nextEntry - 1;
        if (_options.ToSequence is long to && to > last)
        {
            ThrowHelper.ThrowArgumentOutOfRange("options", to,
                $"The backups restore sequences {_full.CheckpointSequence} to {last}.");
        }

        if (_options.ToTimestamp is { } at && _entriesRead == 0 && _full.CheckpointSequence > 0
            && at.UtcTicks < _begin.SnapshotTicks)
        {
            ThrowHelper.ThrowArgumentOutOfRange("options", at,
                $"These backups hold only a checkpoint, which may hold commits made up to "
                + $"{new DateTimeOffset(_begin.SnapshotTicks, TimeSpan.Zero):O}.");
        }
    }

    private void StartChunk(ReadOnlySpan<byte> payload)
    {
        long offset = BinaryPrimitives.ReadInt64LittleEndian(payload[8..]);
        long length = BinaryPrimitives.ReadInt64LittleEndian(payload[16..]);
        if (_chunksDone || (_chunkWritten >= 0 && _chunkWritten != _chunks[^1].Length)
            || _chunks.Count >= _begin.ChunkCount || offset < DataFileHeader.DataStart
            || offset % ChunkFormat.Alignment != 0 || length <= 0 || length > _begin.ChunkBytes - _chunkBytes)
        {
            Corrupt("a Chunk frame does not fit the backup's manifest");
        }

        foreach ((long other, long otherLength) in _chunks)
        {
            if (offset < other + otherLength && other < offset + length)
            {
                Corrupt($"the chunk at {offset} overlaps the one at {other}");
            }
        }

        _chunks.Add((offset, length));
        _chunkBytes += length;
        _chunkWritten = 0;
        _chunkSent = 0;
    }

    private void WriteChunkData(ReadOnlySpan<byte> payload)
    {
        (long offset, long length) = _chunks[^1];
        if (payload.Length == 0 || payload.Length > length - _chunkWritten)
        {
            Corrupt("chunk data runs past its chunk");
        }

        _data!.Write(payload, offset + _chunkWritten);
        _chunkWritten += payload.Length;

        // The chunk's bytes written since the last piece go to the disk once they make a piece or end the chunk. A
        // restore of a gigabyte otherwise leaves all of it dirty in the page cache (charged to a container's memory)
        // until the data file's sync at the end, which then sends it in one burst.
        long unsent = _chunkWritten - _chunkSent;
        if (unsent >= WriteBackPiece || _chunkWritten == length)
        {
            _dataWriteBack!.MakeRoom(unsent);
            _dataWriteBack.Start(offset + _chunkSent, unsent);
            _chunkSent = _chunkWritten;
        }
    }

    /// <summary>After the last chunk: checks that every chunk arrived whole, then writes the header slot that makes
    /// the backup's checkpoint current, and syncs the data file.</summary>
    private void EndChunks()
    {
        if (_chunksDone)
        {
            return;
        }

        if (_chunks.Count != _begin.ChunkCount || _chunkBytes != _begin.ChunkBytes
            || (_chunkWritten >= 0 && _chunkWritten != _chunks[^1].Length))
        {
            Corrupt($"the backup holds {_chunks.Count} of {_begin.ChunkCount} chunks ({_chunkBytes} of "
                + $"{_begin.ChunkBytes} bytes, the last one {_chunkWritten} bytes in)");
        }

        _chunksDone = true;
        if (_data is not null)
        {
            byte[] slot = new byte[DataFileHeader.SlotSize];
            new DataFileHeader(_begin.Generation, _begin.ChunkId, _begin.ChunkOffset, _begin.ChunkLength,
                _begin.CheckpointSequence).Write(slot);
            _data.Write(slot, DataFileHeader.SlotOffset(_begin.Generation));
            _data.Sync();
        }

        _fileSystem.SyncDirectory(_staging);
        var journalOptions = new JournalOptions
        {
            SegmentSize = _begin.SegmentSize,
            TimeProvider = _clock,
            FileSystem = _fileSystem,
            NewJournalFirstSequence = _begin.CheckpointSequence + 1,
            NewJournalPreviousTimestamp = _begin.CheckpointTimestamp,
        };
        _journal = WriteAheadJournal.Open(Path.Combine(_staging, DocumentStore.JournalFolderName), journalOptions);
    }

    private void ReadEntries(ReadOnlySpan<byte> payload)
    {
        long record = BinaryPrimitives.ReadInt64LittleEndian(payload);
        long timestamp = BinaryPrimitives.ReadInt64LittleEndian(payload[8..]);
        long first = BinaryPrimitives.ReadInt64LittleEndian(payload[16..]);
        int count = BinaryPrimitives.ReadInt32LittleEndian(payload[24..]);
        if (count <= 0)
        {
            Corrupt("an Entries frame holds no entry");
        }

        int at = BackupFormat.EntriesHeaderSize;
        for (int i = 0; i < count; i++)
        {
            if (payload.Length - at < 4)
            {
                Corrupt("an Entries frame ends inside an entry");
            }

            int length = BinaryPrimitives.ReadInt32LittleEndian(payload[at..]);
            if (length < 0 || length > payload.Length - at - 4)
            {
                Corrupt("an entry runs past its Entries frame");
            }

            AddEntry(record, timestamp, first + i, payload.Slice(at + 4, length));
            at += 4 + length;
        }

        if (at != payload.Length)
        {
            Corrupt("an Entries frame holds bytes after its entries");
        }
    }

    private void StartLargeEntry(ReadOnlySpan<byte> payload)
    {
        int length = BinaryPrimitives.ReadInt32LittleEndian(payload[24..]);
        if (length <= BackupFormat.LargeEntryThreshold || length > _begin.SegmentSize)
        {
            Corrupt($"a large entry of {length} bytes");
        }

        _large = ArrayPool<byte>.Shared.Rent(length);
        _largeLength = length;
        _largeFilled = 0;
        _largeSequence = BinaryPrimitives.ReadInt64LittleEndian(payload[16..]);
        _largeTimestamp = BinaryPrimitives.ReadInt64LittleEndian(payload[8..]);
        _largeRecord = BinaryPrimitives.ReadInt64LittleEndian(payload);
    }

    private void AddLargeEntryData(ReadOnlySpan<byte> payload)
    {
        if (payload.Length == 0 || payload.Length > _largeLength - _largeFilled)
        {
            Corrupt("large entry data runs past its entry");
        }

        payload.CopyTo(_large.AsSpan(_largeFilled));
        _largeFilled += payload.Length;
        if (_largeFilled == _largeLength)
        {
            byte[] large = _large!;
            _large = null;
            try
            {
                AddEntry(_largeRecord, _largeTimestamp, _largeSequence, large.AsSpan(0, _largeLength));
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(large);
            }
        }
    }

    /// <summary>Collects one entry into its record; a new record first appends the previous one.</summary>
    private void AddEntry(long record, long timestamp, long sequence, ReadOnlySpan<byte> data)
    {
        if (sequence != _nextEntry || sequence > _begin.LastEntry)
        {
            Corrupt($"entry {sequence} found where entry {_nextEntry} belongs");
        }

        if (record != _record)
        {
            if (record != sequence || timestamp < _lastTimestamp)
            {
                Corrupt($"entry {sequence} starts a record at {record} stamped {timestamp}");
            }

            AppendRecord();
            _record = record;
            _recordTimestamp = timestamp;
            _lastTimestamp = timestamp;
            _chainTimestamp = timestamp;
        }
        else if (timestamp != _recordTimestamp)
        {
            Corrupt($"entry {sequence} carries another time than its record");
        }

        if (_entriesRead == 0 && _options.ToTimestamp is { } at && _full.CheckpointSequence > 0
            && timestamp > at.UtcTicks)
        {
            ThrowHelper.ThrowArgumentOutOfRange("options", at,
                $"This backup's checkpoint may hold commits made after {at:O}: its first journal entry is from "
                + $"{new DateTimeOffset(timestamp, TimeSpan.Zero):O}.");
        }

        _nextEntry++;
        _entriesRead++;
        _sourceEntries++;
        if (sequence > _stopAfter || (_options.ToTimestamp is { } until && timestamp > until.UtcTicks))
        {
            _stopAfter = Math.Min(_stopAfter, sequence - 1);
            return;
        }

        byte[] copy = ArrayPool<byte>.Shared.Rent(Math.Max(data.Length, 1));
        data.CopyTo(copy);
        _recordEntries.Add((copy, data.Length));
    }

    /// <summary>Appends the collected entries of the current record as one journal record, stamped with its
    /// original time.</summary>
    private void AppendRecord()
    {
        if (_recordEntries.Count == 0)
        {
            return;
        }

        try
        {
            var entries = new ReadOnlyMemory<byte>[_recordEntries.Count];
            for (int i = 0; i < entries.Length; i++)
            {
                entries[i] = _recordEntries[i].Bytes.AsMemory(0, _recordEntries[i].Length);
            }

            _clock.Ticks = _recordTimestamp;
            long first;
            try
            {
                first = _journal!.Append(entries);
            }
            catch (StoreFullException full)
            {
                // A restore fails on a full disk as on any other failed write: an IOException, and nothing is left.
                throw new IOException(
                    $"The disk is full: the restored store's journal could not grow ({full.InnerException?.Message})",
                    full.InnerException);
            }

            if (first != _record)
            {
                Corrupt($"the record of entry {_record} landed at {first}");
            }

            _entriesRestored += entries.Length;
        }
        finally
        {
            ReleaseRecord();
        }
    }

    private void ReleaseRecord()
    {
        foreach ((byte[] bytes, _) in _recordEntries)
        {
            ArrayPool<byte>.Shared.Return(bytes);
        }

        _recordEntries.Clear();
    }

    private void End(BackupFormat.End end)
    {
        if (end.LastEntry != _begin.LastEntry || end.Entries != _sourceEntries
            || _nextEntry != _begin.LastEntry + 1 || end.ChunkBytes != _begin.ChunkBytes || end.Frames != _nextIndex)
        {
            Corrupt($"the End frame's counts ({end.Entries} entries to {end.LastEntry}, {end.Frames} frames) "
                + $"disagree with what the backup holds ({_sourceEntries} entries to {_nextEntry - 1}, "
                + $"{_nextIndex} frames)");
        }

        _ended = true;
    }

    /// <summary>Makes the restored journal durable and closes both files.</summary>
    private void Finish()
    {
        AppendRecord(); // the last record of the last backup
        _journal!.Sync();
        _data?.Sync();
        CloseFiles();
        _fileSystem.SyncDirectory(_staging);
    }

    [System.Diagnostics.CodeAnalysis.DoesNotReturn]
    private void Corrupt(string reason) => throw new BackupCorruptedException(_offset,
        _source == 0 ? reason : $"{reason} (in backup {_source + 1} of the restore)");
}
