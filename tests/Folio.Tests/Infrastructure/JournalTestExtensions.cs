using Folio.Journal;

namespace Folio.Tests.Infrastructure;

internal static class JournalTestExtensions
{
    /// <summary>Appends <paramref name="batch"/> encoded as the merger writes it (one entry) and returns its
    /// sequence.</summary>
    public static long AppendBatch(this WriteAheadJournal journal, CommitBatch batch)
    {
        return journal.Append(Folio.Transactions.BatchEncoding.Encode(batch).Span);
    }

    /// <summary>Every committed entry from <paramref name="from"/> on, copied.</summary>
    public static List<(long Sequence, long Timestamp, byte[] Data)> ReadAll(this WriteAheadJournal journal, long from)
    {
        var result = new List<(long, long, byte[])>();
        using JournalReader reader = journal.OpenReader(from);
        while (reader.TryRead(out JournalEntry entry))
        {
            result.Add((entry.Sequence, entry.TimestampTicks, entry.Data.ToArray()));
        }

        return result;
    }

    /// <summary>The records of the segment file at <paramref name="path"/>, by their headers, from the first to the
    /// first place no header reads (offset and header each).</summary>
    public static List<(long Offset, JournalFormat.RecordHeader Header)> SegmentRecords(string path)
    {
        byte[] bytes = File.ReadAllBytes(path);
        var records = new List<(long, JournalFormat.RecordHeader)>();
        long at = JournalFormat.SegmentHeaderSize;
        while (at < bytes.Length
            && JournalFormat.TryReadRecordHeader(bytes.AsSpan((int)at), out JournalFormat.RecordHeader header))
        {
            records.Add((at, header));
            at += header.Length;
        }

        return records;
    }

    public static JournalOptions Tiny(long segmentSize = 1024, TimeProvider? time = null) => new()
    {
        SegmentSize = segmentSize,
        TimeProvider = time ?? TimeProvider.System,
        MinFillPiece = segmentSize / 4, // filled piece by piece, as a segment of the default size is
        MaxFillPiece = segmentSize / 2,
    };

    /// <summary>Entry bytes for (seed, sequence), the same in every run: not seeded through
    /// <see cref="HashCode.Combine{T1, T2}"/>, whose hashes change from process to process, so a test that tears a
    /// record finds the same bytes at the tear each time (a torn tail whose bytes were already zero is no
    /// tear).</summary>
    public static byte[] Payload(int seed, long sequence, int length)
    {
        var bytes = new byte[length];
        ulong mixed = ((ulong)(uint)seed * 0x9E3779B97F4A7C15UL) ^ ((ulong)sequence * 0xC2B2AE3D27D4EB4FUL);
        var random = new Random(unchecked((int)(mixed ^ (mixed >> 32))));
        random.NextBytes(bytes);
        return bytes;
    }
}
