using System.Diagnostics.Metrics;
using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Diagnostics;

/// <summary>The application's loggers and metrics listeners run on the store's threads; when they throw, the message or
/// measurement is lost and the store goes on.</summary>
public sealed class ObserverFailureTests
{
    [Theory]
    [InlineData("logger")]
    [InlineData("metrics listener")]
    public async Task A_store_whose_logger_or_metrics_listener_throws_opens_commits_checkpoints_reads_and_closes(
        string observer)
    {
        using var dir = new TempDirectory();
        var logs = new CapturingLoggerFactory { ThrowFor = _ => observer == "logger" };
        using var meters = new TestMeterFactory();
        using MeterListener listener = meters.Listen();
        int thrown = 0;
        listener.SetMeasurementEventCallback<long>((_, _, _, _) => Throw());
        listener.SetMeasurementEventCallback<int>((_, _, _, _) => Throw());
        listener.SetMeasurementEventCallback<double>((_, _, _, _) => Throw());
        if (observer == "metrics listener")
        {
            listener.Start();
        }

        DocumentStoreOptions Options()
        {
            DocumentStoreOptions options = TestStoreOptions.SmallSegments();
            options.LoggerFactory = logs;
            options.MeterFactory = meters;
            options.SlowSyncThreshold = TimeSpan.FromTicks(1); // a warning for every fsync
            options.CheckpointThreshold = 64 * 1024;
            return options;
        }

        await using (DocumentStore store = DocumentStore.Open(dir.Path, Options()))
        {
            await Task.WhenAll(Enumerable.Range(0, 8).Select(w => Task.Run(async () =>
            {
                for (int i = 0; i < 50; i++)
                {
                    await store.PutAsync("c", $"w{w}-{i:D3}",
                        Encoding.UTF8.GetBytes($"{{\"p\":\"{new string('x', 300)}\"}}"));
                }
            })));
            await store.CheckpointAsync();
            Assert.False(store.IsFaulted);
        }

        await using (DocumentStore reopened = DocumentStore.Open(dir.Path, Options()))
        {
            Assert.Equal(400, reopened.Scan("c").Count()); // through the cache: hits and misses measured
            Assert.NotNull(reopened.Get("c", "w3-017"));
            Assert.True((await reopened.VerifyAsync()).IsHealthy);
        }

        Assert.True(observer == "logger" ? !logs.Lines.IsEmpty : Volatile.Read(ref thrown) > 0);

        void Throw()
        {
            Interlocked.Increment(ref thrown);
            throw new InvalidOperationException("listener bug");
        }
    }
}
