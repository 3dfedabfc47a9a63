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

    public static JournalOptions Tiny(long segmentSize = 1024, TimeProvider? time = null) => new()
    {
        SegmentSize = segmentSize,
        TimeProvider = time ?? TimeProvider.System,
    };

    /// <summary>Deterministic entry bytes for (seed, sequence).</summary>
    public static byte[] Payload(int seed, long sequence, int length)
    {
        var bytes = new byte[length];
        var random = new Random(HashCode.Combine(seed, sequence));
        random.NextBytes(bytes);
        return bytes;
    }
}
