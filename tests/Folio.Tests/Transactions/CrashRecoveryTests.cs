using System.Diagnostics;
using Folio.Journal;
using Folio.CrashHost;
using Folio.Tests.Infrastructure;
using Folio.Transactions;
using Xunit.Abstractions;

namespace Folio.Tests.Transactions;

/// <summary>
/// Kills a committing child process with SIGKILL at random moments and checks, after each reopen, that every batch
/// it acknowledged is in the journal, intact. A few cycles in CI; FOLIO_CRASH_CYCLES=300 for a long run.
/// </summary>
public sealed class CrashRecoveryTests(ITestOutputHelper output)
{
    [Fact]
    public async Task Every_acknowledged_batch_survives_SIGKILL_of_the_committing_process()
    {
        int cycles = CrashHostProcess.Cycles;
        using var dir = new TempDirectory();
        var random = new Random(Environment.TickCount);
        var acknowledged = new Dictionary<long, string>();
        long totalTruncated = 0;
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            // Odd cycles commit with two groups in flight: the pipeline's acknowledgements must be as durable.
            using Process child = CrashHostProcess.Start(dir.Path, $"c{cycle}", "8", cycle % 2 == 0 ? "1" : "2");
            var lines = new List<string>();
            var reading = Task.Run(() =>
            {
                while (child.StandardOutput.ReadLine() is { } line)
                {
                    lock (lines)
                    {
                        lines.Add(line);
                    }
                }
            });
            await Task.Delay(random.Next(50, 400));
            await CrashHostProcess.KillAsync(child, reading);

            lock (lines)
            {
                foreach (string line in lines)
                {
                    string[] parts = line.Split(' ');
                    if (parts.Length == 3 && parts[0] == "ACK")
                    {
                        acknowledged.Add(long.Parse(parts[1], System.Globalization.CultureInfo.InvariantCulture),
                            parts[2]);
                    }
                }
            }

            using var journal = WriteAheadJournal.Open(dir.Path, new JournalOptions { SegmentSize = 256 * 1024 });
            totalTruncated += journal.Recovery.TruncatedBytes;
            var found = new Dictionary<long, BatchCommand>();
            using (var reader = journal.OpenReader(1))
            {
                while (reader.TryRead(out JournalEntry entry))
                {
                    found[entry.Sequence] = BatchEncoding.Decode(entry.Data).Single();
                }
            }

            foreach ((long sequence, string id) in acknowledged)
            {
                Assert.True(found.TryGetValue(sequence, out BatchCommand command),
                    $"acknowledged batch {sequence} ({id}) is missing after the crash of cycle {cycle}");
                Assert.Equal(id, command.Key.Id);
                Assert.Equal(CrashPayload.For(id), command.Value.ToArray());
            }
        }

        output.WriteLine(
            $"{cycles} SIGKILL cycles, {acknowledged.Count} acknowledged batches all present, {totalTruncated} torn " +
            $"bytes truncated");
        Assert.True(acknowledged.Count > 0, "the child acknowledged some commits before being killed");
    }
}
