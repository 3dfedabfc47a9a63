using System.Diagnostics;
using System.Globalization;
using System.Text;

namespace Folio.CrashHost;

/// <summary>
/// The memory test's workload, run alone in this process so no other test's allocations blur its resident set:
/// writes <c>megabytes</c> of ~1 KiB documents through a store whose page cache is <c>cacheMiB</c>, checkpointing
/// every 8 MiB of journal, then reads every document back in a scattered order and once more as one range. It samples
/// the resident set every 1,000 operations and the live managed heap (after a checkpoint of everything written so far
/// and a full collection) halfway through the writes and after them, and prints <c>RSS &lt;after open&gt; &lt;peak
/// while writing&gt; &lt;live heap halfway&gt; &lt;live heap after the writes&gt; &lt;resident before the reads&gt;
/// &lt;peak while reading&gt; &lt;documents read&gt;</c> (bytes).
/// </summary>
public static class MemoryWorkload
{
    public const long CheckpointThreshold = 8L << 20;

    public static async Task<int> RunAsync(string folder, int megabytes, int cacheMiB)
    {
        var options = new DocumentStoreOptions
        {
            Durability = DurabilityMode.Buffered,
            CacheSize = (long)cacheMiB << 20,
            SegmentSize = CheckpointThreshold,
            MaxDocumentSize = 64 * 1024,
            CheckpointThreshold = CheckpointThreshold,
            CollectionName = static _ => "docs",
        };
        int documents = megabytes * 1024;
        using var process = Process.GetCurrentProcess();
        long afterOpen;
        long writing = 0;
        long liveHalfway = 0;
        long liveAfterWrites;
        long beforeReads;
        long reading = 0;
        long read = 0;
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            Console.Error.WriteLine("READY");
            afterOpen = Sample(process, ref writing);
            for (int start = 0; start < documents; start += 500)
            {
                var batch = new CommitBatch();
                for (int i = start; i < Math.Min(documents, start + 500); i++)
                {
                    batch.Put("docs", Id(i), Json(i));
                }

                await store.WriteAsync(batch).ConfigureAwait(false);
                if (start % 1000 == 0)
                {
                    Sample(process, ref writing);
                }

                if (start == documents / 2 / 500 * 500)
                {
                    liveHalfway = await LiveHeapAfterCheckpointAsync(store).ConfigureAwait(false);
                }
            }

            liveAfterWrites = await LiveHeapAfterCheckpointAsync(store).ConfigureAwait(false);
            beforeReads = Sample(process, ref reading);
            for (int n = 0; n < documents; n++)
            {
                int i = (int)((n * 7919L) % documents);
                StoredDocument document = store.Get("docs", Id(i)) ?? throw new InvalidOperationException(Id(i));
                if (document.Json.Length != Json(i).Length)
                {
                    throw new InvalidOperationException($"{Id(i)} has {document.Json.Length} bytes");
                }

                read++;
                if (n % 1000 == 0)
                {
                    Sample(process, ref reading);
                }
            }

            await using DocumentSession session = store.OpenSession();
            session.TrackQueryResults = false; // a read-only scan: tracked results would stay until the dispose
            int next = 0;
            await foreach (Document document in session.QueryByRangeAsync<Document>(null, null).ConfigureAwait(false))
            {
                if (document.Key != Id(next++))
                {
                    throw new InvalidOperationException($"range: {document.Key} where {Id(next - 1)} belongs");
                }

                read++;
                if (next % 1000 == 0)
                {
                    Sample(process, ref reading);
                }
            }
        }

        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"RSS {afterOpen} {writing} {liveHalfway} {liveAfterWrites} {beforeReads} {reading} {read}"));
        return 0;
    }

    /// <summary>The live managed heap once a checkpoint has taken every commit so far: the same point of the
    /// checkpoint cycle for both samples, however far behind the background checkpoints ran on a busy machine (the
    /// versions since the last checkpoint are bounded by the backpressure, not by the data written).</summary>
    private static async Task<long> LiveHeapAfterCheckpointAsync(DocumentStore store)
    {
        await store.CheckpointAsync().ConfigureAwait(false);
        return GC.GetTotalMemory(forceFullCollection: true);
    }

    private static long Sample(Process process, ref long peak)
    {
        process.Refresh();
        long now = process.WorkingSet64;
        peak = Math.Max(peak, now);
        return now;
    }

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"docs/{i:D8}");

    private static byte[] Json(int i) => Encoding.UTF8.GetBytes(
        $"{{\"Key\":\"{Id(i)}\",\"Body\":\"{new string((char)('a' + (i % 26)), 980)}\"}}");

    private sealed class Document
    {
        public string Key { get; set; } = "";

        public string Body { get; set; } = "";
    }
}
