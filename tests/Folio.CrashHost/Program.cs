using Folio;
using System.Text;
using Folio.Journal;
using Folio.CrashHost;
using Folio.Transactions;

// The child of the crash tests: commits durably from several concurrent writers until it is killed, printing one
// line per acknowledged batch only after its commit returned. The parent kills it with SIGKILL at a random moment,
// reopens the folder and checks every acknowledged batch. Two workloads: the journal and merger alone (one document
// per batch, "ACK <sequence> <id>"), and with a fourth argument "store" a document store, whose reopen replays the
// journal into the index (StoreCrashWorkload's batches, "ACK <sequence> <writer> <batch>"); a fifth argument
// "checkpoints" makes that store checkpoint and purge its journal every few milliseconds while it commits. For the
// journal workload a number as the fourth argument sets the merger's MaxGroupsInFlight (default 1). A first argument
// "fill" runs the full-disk workload (DiskFullWorkload) instead, and "api" and "bank" the public-API workloads
// (PublicApiWorkload; "bank" takes "sliced" or "whole" after its folder: its checkpoints in slices or not).
if (args is ["memory", string memoryFolder, string megabytes, string cacheMiB])
{
    // Not a crash workload: the memory test's (MemoryWorkload), alone in a process of its own.
    return await MemoryWorkload.RunAsync(memoryFolder,
        int.Parse(megabytes, System.Globalization.CultureInfo.InvariantCulture),
        int.Parse(cacheMiB, System.Globalization.CultureInfo.InvariantCulture));
}

if (args is ["collections", string collectionsFolder, string collections, string perCollection])
{
    // Not a crash workload: the many-collections memory test's (CollectionsWorkload), alone in a process of its own.
    return await CollectionsWorkload.RunAsync(collectionsFolder,
        int.Parse(collections, System.Globalization.CultureInfo.InvariantCulture),
        int.Parse(perCollection, System.Globalization.CultureInfo.InvariantCulture));
}

if (args is ["fill", string fillFolder, string fillTag, string fillWriters, string capacity])
{
    // The full-disk crash test's workload (DiskFullWorkload).
    return await DiskFullWorkload.RunAsync(fillFolder, fillTag,
        int.Parse(fillWriters, System.Globalization.CultureInfo.InvariantCulture),
        long.Parse(capacity, System.Globalization.CultureInfo.InvariantCulture));
}

if (args is ["bank", string bankFolder, string bankSliced])
{
    // The public-API crash test's transfers between accounts (PublicApiWorkload.RunBankAsync).
    return await PublicApiWorkload.RunBankAsync(bankFolder, bankSliced == "sliced");
}

if (args is ["api", string apiFolder, string firstK, string backups])
{
    // The public-API crash test's workload (PublicApiWorkload).
    return await PublicApiWorkload.RunAsync(apiFolder,
        long.Parse(firstK, System.Globalization.CultureInfo.InvariantCulture), backups);
}

if (args.Length < 2)
{
    Console.Error.WriteLine(
        "usage: Folio.CrashHost <folder> <run-tag> [writers] [store [checkpoints] | groups-in-flight]\n"
        + "       Folio.CrashHost memory <folder> <megabytes> <cache MiB>\n"
        + "       Folio.CrashHost collections <folder> <collections> <documents per collection>\n"
        + "       Folio.CrashHost fill <folder> <run-tag> <writers> <capacity bytes, 0 for the real disk>\n"
        + "       Folio.CrashHost api <folder> <first operation> <backup folder>\n"
        + "       Folio.CrashHost bank <folder>");
    return 2;
}

string folder = args[0];
string tag = args[1];
int writers = args.Length > 2 ? int.Parse(args[2], System.Globalization.CultureInfo.InvariantCulture) : 8;
if (args.Length > 3 && args[3] == "store")
{
    return await RunStoreAsync(folder, tag, writers, args.Length > 4 && args[4] == "checkpoints");
}

using var journal = WriteAheadJournal.Open(folder, new JournalOptions
{
    SegmentSize = 256 * 1024, MinFillPiece = 8 * 1024, MaxFillPiece = 32 * 1024,
});
int groupsInFlight = args.Length > 3 ? int.Parse(args[3], System.Globalization.CultureInfo.InvariantCulture) : 1;
using var merger = new TransactionMerger(journal, new VersionTable(),
    new TransactionMergerOptions { MaxGroupsInFlight = groupsInFlight });
var output = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false)) { AutoFlush = true };
object gate = new();
Console.Error.WriteLine($"READY {journal.CommittedSequence}");
var tasks = Enumerable.Range(0, writers).Select(w => Task.Run(async () =>
{
    for (long i = 0; ; i++)
    {
        string id = $"{tag}-{w}-{i}";
        CommitResult result = await merger.CommitAsync(new CommitBatch().Put("crash", id, CrashPayload.For(id)));
        lock (gate)
        {
            output.WriteLine($"ACK {result.Sequence} {id}");
        }
    }
})).ToArray();
await Task.WhenAll(tasks);
return 0;

static async Task<int> RunStoreAsync(string folder, string tag, int writers, bool checkpoints)
{
    DocumentStoreOptions options = StoreCrashWorkload.Options();
    if (checkpoints)
    {
        options.CheckpointInterval = TimeSpan.FromMilliseconds(20);
        options.CheckpointThreshold = 256 * 1024;
        options.MinCheckpointSliceBytes = 1; // checkpoints that supersede a quarter of the leaves go in slices
    }

    using var store = DocumentStore.Open(folder, options);
    var output = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false)) { AutoFlush = true };
    object gate = new();
    Console.Error.WriteLine($"READY {store.LastCommittedSequence}");
    var tasks = Enumerable.Range(0, writers).Select(w => Task.Run(async () =>
    {
        for (long k = 0; ; k++)
        {
            CommitResult result = await store.Merger.CommitAsync(
                StoreCrashWorkload.ToCommitBatch(StoreCrashWorkload.Batch(tag, w, k)));
            lock (gate)
            {
                output.WriteLine($"ACK {result.Sequence} {w} {k}");
            }
        }
    })).ToArray();
    await Task.WhenAll(tasks);
    return 0;
}
