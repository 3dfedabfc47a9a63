using System.Globalization;
using System.Text;
using Folio.Transactions;

namespace Folio.CrashHost;

/// <summary>
/// The document-store crash workload: what writer <c>w</c> commits as its batch <c>k</c> of run <c>tag</c>, a pure
/// function, so the parent knows both every batch the child acknowledged and the one batch per writer it may have
/// committed without acknowledging (a writer awaits each commit before starting the next).
/// <para>
/// Batch k of writer w puts <see cref="FreshPerBatch"/> ids never written before (<c>w{w}-{tag}-{n}</c>, so the live
/// documents lie all along the journal) and <see cref="HotPerBatch"/> of the writer's <see cref="HotIds"/> hot ids
/// (<c>w{w}-hot-{n}</c>, overwritten again and again, across runs too); every 8th batch (k mod 8 = 7) instead deletes
/// the ids the batch before it put.
/// </para>
/// </summary>
public static class StoreCrashWorkload
{
    public const string Collection = "crash";

    public const int FreshPerBatch = 24;

    public const int HotPerBatch = 8;

    public const int HotIds = 256;

    /// <summary>Puts per put batch.</summary>
    public const int BatchSize = FreshPerBatch + HotPerBatch;

    /// <summary>The store's options: small segments (a run's journal rotates through several), a page cache of four
    /// 16 KiB frames, so checkpointed stores are many times larger than their cache and every read of them goes
    /// through evictions, and chunks of at most 8 pages, so a kill can land between the chunks of a checkpoint.
    /// </summary>
    public static DocumentStoreOptions Options() => new()
    {
        SegmentSize = 1 << 20,
        MinFillPiece = 16 * 1024,
        MaxFillPiece = 128 * 1024,
        MaxDocumentSize = 64 * 1024,
        MaxGroupBytes = 512 * 1024,
        TestCacheBytes = 4 * 16 * 1024,
        PagesPerChunk = 8,
    };

    /// <summary>Whether batch <paramref name="k"/> deletes (the ids of batch k - 1) rather than puts.</summary>
    public static bool IsDelete(long k) => k % 8 == 7;

    /// <summary>The operations of batch <paramref name="k"/>: (id, document) for a put, (id, null) for a
    /// delete.</summary>
    public static List<(string Id, byte[]? Json)> Batch(string tag, int writer, long k)
    {
        bool delete = IsDelete(k);
        long source = delete ? k - 1 : k;
        var operations = new List<(string, byte[]?)>(BatchSize);
        for (int j = 0; j < FreshPerBatch; j++)
        {
            string id = string.Create(CultureInfo.InvariantCulture, $"w{writer}-{tag}-{(source * FreshPerBatch) + j}");
            operations.Add((id, delete ? null : Document(id, tag, k)));
        }

        for (int j = 0; j < HotPerBatch; j++)
        {
            string id = string.Create(CultureInfo.InvariantCulture,
                $"w{writer}-hot-{((source * HotPerBatch) + j) % HotIds}");
            operations.Add((id, delete ? null : Document(id, tag, k)));
        }

        return operations;
    }

    public static CommitBatch ToCommitBatch(List<(string Id, byte[]? Json)> operations)
    {
        var batch = new CommitBatch();
        foreach ((string id, byte[]? json) in operations)
        {
            if (json is null)
            {
                batch.Delete(Collection, id);
            }
            else
            {
                batch.Put(Collection, id, json);
            }
        }

        return batch;
    }

    private static byte[] Document(string id, string tag, long k) =>
        Encoding.UTF8.GetBytes(
            string.Create(CultureInfo.InvariantCulture,
            $"{{\"id\":\"{id}\",\"run\":\"{tag}\",\"batch\":{k},\"pad\":\"{new string('x', (int)(k % 97))}\"}}"));
}
