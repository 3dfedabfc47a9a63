using System.Diagnostics;
using System.Globalization;
using System.Text;
using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// Backup, restore and the scrub of a store of <see cref="BenchmarkConstants.BackupDocuments"/> documents of about
/// 1 KiB (about 1 GiB on disk; built once in <c>backup-N</c> under the benchmark data folder, checkpointed, with a
/// journal after the checkpoint), against the plain operations on the same bytes. <c>FileCopy</c> copies the store's
/// files (data file and journal segments) into one new file with 1 MiB buffers and fsyncs it; <c>Backup</c> is
/// <c>store.BackupAsync(file)</c> (fsynced too), <c>BackupFiles</c> <c>DocumentStore.BackupFilesAsync</c> of the held
/// store from its files into a new file (fsynced). <c>RawRead</c> reads the backup file through once; <c>Restore</c>
/// is <c>DocumentStore.RestoreAsync(file, folder)</c> (which also opens the restored store and scrubs it);
/// <c>Verify</c> is <c>store.VerifyAsync()</c>. <c>Commits</c> and <c>CommitsDuringBackup</c>: 16 writers each
/// commit <see cref="CommitsPerWriter"/> durable puts, alone or while backups run one after another. Backups run at
/// the store's default pace (<c>BackupFiles</c> too, the default of <see cref="BackupFilesOptions"/>);
/// <c>BackupUnpaced</c> and <c>CommitsDuringUnpacedBackup</c> without one. Both copies
/// read a store the page cache holds (the machine's memory holds it whole), so they compare what each does with
/// the bytes, not the disk's reads. <c>RawReadCold</c>, <c>RestoreCold</c> and <c>VerifyCold</c> are the same with
/// the backup file and the store's files dropped from the page cache before each iteration: the disk's reads.
/// </summary>
[InvocationCount(1)]
[IterationCount(6)]
[WarmupCount(1)]
public class BackupBenchmarks : BenchmarkDirectory
{
    private const int CommitsPerWriter = 1_000;
    private const int Writers = 16;
    private static readonly int s_documents = int.TryParse(Environment.GetEnvironmentVariable("FOLIO_BACKUP_DOCUMENTS"),
        CultureInfo.InvariantCulture, out int n) ? n : BenchmarkConstants.BackupDocuments;

    private readonly DocumentStoreOptions _options = new();
    private DocumentStore? _store;
    private string _backupFile = "";
    private int _round;

    private static string Folder => Path.Combine(DataFolder, FormattableString.Invariant($"backup-{s_documents}"));

    private static string StoreFolder => Path.Combine(Folder, "folio");

    [GlobalSetup]
    public void Setup()
    {
        Console.WriteLine(BuildOnce(Folder, Build));
        CreateRoot();
        _store = DocumentStore.Open(StoreFolder, _options);

        // A journal after the checkpoint (the close before checkpointed everything): the backup copies entries too.
        var batch = new CommitBatch();
        for (int i = 0; i < 10_000; i++)
        {
            string id = LargeDocument.IdOf(i * 7 % s_documents);
            batch.Put(LargeDocument.Collection, id, Encoding.UTF8.GetBytes(LargeDocument.JsonOf(id, i + 1)));
            if (batch.Count == 100)
            {
                _store.WriteAsync(batch).AsTask().GetAwaiter().GetResult();
                batch = new CommitBatch();
            }
        }

        _backupFile = Path.Combine(Root, "prepared.folio");
        _options.BackupBytesPerSecond = 0;
        BackupResult backup = _store.BackupAsync(_backupFile).AsTask().GetAwaiter().GetResult();
        _options.BackupBytesPerSecond = DocumentStoreOptions.DefaultBackupBytesPerSecond;
        Console.WriteLine(FormattableString.Invariant(
            $"// store {StoreBytes() / 1048576.0:F0} MiB, backup {backup.Bytes / 1048576.0:F0} MiB"));
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store?.Dispose();
        DeleteRoot();
    }

    [IterationCleanup]
    public void RemoveCopies()
    {
        foreach (string path in Directory.GetFileSystemEntries(Root))
        {
            if (path == _backupFile)
            {
                continue;
            }

            if (Directory.Exists(path))
            {
                Directory.Delete(path, recursive: true);
            }
            else
            {
                File.Delete(path);
            }
        }
    }

    [Benchmark(Baseline = true)]
    public long FileCopy()
    {
        string target = Path.Combine(Root, $"copy{_round++}");
        using var output = new FileStream(target, FileMode.CreateNew, FileAccess.Write, FileShare.None, 0);
        byte[] buffer = new byte[1 << 20];
        long copied = 0;
        foreach (string file in StoreFiles())
        {
            using var input = new FileStream(file, FileMode.Open, FileAccess.Read, FileShare.ReadWrite, 0);
            int read;
            while ((read = input.Read(buffer)) > 0)
            {
                output.Write(buffer, 0, read);
                copied += read;
            }
        }

        output.Flush(flushToDisk: true);
        return copied;
    }

    /// <summary><c>store.BackupAsync(file)</c> at the default pace
    /// (<see cref="DocumentStoreOptions.DefaultBackupBytesPerSecond"/>).</summary>
    [Benchmark]
    public async Task<long> Backup()
    {
        BackupResult result = await _store!.BackupAsync(Path.Combine(Root, $"backup{_round++}")).ConfigureAwait(false);
        return result.Bytes;
    }

    /// <summary><c>Backup</c> without a pace (<see cref="DocumentStoreOptions.BackupBytesPerSecond"/> 0).</summary>
    [Benchmark]
    public Task<long> BackupUnpaced() => Unpaced(Backup);

    /// <summary><c>DocumentStore.BackupFilesAsync</c> of the held store from its files (what <c>folio backup</c> does
    /// beside a running service), into a new file, fsynced.</summary>
    [Benchmark]
    public async Task<long> BackupFiles()
    {
        string target = Path.Combine(Root, $"backup{_round++}");
        await using var output = new FileStream(target, FileMode.CreateNew, FileAccess.Write, FileShare.None, 0);
        BackupResult result = await DocumentStore.BackupFilesAsync(StoreFolder, output).ConfigureAwait(false);
        output.Flush(flushToDisk: true);
        return result.Bytes;
    }

    [Benchmark]
    public long RawRead()
    {
        using var input = new FileStream(_backupFile, FileMode.Open, FileAccess.Read, FileShare.Read, 0);
        byte[] buffer = new byte[1 << 20];
        long total = 0;
        int read;
        while ((read = input.Read(buffer)) > 0)
        {
            total += read;
        }

        return total;
    }

    [Benchmark]
    public async Task<long> Restore()
    {
        RestoreResult result = await DocumentStore.RestoreAsync(_backupFile, Path.Combine(Root, $"restored{_round++}"))
            .ConfigureAwait(false);
        return result.Documents;
    }

    [IterationSetup(Targets = [nameof(RawReadCold), nameof(RestoreCold), nameof(VerifyCold)])]
    public void DropCaches() => OsPageCache.Drop(StoreFiles().Append(_backupFile));

    [Benchmark]
    public long RawReadCold() => RawRead();

    [Benchmark]
    public Task<long> RestoreCold() => Restore();

    [Benchmark]
    public Task<long> VerifyCold() => Verify();

    [Benchmark]
    public async Task<long> Verify()
    {
        VerifyResult result = await _store!.VerifyAsync().ConfigureAwait(false);
        return result.IsHealthy ? result.Bytes : throw new InvalidOperationException("the store is damaged");
    }

    [Benchmark]
    public Task<long> Commits() => CommitAsync(_store!, Writers, CommitsPerWriter);

    /// <summary><c>CommitsDuringBackup</c> while the backups run without a pace.</summary>
    [Benchmark]
    public Task<long> CommitsDuringUnpacedBackup() => Unpaced(CommitsDuringBackup);

    private async Task<long> Unpaced(Func<Task<long>> body)
    {
        _options.BackupBytesPerSecond = 0;
        try
        {
            return await body().ConfigureAwait(false);
        }
        finally
        {
            _options.BackupBytesPerSecond = DocumentStoreOptions.DefaultBackupBytesPerSecond;
        }
    }

    [Benchmark]
    public async Task<long> CommitsDuringBackup()
    {
        using var stop = new CancellationTokenSource();
        int round = _round++;
        Task backups = Task.Run(async () =>
        {
            for (int n = 0; !stop.IsCancellationRequested; n++)
            {
                string file = Path.Combine(Root, $"during{round}-{n}");
                try
                {
                    await _store!.BackupAsync(file, stop.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                }

                File.Delete(file);
            }
        });
        long commits = await CommitAsync(_store!, Writers, CommitsPerWriter).ConfigureAwait(false);
        await stop.CancelAsync().ConfigureAwait(false);
        await backups.ConfigureAwait(false);
        return commits;
    }

    private static async Task<long> CommitAsync(DocumentStore store, int writers, int commits)
    {
        var tasks = new Task[writers];
        for (int w = 0; w < writers; w++)
        {
            int writer = w;
            tasks[w] = Task.Run(async () =>
            {
                for (int i = 0; i < commits; i++)
                {
                    string id = LargeDocument.IdOf((writer * 1000) + (i % 1000));
                    await store.PutAsync(LargeDocument.Collection, id,
                        Encoding.UTF8.GetBytes(LargeDocument.JsonOf(id, i))).ConfigureAwait(false);
                }
            });
        }

        await Task.WhenAll(tasks).ConfigureAwait(false);
        return (long)writers * commits;
    }

    private static IEnumerable<string> StoreFiles() =>
        new[] { Path.Combine(StoreFolder, "data.folio") }.Concat(
            Directory.GetFiles(Path.Combine(StoreFolder, "journal"), "*.journal").Order(StringComparer.Ordinal));

    private static long StoreBytes()
    {
        long bytes = 0;
        foreach (string file in StoreFiles())
        {
            bytes += new FileInfo(file).Length;
        }

        return bytes;
    }

    private static string Build()
    {
        var watch = Stopwatch.StartNew();
        using (var store = DocumentStore.Open(StoreFolder, new DocumentStoreOptions
        {
            Durability = DurabilityMode.Buffered,
            CheckpointInterval = Timeout.InfiniteTimeSpan,
        }))
        {
            LargeDocument.LoadInOrder(store, s_documents); // checkpointed
        }

        return FormattableString.Invariant($"folio {watch.Elapsed.TotalSeconds:F1} s");
    }
}
