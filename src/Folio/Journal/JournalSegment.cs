using Folio.Storage;

namespace Folio.Journal;

/// <summary>
/// One segment file of the journal, mapped read-only for readers.
/// <para>
/// Protocol. The <b>writer</b> (the journal, under its write lock) appends records with positional writes and owns
/// <see cref="WrittenLength"/>, <see cref="FirstTimestamp"/> and the seal fields. The <b>syncer</b> (the journal,
/// after fdatasync) publishes <see cref="CommittedLength"/> with a release write: every byte below it is durable and
/// never changes again. <b>Readers</b> read <see cref="CommittedLength"/> with an acquire read and then read bytes
/// below it through the mapping: no lock, no system call, and they never write segment state other than the
/// reference count and the reader-owned <see cref="Index"/>.
/// </para>
/// <para>
/// Files. Only the active segment keeps its file open (for writes and fdatasync); a sealed segment's file is closed
/// once it is synced and no sync can still be using it, and readers use only the mapping, which holds no descriptor.
/// </para>
/// <para>
/// Lifetime. The journal's segment list holds one reference. A reader takes one with <see cref="TryAcquire"/> (a CAS
/// that fails once the count reached zero) before touching the mapping, and releases it when it moves on. Purge
/// marks the segment for deletion and drops the list's reference; whoever drops the last reference unmaps the
/// file, closes it, and then deletes it. A file is therefore never deleted while open or mapped (required on
/// Windows, and it keeps a purged segment readable by the readers already inside it).
/// </para>
/// </summary>
internal sealed class JournalSegment
{
    private IStorageFile? _file;
    private readonly StorageMapping _mapping;
    private readonly Action<JournalSegment>? _deleteFile;
    private PaddedCounter _referenceCount = new() { Value = 1 };
    private int _deleteOnRelease;
    private long _committedLength;
    private long _firstTimestamp = long.MaxValue;

    public JournalSegment(IStorageFile file, long firstSequence, long capacity, long dataLength, Action<JournalSegment>? deleteFile)
    {
        _file = file;
        Path = file.Path;
        _deleteFile = deleteFile;
        FirstSequence = firstSequence;
        Capacity = capacity;
        WrittenLength = dataLength;
        _committedLength = dataLength;
        _mapping = file.MapReadOnly(capacity);
        Index = new SegmentIndex(this);
    }

    /// <summary>The full path of the file.</summary>
    public string Path { get; }

    /// <summary>The sequence number of the first entry this segment holds (or will hold).</summary>
    public long FirstSequence { get; }

    /// <summary>The file size: records may use bytes up to here.</summary>
    public long Capacity { get; }

    /// <summary>Writer-owned: the end of the last record written (durable or not).</summary>
    public long WrittenLength { get; set; }

    /// <summary>Writer-owned after sealing: the sequence number of the last entry, or FirstSequence - 1 when empty.</summary>
    public long LastSequence { get; set; }

    /// <summary>Writer-owned: the timestamp of the last record, or <see cref="long.MinValue"/> when empty.</summary>
    public long LastTimestamp { get; set; } = long.MinValue;

    /// <summary>The timestamp of the first record, or <see cref="long.MaxValue"/> while the segment is empty. Set once.</summary>
    public long FirstTimestamp
    {
        get => Volatile.Read(ref _firstTimestamp);
        set => Volatile.Write(ref _firstTimestamp, value);
    }

    /// <summary>Bytes below this offset are durable and immutable. Release-written by the syncer, acquire-read by readers.</summary>
    public long CommittedLength => Volatile.Read(ref _committedLength);

    /// <summary>The lazily built sequence/timestamp index, shared by all readers.</summary>
    public SegmentIndex Index { get; }

    /// <summary>The writable file, for the writer; closed once the segment is sealed (readers use the mapping).</summary>
    public IStorageFile File => _file ?? throw new ObjectDisposedException(Path, "The segment is sealed; its file is closed.");

    /// <summary>Closes the writable file of a sealed, synced segment. The mapping stays valid. Idempotent.</summary>
    public void CloseFile() => Interlocked.Exchange(ref _file, null)?.Dispose();

    /// <summary>Committed bytes, for a reader holding a reference.</summary>
    public ReadOnlySpan<byte> Span(long offset, long length) => _mapping.Span(offset, checked((int)length));

    /// <summary>Publishes a new committed length; only ever grows.</summary>
    public void PublishCommittedLength(long length)
    {
        if (length > Volatile.Read(ref _committedLength))
        {
            Volatile.Write(ref _committedLength, length);
        }
    }

    /// <summary>Takes a reference unless the segment was already released for good.</summary>
    public bool TryAcquire()
    {
        int count = Volatile.Read(ref _referenceCount.Value);
        while (count > 0)
        {
            int seen = Interlocked.CompareExchange(ref _referenceCount.Value, count + 1, count);
            if (seen == count)
            {
                return true;
            }

            count = seen;
        }

        return false;
    }

    /// <summary>Drops a reference; the last one closes the file and deletes it when it was purged.</summary>
    public void Release()
    {
        int count = Interlocked.Decrement(ref _referenceCount.Value);
        if (count == 0)
        {
            _mapping.Dispose();
            CloseFile();
            if (Volatile.Read(ref _deleteOnRelease) != 0)
            {
                _deleteFile?.Invoke(this);
            }
        }
    }

    /// <summary>Marks the segment so that the last release deletes its file.</summary>
    public void MarkForDeletion() => Volatile.Write(ref _deleteOnRelease, 1);

    /// <summary>The current reference count (tests and diagnostics).</summary>
    internal int ReferenceCount => Volatile.Read(ref _referenceCount.Value);

    /// <summary>
    /// The reference count alone on its cache line: readers on every core CAS it when they enter and leave the
    /// segment, and it must not evict the read-mostly fields (committed length, timestamps) from the other cores.
    /// </summary>
    [System.Runtime.InteropServices.StructLayout(System.Runtime.InteropServices.LayoutKind.Explicit, Size = 192)]
    private struct PaddedCounter
    {
        [System.Runtime.InteropServices.FieldOffset(64)]
        public int Value;
    }

    public override string ToString() => $"{System.IO.Path.GetFileName(Path)} (committed {CommittedLength} of {Capacity} bytes)";
}
