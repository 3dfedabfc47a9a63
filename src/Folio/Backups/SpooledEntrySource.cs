using System.Buffers;
using System.Buffers.Binary;
using Folio.Journal;

namespace Folio.Backups;

/// <summary>
/// Journal entries read from a store's files (<see cref="JournalFollower"/>) into a temporary file, then read back by
/// a backup. A backup of a store another process holds copies its pinned checkpoint's chunks before the entries after
/// it, and the writer may purge those entries meanwhile (after its next checkpoints), so they are taken first, while
/// the journal holds them, and kept on disk rather than in memory (they are as large as the journal since the
/// checkpoint). One backup owns it. The file has no name once created on Unix (unlinked, used through its handle)
/// and goes when its handle closes on Windows, so even a killed backup leaves none behind.
/// <para>
/// Layout of each spooled entry (little-endian): sequence (i64), its record's first sequence (i64), the record's
/// timestamp (i64), length n (i32), then n bytes.
/// </para>
/// </summary>
internal sealed class SpooledEntrySource : IBackupEntrySource, IDisposable
{
    private const int EntryHeaderSize = 28;

    /// <summary>Entries a read of the journal files takes at most; a read that returns fewer has caught up.</summary>
    private const int ReadBatch = 4096;

    private readonly FileStream _file;
    private readonly byte[] _header = new byte[EntryHeaderSize];
    private byte[] _buffer = [];
    private long _next;

    private SpooledEntrySource(FileStream file, long first, long last)
    {
        _file = file;
        _next = first;
        LastSequence = last;
    }

    /// <summary>The last entry spooled (the first less 1 when there was none).</summary>
    public long LastSequence { get; }

    public long NextSequence => _next;

    /// <summary>Spools the complete, durable entries the journal folder's files hold from
    /// <paramref name="fromSequence"/> on, up to where a read finds no more. Throws
    /// <see cref="JournalPositionPurgedException"/> when the journal no longer holds
    /// <paramref name="fromSequence"/>, and, for an <paramref name="increment"/>,
    /// <see cref="ArgumentOutOfRangeException"/> when <paramref name="fromSequence"/> is past the last commit + 1 (an
    /// increment that would skip commits not yet made).</summary>
    public static SpooledEntrySource Spool(string journalFolder, long fromSequence, bool increment,
        CancellationToken cancellationToken)
    {
        string path = Path.Combine(Path.GetTempPath(), $"folio-backup-{Guid.NewGuid():N}.spool");
        var file = new FileStream(path, FileMode.CreateNew, FileAccess.ReadWrite, FileShare.None, 1 << 16,
            FileOptions.DeleteOnClose);
        try
        {
            if (!OperatingSystem.IsWindows())
            {
                // Unlinked at once, read and written through the handle: a killed process leaves nothing behind (on
                // Windows the system deletes it when the handle closes, however the process ends).
                File.Delete(path);
            }

            long last = fromSequence - 1;
            using (var follower = new JournalFollower(journalFolder, fromSequence))
            {
                var entries = new List<JournalEntryCopy>();
                byte[] header = new byte[EntryHeaderSize];
                while (true)
                {
                    cancellationToken.ThrowIfCancellationRequested();
                    entries.Clear();
                    int read = follower.ReadAvailable(entries, ReadBatch);
                    foreach (JournalEntryCopy entry in entries)
                    {
                        BinaryPrimitives.WriteInt64LittleEndian(header, entry.Sequence);
                        BinaryPrimitives.WriteInt64LittleEndian(header.AsSpan(8), entry.RecordFirstSequence);
                        BinaryPrimitives.WriteInt64LittleEndian(header.AsSpan(16), entry.TimestampTicks);
                        BinaryPrimitives.WriteInt32LittleEndian(header.AsSpan(24), entry.Data.Length);
                        file.Write(header);
                        file.Write(entry.Data);
                        last = entry.Sequence;
                    }

                    if (read == 0 || !follower.HitLimit)
                    {
                        break; // caught up with the writer: the backup ends here
                    }
                }

                long end = Math.Max(follower.RecordsEnd, 1);
                if (increment && fromSequence > end)
                {
                    ThrowHelper.ThrowArgumentOutOfRange(nameof(fromSequence), fromSequence,
                        $"The store's last commit is {end - 1}; a backup from its files starts at most at {end}.");
                }
            }

            file.Flush();
            file.Position = 0;
            return new SpooledEntrySource(file, fromSequence, last);
        }
        catch
        {
            file.Dispose();
            throw;
        }
    }

    public bool TryRead(out ReadOnlySpan<byte> data, out long recordFirstSequence, out long timestampTicks)
    {
        data = default;
        recordFirstSequence = timestampTicks = 0;
        if (_next > LastSequence)
        {
            return false;
        }

        _file.ReadExactly(_header);
        long sequence = BinaryPrimitives.ReadInt64LittleEndian(_header);
        int length = BinaryPrimitives.ReadInt32LittleEndian(_header.AsSpan(24));
        if (sequence != _next || length < 0)
        {
            ThrowHelper.ThrowInvalidOperation($"The backup's spool of journal entries is damaged at entry {_next}.");
        }

        if (_buffer.Length < length)
        {
            if (_buffer.Length > 0)
            {
                ArrayPool<byte>.Shared.Return(_buffer);
            }

            _buffer = ArrayPool<byte>.Shared.Rent(length);
        }

        _file.ReadExactly(_buffer, 0, length);
        data = _buffer.AsSpan(0, length);
        recordFirstSequence = BinaryPrimitives.ReadInt64LittleEndian(_header.AsSpan(8));
        timestampTicks = BinaryPrimitives.ReadInt64LittleEndian(_header.AsSpan(16));
        _next++;
        return true;
    }

    public void Dispose()
    {
        _file.Dispose();
        if (_buffer.Length > 0)
        {
            ArrayPool<byte>.Shared.Return(_buffer);
            _buffer = [];
        }
    }
}
