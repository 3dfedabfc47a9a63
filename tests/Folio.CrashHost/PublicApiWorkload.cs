using System.Globalization;
using System.Text;

namespace Folio.CrashHost;

/// <summary>
/// The public-API crash workload: writers call what applications call (<see cref="DocumentStore.PutAsync"/>,
/// <see cref="DocumentStore.WriteAsync"/> of a batch, <see cref="DocumentStore.DeleteAsync"/>, a session's
/// <see cref="DocumentSession.SaveChangesAsync"/>), while one more task takes full backups into files, compacts,
/// checkpoints and now and then scrubs the store (printing <c>UNHEALTHY</c> if a scrub finds a problem), back to
/// back. Operation <c>k</c> of writer <c>w</c> is a pure function of both (<see cref="Apply"/>), so the
/// parent can rebuild every writer's documents from the operations the child acknowledged. Every other run is
/// <see cref="DurabilityMode.Buffered"/> (<see cref="RunDurability"/>), which promises to survive a process crash too,
/// and in every run a third of the writers save their batches and sessions with the other durability.
/// <para>
/// Output: <c>ACK {writer} {k} {sequence}</c> after each operation returned, <c>BACKUP {file} {sequence}
/// {checkpoint sequence}</c> after each backup was complete and durable. A writer awaits each operation before the
/// next, so at a kill each writer has at most one operation the parent has no line for: the one after its last
/// acknowledged one.
/// </para>
/// </summary>
public static class PublicApiWorkload
{
    /// <summary>The collection that every kind of operation writes.</summary>
    public const string Main = "A";

    /// <summary>The collection only the batches write, beside <see cref="Main"/>.</summary>
    public const string Side = "B";

    public const int Writers = 6;

    /// <summary>The ids each writer overwrites again and again, in both collections.</summary>
    public const int HotIds = 40;

    /// <summary>The store's options: small segments and frequent checkpoints, a page cache of 1 MiB, compaction of any
    /// chunk under 90% live, and backups unpaced, so kills land in checkpoints, compactions and backups.</summary>
    public static DocumentStoreOptions Options() => new()
    {
        SegmentSize = 1 << 20,
        MaxDocumentSize = 64 * 1024,
        MaxGroupBytes = 512 * 1024,
        CheckpointThreshold = 256 * 1024,
        CheckpointInterval = TimeSpan.FromMilliseconds(20),
        CacheSize = 1 << 20,
        CompactionFillRate = 0.9,
        BackupBytesPerSecond = 0,
        CollectionName = _ => Main, // the sessions' entities share the collection the raw writes use
    };

    /// <summary>The id operation <paramref name="k"/> of writer <paramref name="writer"/> writes.</summary>
    public static string Id(int writer, long k) =>
        string.Create(CultureInfo.InvariantCulture, $"w{writer}-{k % HotIds}");

    /// <summary>Applies operation <paramref name="k"/> of <paramref name="writer"/> to <paramref name="state"/>
    /// ("collection/id" to the operation that wrote the document last): kinds 0 and 1 put, 2 is a batch of two puts
    /// (one in each collection) and a delete of another id, 3 a session that loads, changes and saves, 4 a
    /// delete.</summary>
    public static void Apply(Dictionary<string, long> state, int writer, long k)
    {
        string id = Id(writer, k);
        switch (k % 5)
        {
            case 0 or 1 or 3:
                state[Main + "/" + id] = k;
                break;
            case 2:
                state[Main + "/" + id] = k;
                state[Side + "/" + id] = k;
                state.Remove(Main + "/" + Id(writer, k + 7));
                break;
            default:
                state.Remove(Main + "/" + id);
                break;
        }
    }

    /// <summary>The durability of a run's writes: every other run (by <paramref name="firstK"/>) acknowledges commits
    /// once they are written (<see cref="DurabilityMode.Buffered"/>), which a killed process must not lose either.
    /// </summary>
    public static DurabilityMode RunDurability(long firstK) =>
        firstK / 1_000_000 % 2 == 0 ? DurabilityMode.Buffered : DurabilityMode.Durable;

    /// <summary>Whether a run's checkpoints go in slices at any size (two runs in four, by <paramref name="firstK"/>,
    /// so both durabilities meet both): kills then land between slices too, and reads, backups and scrubs meet trees
    /// ahead of their checkpoint for some ids.</summary>
    public static bool RunSliced(long firstK) => firstK / 2_000_000 % 2 == 1;

    /// <summary>The child: commits until it is killed. Its batches and sessions of every third writer take the other
    /// durability than the run's, so groups mix both.</summary>
    public static async Task<int> RunAsync(string folder, long firstK, string backups)
    {
        DocumentStoreOptions options = Options();
        options.Durability = RunDurability(firstK);
        if (RunSliced(firstK))
        {
            options.MinCheckpointSliceBytes = 1; // slices of a quarter of the live pages (the default share)
        }

        DurabilityMode other = options.Durability == DurabilityMode.Durable
            ? DurabilityMode.Buffered
            : DurabilityMode.Durable;
        await using DocumentStore store = DocumentStore.Open(folder, options);
        var output = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false)) { AutoFlush = true };
        object gate = new();
        Console.Error.WriteLine($"READY {store.LastCommittedSequence}");
        var tasks = new List<Task>();
        for (int w = 0; w < Writers; w++)
        {
            int writer = w;
            tasks.Add(Task.Run(async () =>
            {
                for (long k = firstK; ; k++)
                {
                    long sequence = await WriteAsync(store, writer, k, writer % 3 == 0 ? other : null)
                        .ConfigureAwait(false);
                    lock (gate)
                    {
                        output.WriteLine(string.Create(CultureInfo.InvariantCulture, $"ACK {writer} {k} {sequence}"));
                    }
                }
            }));
        }

        tasks.Add(Task.Run(async () =>
        {
            for (int n = 0; ; n++)
            {
                string file = Path.Combine(backups, string.Create(CultureInfo.InvariantCulture, $"b{firstK}-{n}"));
                BackupResult backup = await store.BackupAsync(file).ConfigureAwait(false);
                lock (gate)
                {
                    output.WriteLine(string.Create(CultureInfo.InvariantCulture,
                        $"BACKUP {file} {backup.Sequence} {backup.CheckpointSequence}"));
                }

                await store.CompactAsync().ConfigureAwait(false);
                await store.CheckpointAsync().ConfigureAwait(false);
                if (n % 4 == 3)
                {
                    VerifyResult verified = await store.VerifyAsync().ConfigureAwait(false);
                    if (!verified.IsHealthy)
                    {
                        lock (gate)
                        {
                            output.WriteLine("UNHEALTHY " + string.Join(" | ", verified.Problems));
                        }
                    }
                }
            }
        }));
        await Task.WhenAll(tasks).ConfigureAwait(false);
        return 0;
    }

    private static async Task<long> WriteAsync(DocumentStore store, int writer, long k, DurabilityMode? durability)
    {
        string id = Id(writer, k);
        byte[] json = Encoding.UTF8.GetBytes(string.Create(CultureInfo.InvariantCulture,
            $"{{\"Id\":\"{id}\",\"K\":{k},\"Pad\":\"{new string('p', (int)(k % 300))}\"}}"));
        switch (k % 5)
        {
            case 0 or 1:
                return await store.PutAsync(Main, id, json).ConfigureAwait(false);
            case 2:
                var batch = new CommitBatch { Durability = durability };
                batch.Put(Main, id, json);
                batch.Put(Side, id, json);
                batch.Delete(Main, Id(writer, k + 7));
                return (await store.WriteAsync(batch).ConfigureAwait(false)).Sequence;
            case 3:
                await using (DocumentSession session = store.OpenSession())
                {
                    session.Durability = durability;
                    Entry? entry = await session.LoadAsync<Entry>(id).ConfigureAwait(false);
                    if (entry is null)
                    {
                        entry = new Entry { Id = id };
                        session.Store(entry);
                    }

                    entry.K = k;
                    entry.Pad = new string('s', (int)(k % 200));
                    await session.SaveChangesAsync().ConfigureAwait(false);
                    return session.GetVersion(entry);
                }

            default:
                return await store.DeleteAsync(Main, id).ConfigureAwait(false);
        }
    }

    /// <summary>The accounts of the bank workload, in their own collection.</summary>
    public const int Accounts = 40;

    /// <summary>The bank workload's tasks that transfer (each has at most one transfer in flight at a kill).</summary>
    public const int TransferTasks = 8;

    /// <summary>Each account's opening balance.</summary>
    public const long OpeningBalance = 1_000;

    /// <summary>The bank workload's account ids.</summary>
    public static string AccountId(int account) =>
        string.Create(CultureInfo.InvariantCulture, $"acct-{account:D2}");

    /// <summary>
    /// The bank child: eight tasks move random amounts between two random accounts, each transfer one session that
    /// loads both, changes both and saves (a <see cref="ConcurrencyException"/> retries it in a new session), and
    /// prints <c>ACK</c> after each saved transfer; two readers load every account in one session and print
    /// <c>BADSUM {total}</c> if a snapshot's balances do not add up. Opens the accounts on its first run. With
    /// <paramref name="sliced"/>, its checkpoints go in slices at any size.
    /// </summary>
    public static async Task<int> RunBankAsync(string folder, bool sliced)
    {
        DocumentStoreOptions options = Options();
        if (sliced)
        {
            options.MinCheckpointSliceBytes = 1; // the accounts' checkpoints in slices: snapshots read across them
        }

        await using DocumentStore store = DocumentStore.Open(folder, options);
        if (store.Get(Main, AccountId(0)) is null)
        {
            await using DocumentSession opening = store.OpenSession();
            for (int a = 0; a < Accounts; a++)
            {
                opening.Store(new Account { Id = AccountId(a), Balance = OpeningBalance });
            }

            await opening.SaveChangesAsync().ConfigureAwait(false);
        }

        var output = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false)) { AutoFlush = true };
        object gate = new();
        Console.Error.WriteLine($"READY {store.LastCommittedSequence}");
        var tasks = new List<Task>();
        for (int t = 0; t < TransferTasks; t++)
        {
            var random = new Random(Environment.ProcessId * 31 + t);
            tasks.Add(Task.Run(async () =>
            {
                while (true)
                {
                    int from = random.Next(Accounts);
                    int to = (from + 1 + random.Next(Accounts - 1)) % Accounts;
                    try
                    {
                        await using DocumentSession session = store.OpenSession();
                        Account source = (await session.LoadAsync<Account>(AccountId(from)).ConfigureAwait(false))!;
                        Account target = (await session.LoadAsync<Account>(AccountId(to)).ConfigureAwait(false))!;
                        long amount = Math.Min(source.Balance, 1 + random.Next(100));
                        source.Balance -= amount;
                        target.Balance += amount;
                        source.Transfers++;
                        target.Transfers++;
                        await session.SaveChangesAsync().ConfigureAwait(false);
                        lock (gate)
                        {
                            output.WriteLine("ACK");
                        }
                    }
                    catch (ConcurrencyException)
                    {
                        // another transfer changed one of the two first: try another
                    }
                }
            }));
        }

        for (int r = 0; r < 2; r++)
        {
            tasks.Add(Task.Run(async () =>
            {
                while (true)
                {
                    await using DocumentSession session = store.OpenSession();
                    long total = 0;
                    for (int a = 0; a < Accounts; a++)
                    {
                        total += (await session.LoadAsync<Account>(AccountId(a)).ConfigureAwait(false))!.Balance;
                    }

                    if (total != Accounts * OpeningBalance)
                    {
                        lock (gate)
                        {
                            output.WriteLine(string.Create(CultureInfo.InvariantCulture, $"BADSUM {total}"));
                        }
                    }
                }
            }));
        }

        await Task.WhenAll(tasks).ConfigureAwait(false);
        return 0;
    }

    /// <summary>An account of the bank workload.</summary>
    public sealed class Account
    {
        public string? Id { get; set; }

        public long Balance { get; set; }

        /// <summary>Transfers saved that moved money from or to this account.</summary>
        public long Transfers { get; set; }
    }

    /// <summary>What the sessions load and save.</summary>
    public sealed class Entry
    {
        public string? Id { get; set; }

        public long K { get; set; }

        public string? Pad { get; set; }
    }
}
