using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using Folio;
using Folio.Samples.Quickstart;

// The README's main command: dotnet run --project samples/Folio.Samples.Quickstart
QuickstartOptions options;
try
{
    options = QuickstartOptions.Parse(args);
}
catch (ArgumentException e)
{
    Console.Error.WriteLine(e.Message);
    return 2;
}

if (options.Help)
{
    Console.WriteLine(QuickstartOptions.Usage);
    return 0;
}

string folder = Path.GetFullPath(options.DataFolder);
if (options.Fresh && Directory.Exists(folder))
{
    Directory.Delete(folder, recursive: true);
}

var storeOptions = new DocumentStoreOptions
{
    Durability = options.Buffered ? DurabilityMode.Buffered : DurabilityMode.Durable,
    JsonSerializerOptions = new JsonSerializerOptions { TypeInfoResolver = QuickstartJsonContext.Default },
    CollectionName = static type => type == typeof(Order)
        ? "orders"
        : DocumentStoreOptions.DefaultCollectionName(type),
};

var clock = Stopwatch.StartNew();
await using DocumentStore store = await DocumentStore.OpenAsync(folder, storeOptions);
Console.WriteLine(
    $"Opened {folder} in {clock.ElapsedMilliseconds} ms; last committed sequence {store.LastCommittedSequence}.");
long firstNewSequence = store.LastCommittedSequence + 1;

// 1. Write: concurrent sessions, one document per SaveChangesAsync; the transaction merger groups them under few
// fsyncs.
clock.Restart();
int perSession = (options.Documents + options.Sessions - 1) / options.Sessions;
var writers = new Task[options.Sessions];
for (int s = 0; s < options.Sessions; s++)
{
    int session = s;
    writers[s] = Task.Run(async () =>
    {
        for (int i = session * perSession; i < Math.Min(options.Documents, (session + 1) * perSession); i++)
        {
            await using DocumentSession writer = store.OpenSession();
            writer.Store(new Order
            {
                Id = OrderId(i),
                Customer = $"customer-{i % 97:D2}",
                Total = Math.Round(10m + (i % 1000) * 1.37m, 2),
                Lines = 1 + (i % 7),
                CreatedUtc = DateTime.UtcNow,
            });
            await writer.SaveChangesAsync();
        }
    });
}

await Task.WhenAll(writers);
double writeSeconds = clock.Elapsed.TotalSeconds;
StoreDiagnostics afterWrites = store.GetDiagnostics();
Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
    $"Wrote {options.Documents} documents from {options.Sessions} concurrent sessions in {writeSeconds * 1000:F0} " +
        $"ms: {options.Documents / writeSeconds:F0} commits/s ({(options.Buffered ? "buffered" : "durable")}), " +
        $"{afterWrites.SyncCount} fsyncs so far, average fsync " +
        $"{afterWrites.AverageSyncDuration.TotalMilliseconds:F2} ms."));

// 2. Load by id: every read is lock-free against the session's snapshot.
clock.Restart();
int found = 0;
await using (DocumentSession reader = store.OpenSession())
{
    for (int i = 0; i < options.Documents; i++)
    {
        Order? order = await reader.LoadAsync<Order>(OrderId((int)((i * 7919L) % options.Documents)));
        found += order is null ? 0 : 1;
    }
}

double loadSeconds = clock.Elapsed.TotalSeconds;
Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
    $"Loaded {found} of {options.Documents} documents by id in {loadSeconds * 1000:F0} ms: " +
        $"{options.Documents / loadSeconds:F0} loads/s (typed, deserialized)."));

// 3. Query: by id prefix with paging, by id range, count, and a predicate scan.
await using (DocumentSession query = store.OpenSession())
{
    query.TrackQueryResults = false; // read only: the session need not keep what the queries return
    Console.Write("First page of 'orders/00001': ");
    await foreach (Order order in query.QueryByPrefixAsync<Order>("orders/00001", take: 5))
    {
        Console.Write($"{order.Id} ");
    }

    Console.WriteLine();
    int inRange = 0;
    await foreach (Order _ in query.QueryByRangeAsync<Order>(OrderId(100), OrderId(200)))
    {
        inRange++;
    }

    int total = await query.CountAsync<Order>();
    int big = 0;
    await foreach (Order _ in query.QueryAsync<Order>(o => o.Total > 1000m))
    {
        big++;
    }

    Console.WriteLine(
        $"Range [{OrderId(100)}, {OrderId(200)}): {inRange} orders; {total} orders in all; {big} with a total over " +
        $"1000.");
}

// 4. Optimistic concurrency: two sessions change the same order; the second save conflicts.
await using (DocumentSession first = store.OpenSession())
await using (DocumentSession second = store.OpenSession())
{
    Order a = (await first.LoadAsync<Order>(OrderId(0)))!;
    Order b = (await second.LoadAsync<Order>(OrderId(0)))!;
    a.Status = "paid";
    b.Status = "cancelled";
    await first.SaveChangesAsync();
    try
    {
        await second.SaveChangesAsync();
        Console.WriteLine("Unexpected: the second save did not conflict.");
        return 1;
    }
    catch (ConcurrencyException e)
    {
        Console.WriteLine(
            $"Second writer of {OrderId(0)} got ConcurrencyException as expected ({e.Conflicts.Count} conflicting " +
            $"document).");
    }
}

// 5. Change feed: every change of this run, in commit order, from the journal's lock-free readers.
clock.Restart();
long last = store.LastCommittedSequence;
long changes = 0;
long puts = 0;
using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30)))
{
    await foreach (DocumentChange change in store.Changes.ReadAsync(firstNewSequence, cts.Token))
    {
        changes++;
        puts += change.Kind == ChangeKind.Put ? 1 : 0;
        if (change.Sequence >= last)
        {
            break;
        }
    }
}

Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
    $"Change feed: {changes} changes ({puts} puts) from sequence {firstNewSequence} to {last} in " +
        $"{clock.ElapsedMilliseconds} ms."));
Console.WriteLine("Done. Run again to reopen the same folder: it opens from its last checkpoint (written at close) "
    + "and replays only the journal after it.");
return found == options.Documents && changes == options.Documents + 1 ? 0 : 1;

static string OrderId(int n) => "orders/" + n.ToString("D6", CultureInfo.InvariantCulture);
