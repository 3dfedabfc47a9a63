using System.Text;
using Folio.Extensions.Hosting;
using Folio.Tests.Infrastructure;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Folio.Tests.Hosting;

public sealed class FolioHostingTests : IDisposable
{
    private readonly TempDirectory _directory = new();

    public void Dispose() => _directory.Dispose();

    private sealed class Item
    {
        public string? Id { get; set; }

        public int Value { get; set; }
    }

    private static IHost BuildHost(Action<IServiceCollection> services, Dictionary<string, string?>? settings = null)
    {
        HostApplicationBuilder builder = Host.CreateApplicationBuilder(
            new HostApplicationBuilderSettings { DisableDefaults = true });
        if (settings is not null)
        {
            builder.Configuration.AddInMemoryCollection(settings);
        }

        builder.Logging.ClearProviders();
        services(builder.Services);
        return builder.Build();
    }

    /// <summary>
    /// <paramref name="path"/> with 1 MiB segments (documents up to 64 KiB; see
    /// <see cref="TestStoreOptions.SmallSegments"/>).
    /// </summary>
    private static void SmallStore(FolioOptions options, string path)
    {
        DocumentStoreOptions small = TestStoreOptions.SmallSegments();
        options.Path = path;
        options.SegmentSize = small.SegmentSize;
        options.MaxDocumentSize = small.MaxDocumentSize;
        options.MaxGroupBytes = small.MaxGroupBytes;
    }

    [Fact]
    public async Task A_relative_path_is_under_the_hosts_content_root_not_the_current_directory()
    {
        string contentRoot = Path.Combine(_directory.Path, "app");
        Directory.CreateDirectory(contentRoot);
        HostApplicationBuilder builder = Host.CreateApplicationBuilder(
            new HostApplicationBuilderSettings { DisableDefaults = true, ContentRootPath = contentRoot });
        builder.Logging.ClearProviders();
        builder.Services.AddFolio(o => SmallStore(o, Path.Combine("data", "folio")));
        using IHost host = builder.Build();
        await host.StartAsync();

        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();
        Assert.Equal(Path.Combine(contentRoot, "data", "folio"), store.Path);
        Assert.True(Directory.Exists(Path.Combine(contentRoot, "data", "folio", "journal")));
        Assert.False(Directory.Exists(Path.Combine(Environment.CurrentDirectory, "data", "folio")));
        await host.StopAsync();
    }

    [Fact]
    public async Task Settings_bound_from_configuration_open_the_store_at_start()
    {
        string path = Path.Combine(_directory.Path, "db");
        using IHost host = BuildHost(
            s => s.AddFolio(
                BuildConfiguration(
                new() { ["Folio:Path"] = path, ["Folio:Durability"] = "Buffered", ["Folio:MaxDocumentSize"] = "4096",
                ["Folio:SegmentSize"] = "1048576", ["Folio:MaxChangeFeedLag"] = "0",
                ["Folio:BackupBytesPerSecond"] = "0", ["Folio:DocumentCacheSize"] = "0",
                ["Folio:DataFileReads"] = "Direct" }).GetSection("Folio")));
        await host.StartAsync();

        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();
        Assert.Equal(Path.GetFullPath(path), store.Path);
        Assert.True(File.Exists(Path.Combine(path, "journal", "LOCK"))
            || Directory.EnumerateFiles(Path.Combine(path, "journal")).Any());
        Assert.Same(store, host.Services.GetRequiredService<DocumentStore>());
        FolioOptions options = host.Services.GetRequiredService<IOptions<FolioOptions>>().Value;
        Assert.Equal(DurabilityMode.Buffered, options.Durability);
        Assert.Equal(4096, options.MaxDocumentSize);
        Assert.Equal(0, options.MaxChangeFeedLag);
        Assert.Equal(0, store.Options.MaxChangeFeedLag);
        Assert.Equal(0, store.Options.BackupBytesPerSecond);
        Assert.Equal(0, store.Options.DocumentCacheSize);
        Assert.Equal(DataFileReadMode.Direct, store.Options.DataFileReads);
        Assert.True(store.Pages.Cache.ReadsDirect);
        Assert.Null(store.Index.DocumentCache);
        await Assert.ThrowsAsync<DocumentTooLargeException>(async ()
            => await store.PutAsync("c", "big", Encoding.UTF8.GetBytes("\"" + new string('x', 5000) + "\"")));
        await host.StopAsync();
    }

    [Theory]
    [InlineData(null, "Path is required")]
    [InlineData("MaxDocumentSize=-5", "MaxDocumentSize")]
    [InlineData("SegmentSize=4096", "SegmentSize")]
    [InlineData("DegradedSyncLatency=00:00:00", "DegradedSyncLatency")]
    [InlineData("SlowSyncThreshold=-00:00:01", "SlowSyncThreshold")]
    [InlineData("MaxChangeFeedLag=-1", "MaxChangeFeedLag")]
    [InlineData("BackupBytesPerSecond=1000", "BackupBytesPerSecond")]
    [InlineData("DocumentCacheSize=1000", "DocumentCacheSize")]
    [InlineData("DataFileReads=7", "DataFileReads")]
    public async Task Invalid_settings_stop_the_host_at_start_with_a_message_naming_them(string? setting,
        string expected)
    {
        var settings = new Dictionary<string, string?>();
        if (setting is not null)
        {
            settings["Folio:Path"] = Path.Combine(_directory.Path, "db");
            string[] parts = setting.Split('=');
            settings["Folio:" + parts[0]] = parts[1];
        }

        using IHost host = BuildHost(s => s.AddFolio(BuildConfiguration(settings).GetSection("Folio")));
        OptionsValidationException e = await Assert.ThrowsAsync<OptionsValidationException>(() => host.StartAsync());
        Assert.Contains(expected, e.Message, StringComparison.Ordinal);
        Assert.False(Directory.Exists(Path.Combine(_directory.Path, "db", "journal")),
            "nothing is created when the settings are invalid");
    }

    [Fact]
    public async Task Sessions_are_scoped_and_the_store_is_closed_cleanly_on_shutdown()
    {
        string path = Path.Combine(_directory.Path, "db");
        var logs = new CapturingLoggerFactory();
        DocumentStore store;
        using (IHost host = BuildHost(s =>
        {
            s.AddSingleton<ILoggerFactory>(logs);
            s.AddFolio(o => SmallStore(o, path));
        }))
        {
            await host.StartAsync();
            store = host.Services.GetRequiredService<DocumentStore>();

            // Commits from many scopes at once, as requests would.
            var writers = Enumerable.Range(0, 64).Select(i => Task.Run(async () =>
            {
                await using AsyncServiceScope scope = host.Services.CreateAsyncScope();
                DocumentSession session = scope.ServiceProvider.GetRequiredService<DocumentSession>();
                Assert.Same(session, scope.ServiceProvider.GetRequiredService<DocumentSession>());
                session.Store(new Item { Id = $"items/{i:D3}", Value = i });
                await session.SaveChangesAsync();
            })).ToArray();
            await Task.WhenAll(writers);

            await using (AsyncServiceScope a = host.Services.CreateAsyncScope())
            await using (AsyncServiceScope b = host.Services.CreateAsyncScope())
            {
                Assert.NotSame(a.ServiceProvider.GetRequiredService<DocumentSession>(),
                    b.ServiceProvider.GetRequiredService<DocumentSession>());
            }

            await host.StopAsync();
            Assert.Throws<ObjectDisposedException>(() => store.Get("Item", "items/000"));
        }

        // Closed once, although both the host (stop) and the container (dispose) ask.
        Assert.Single(logs.Lines, l => l.Id.Id == 4001);
        Assert.Single(logs.Lines, l => l.Id.Id == 3002);

        // The folder's lock is released and the journal is clean: no torn tail to truncate on reopen.
        var reopenLogs = new CapturingLoggerFactory();
        await using DocumentStore reopened = await DocumentStore.OpenAsync(path,
            new DocumentStoreOptions { LoggerFactory = reopenLogs });
        Assert.DoesNotContain(reopenLogs.Lines, l => l.Id.Id == 1002);
        for (int i = 0; i < 64; i++)
        {
            Assert.NotNull(reopened.Get("Item", $"items/{i:D3}"));
        }
    }

    [Fact]
    public async Task Metrics_come_from_the_containers_meter_factory()
    {
        using IHost host = BuildHost(s => s.AddFolio(o => SmallStore(o, Path.Combine(_directory.Path, "db"))));
        await host.StartAsync();
        var factory = host.Services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>();
        long commits = 0;
        object? scope = null;
        using var listener = new System.Diagnostics.Metrics.MeterListener();
        listener.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Folio" && ReferenceEquals(instrument.Meter.Scope, factory))
            {
                scope = instrument.Meter.Scope;
                l.EnableMeasurementEvents(instrument);
            }
        };
        listener.SetMeasurementEventCallback<long>((instrument, value, _, _) =>
        {
            if (instrument.Name == "folio.commits")
            {
                Interlocked.Add(ref commits, value);
            }
        });
        listener.Start();

        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();
        await store.PutAsync("c", "a", "{}"u8.ToArray());
        await store.PutAsync("c", "b", "{}"u8.ToArray());
        Assert.Same(factory, scope);
        Assert.Equal(2, Interlocked.Read(ref commits));
        await host.StopAsync();
    }

    [Fact]
    public async Task A_store_locked_by_someone_else_stops_the_host_at_start()
    {
        string path = Path.Combine(_directory.Path, "db");
        await using DocumentStore other = await DocumentStore.OpenAsync(path, TestStoreOptions.SmallSegments());
        using IHost host = BuildHost(s => s.AddFolio(o => SmallStore(o, path)));
        await Assert.ThrowsAsync<StoreLockedException>(() => host.StartAsync());
    }

    [Fact]
    public async Task Health_check_is_healthy_then_degraded_on_slow_fsyncs_then_unhealthy_when_faulted()
    {
        var files = new FaultInjectingFileSystem();
        TimeSpan degradedAt = TimeSpan.FromHours(1);
        using IHost host = await StartCheckedHostAsync(files, o => o.DegradedSyncLatency = degradedAt);
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();

        await store.PutAsync("c", "a", "{}"u8.ToArray());
        HealthReport report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Healthy, report.Status);
        Assert.Equal(1L, report.Entries["folio"].Data["lastCommittedSequence"]);

        // Any real fsync takes longer than one tick: with that threshold the store reports degraded.
        host.Services.GetRequiredService<IOptionsMonitor<FolioOptions>>()
            .CurrentValue.DegradedSyncLatency = TimeSpan.FromTicks(1);
        report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Degraded, report.Status);
        Assert.Contains("fsyncs average", report.Entries["folio"].Description, StringComparison.Ordinal);

        files.Arm(FileFault.SyncFails);
        await Assert.ThrowsAsync<StoreFaultedException>(async () => await store.PutAsync("c", "b", "{}"u8.ToArray()));
        report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Unhealthy, report.Status);
        Assert.Contains("faulted", report.Entries["folio"].Description, StringComparison.Ordinal);
        Assert.NotNull(report.Entries["folio"].Exception);
        Assert.NotNull(store.Get("c", "a")); // reads keep working
        await host.StopAsync();
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task Health_check_is_unhealthy_while_no_next_segment_can_be_created_and_healthy_again_once_one_can(
        bool diskFull)
    {
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == "next-segment.tmp" };
        using IHost host = await StartCheckedHostAsync(files, o =>
        {
            o.SegmentSize = 64 * 1024; // a rotation within a few puts
            o.MaxDocumentSize = 8 * 1024;
            o.MaxGroupBytes = 16 * 1024;
        });
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();
        byte[] json = Encoding.UTF8.GetBytes($"{{\"pad\":\"{new string('x', 2000)}\"}}");

        // A full disk, or a process out of file descriptors.
        files.NoSpace = diskFull;
        files.CreateFailure = diskFull ? null : new IOException("Too many open files", 24);
        StoreUnavailableException? unavailable = null;
        for (int i = 0; i < 200 && unavailable is null; i++)
        {
            unavailable = await Record.ExceptionAsync(async () => await store.PutAsync("c", $"d{i}", json))
                as StoreUnavailableException;
        }

        Assert.NotNull(unavailable);
        Assert.Equal(diskFull, unavailable is StoreFullException);
        Assert.Equal(diskFull, store.GetDiagnostics().IsDiskFull);
        Assert.False(store.GetDiagnostics().IsFaulted);
        HealthReport report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Unhealthy, report.Status);
        Assert.Contains(diskFull ? "disk is full" : "cannot create its next segment",
            report.Entries["folio"].Description, StringComparison.Ordinal);
        Assert.IsType<IOException>(report.Entries["folio"].Exception);

        files.NoSpace = false;
        files.CreateFailure = null;
        DateTime deadline = DateTime.UtcNow + TestDeadline.Hang;
        while (await Record.ExceptionAsync(async () => await store.PutAsync("c", "after", json))
            is StoreUnavailableException && DateTime.UtcNow < deadline)
        {
            await Task.Delay(50);
        }

        Assert.NotNull(store.Get("c", "after"));
        Assert.False(store.GetDiagnostics().IsDiskFull);
        Assert.Null(store.GetDiagnostics().SegmentUnavailable);
        report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Healthy, report.Status);
        await host.StopAsync();
    }

    [Fact]
    public async Task Health_check_is_degraded_while_checkpoints_fail_and_healthy_once_one_succeeds()
    {
        var files = new FaultInjectingFileSystem { Matches = static path
            => Path.GetFileName(path) == DocumentStore.DataFileName };
        using IHost host = await StartCheckedHostAsync(files, static _ => { });
        HealthCheckService health = host.Services.GetRequiredService<HealthCheckService>();
        DocumentStore store = host.Services.GetRequiredService<DocumentStore>();
        await store.PutAsync("c", "a", "{}"u8.ToArray());

        files.Arm(FileFault.DiskFull);
        await Assert.ThrowsAsync<IOException>(async () => await store.CheckpointAsync());
        Assert.IsType<IOException>(store.GetDiagnostics().CheckpointFailure);
        Assert.False(store.GetDiagnostics().IsFaulted);
        HealthReport report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Degraded, report.Status);
        Assert.Contains("Checkpoints fail", report.Entries["folio"].Description, StringComparison.Ordinal);

        await store.CheckpointAsync();
        Assert.Null(store.GetDiagnostics().CheckpointFailure);
        report = await health.CheckHealthAsync();
        Assert.Equal(HealthStatus.Healthy, report.Status);
        await host.StopAsync();
    }

    /// <summary>A started host with a small store on <paramref name="files"/> and the Folio health check.</summary>
    private async Task<IHost> StartCheckedHostAsync(FaultInjectingFileSystem files, Action<FolioOptions> configure)
    {
        IHost host = BuildHost(s =>
        {
            s.AddFolio(o =>
            {
                SmallStore(o, Path.Combine(_directory.Path, "db"));
                configure(o);
                o.ConfigureStore = store => store.FileSystem = files;
            });
            s.AddHealthChecks().AddFolioHealthCheck();
        });
        await host.StartAsync();
        return host;
    }

    private static IConfiguration BuildConfiguration(Dictionary<string, string?> settings) =>
        new ConfigurationBuilder().AddInMemoryCollection(settings).Build();
}
