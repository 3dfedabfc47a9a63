using System.Globalization;
using System.Text;

namespace Folio.CrashHost;

/// <summary>
/// The many-collections memory test's workload, alone in this process so no other test's allocations blur the live
/// heap: writes <c>perCollection</c> small documents into each of <c>collections</c> collections (batches of 100
/// collections), checkpoints, writes one more document into every tenth collection, reopens the store and reads every
/// collection's documents back. Prints <c>LIVE &lt;after open&gt; &lt;after the writes&gt; &lt;after the checkpoint and
/// the writes after it&gt; &lt;after the reopen and the reads&gt; &lt;documents read&gt;</c>: the live managed heap
/// after a full collection, in bytes.
/// </summary>
public static class CollectionsWorkload
{
    public static async Task<int> RunAsync(string folder, int collections, int perCollection)
    {
        var options = new DocumentStoreOptions
        {
            Durability = DurabilityMode.Buffered,
            SegmentSize = 1 << 20,
            MinFillPiece = 16 * 1024,
            MaxFillPiece = 128 * 1024,
            MaxDocumentSize = 64 * 1024,
        };
        long afterOpen;
        long afterWrites;
        long afterCheckpoint;
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            Console.Error.WriteLine("READY");
            afterOpen = GC.GetTotalMemory(forceFullCollection: true);
            for (int start = 0; start < collections; start += 100)
            {
                var batch = new CommitBatch();
                for (int c = start; c < Math.Min(collections, start + 100); c++)
                {
                    for (int i = 0; i < perCollection; i++)
                    {
                        batch.Put(Collection(c), Id(i), Json(c, i));
                    }
                }

                await store.WriteAsync(batch).ConfigureAwait(false);
            }

            afterWrites = GC.GetTotalMemory(forceFullCollection: true);
            await store.CheckpointAsync().ConfigureAwait(false);
            var more = new CommitBatch();
            for (int c = 0; c < collections; c += 10)
            {
                more.Put(Collection(c), Id(perCollection), Json(c, perCollection));
            }

            await store.WriteAsync(more).ConfigureAwait(false);
            afterCheckpoint = GC.GetTotalMemory(forceFullCollection: true);
        }

        long read = 0;
        long afterReopen;
        await using (DocumentStore store = DocumentStore.Open(folder, options))
        {
            for (int c = 0; c < collections; c++)
            {
                int expected = perCollection + (c % 10 == 0 ? 1 : 0);
                int i = 0;
                foreach (StoredDocument document in store.Scan(Collection(c)))
                {
                    if (document.Id != Id(i) || !document.Json.Span.SequenceEqual(Json(c, i)))
                    {
                        throw new InvalidOperationException($"{Collection(c)}/{document.Id} where {Id(i)} belongs");
                    }

                    i++;
                    read++;
                }

                if (i != expected)
                {
                    throw new InvalidOperationException($"{Collection(c)} holds {i} documents, not {expected}");
                }
            }

            afterReopen = GC.GetTotalMemory(forceFullCollection: true);
        }

        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"LIVE {afterOpen} {afterWrites} {afterCheckpoint} {afterReopen} {read}"));
        return 0;
    }

    private static string Collection(int c) => string.Create(CultureInfo.InvariantCulture, $"tenant{c:D5}");

    private static string Id(int i) => string.Create(CultureInfo.InvariantCulture, $"doc{i:D3}");

    private static byte[] Json(int c, int i) => Encoding.UTF8.GetBytes(
        string.Create(CultureInfo.InvariantCulture, $"{{\"tenant\":{c},\"i\":{i}}}"));
}
