using System.Buffers.Binary;
using System.IO.Pipelines;

namespace Folio.Journal;

public sealed partial class JournalReader
{
    /// <summary>The bytes before each entry's data in <see cref="CopyToAsync"/>'s stream.</summary>
    public const int StreamedEntryHeaderSize = 20;

    private const int StreamFlushThreshold = 64 * 1024;

    /// <summary>
    /// Copies committed entries, from <see cref="NextSequence"/> through <paramref name="throughSequence"/>, straight
    /// from the journal's mapping into <paramref name="destination"/> (a socket, Kestrel's <c>BodyWriter</c>), each as
    /// <c>u64 sequence, i64 timestamp (UTC ticks), u32 length, the entry's bytes</c> (little-endian;
    /// <see cref="StreamedEntryHeaderSize"/> bytes before the data). It flushes when 64 KiB are pending or when no
    /// more entries are committed yet (then it waits for the next commit, never polling), and honours the flush's
    /// result: a slow reader holds it at the pipe's threshold, and a reader that completed ends it.
    /// </summary>
    /// <param name="destination">Where the entries go; not completed by this call.</param>
    /// <param name="throughSequence">The last entry to copy; <see cref="long.MaxValue"/> to follow the journal until
    /// the token fires or the journal is disposed.</param>
    /// <param name="cancellationToken">Stops the copy (with <see cref="OperationCanceledException"/>).</param>
    /// <returns>The entries copied.</returns>
    /// <exception cref="JournalPositionPurgedException">The next entry's segment was purged.</exception>
    /// <exception cref="JournalCorruptedException">A committed record fails its checksum.</exception>
    public async Task<long> CopyToAsync(PipeWriter destination, long throughSequence = long.MaxValue,
        CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(destination);
        ObjectDisposedException.ThrowIf(_disposed, this);
        long copied = 0;
        while (_nextSequence <= throughSequence)
        {
            (int entries, long bytes) = CopyCommitted(destination, throughSequence);
            copied += entries;
            bool caughtUp = entries == 0 || bytes < StreamFlushThreshold;
            if (bytes > 0 || caughtUp)
            {
                FlushResult flushed = await destination.FlushAsync(cancellationToken).ConfigureAwait(false);
                if (flushed.IsCanceled)
                {
                    throw new OperationCanceledException("The destination canceled the flush.");
                }

                if (flushed.IsCompleted)
                {
                    return copied;
                }
            }

            if (caughtUp && _nextSequence <= throughSequence
                && !await WaitToReadAsync(cancellationToken).ConfigureAwait(false))
            {
                return copied; // the journal was disposed
            }
        }

        return copied;
    }

    /// <summary>Copies what is committed now, up to the flush threshold (synchronously: the entries are spans into
    /// the mapping, valid until the next read).</summary>
    private (int Entries, long Bytes) CopyCommitted(PipeWriter destination, long throughSequence)
    {
        int entries = 0;
        long bytes = 0;
        while (bytes < StreamFlushThreshold && _nextSequence <= throughSequence && TryRead(out JournalEntry entry))
        {
            int length = StreamedEntryHeaderSize + entry.Data.Length;
            Span<byte> target = destination.GetSpan(length);
            BinaryPrimitives.WriteInt64LittleEndian(target, entry.Sequence);
            BinaryPrimitives.WriteInt64LittleEndian(target[8..], entry.TimestampTicks);
            BinaryPrimitives.WriteInt32LittleEndian(target[16..], entry.Data.Length);
            entry.Data.CopyTo(target[StreamedEntryHeaderSize..]);
            destination.Advance(length);
            bytes += length;
            entries++;
        }

        return (entries, bytes);
    }
}
