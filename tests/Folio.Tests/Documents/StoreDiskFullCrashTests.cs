using System.Globalization;
using System.Text;
using Folio.CrashHost;
using Folio.Storage;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// A child process commits to a store until its disk is full and keeps trying while commits are refused
/// (<see cref="StoreFullException"/>); it is killed with SIGKILL then, and the store is reopened on the full disk:
/// every acknowledged document is there with its bytes and version, no refused one is, and nothing else is but the
/// one put per writer that may have committed unacknowledged. Then some space is freed, and the next child must
/// commit again before the disk fills once more. The disk is a <see cref="CapacityLimitedFileSystem"/>, or, when
/// FOLIO_SMALL_DISK names a folder on a small file system (a loop-mounted ext4, say), that real disk. Three cycles
/// in CI; FOLIO_CRASH_CYCLES sets how many (at least two).
/// </summary>
public sealed class StoreDiskFullCrashTests(ITestOutputHelper output)
{
    private const int Writers = 8;

    /// <summary>What the store has to itself at first.</summary>
    private const long StoreSpace = 8 << 20;

    /// <summary>What each cycle frees after the first (the filler file shrinks by it).</summary>
    private const long FreedPerCycle = 3 << 19;

    [Fact]
    public async Task A_store_killed_on_a_full_disk_keeps_every_acknowledged_write_and_commits_once_space_is_freed()
    {
        int cycles = Math.Max(2, CrashHostProcess.Cycles);
        string? realDisk = Environment.GetEnvironmentVariable("FOLIO_SMALL_DISK");
        using var temp = new TempDirectory();
        string root = realDisk is null ? temp.Path : Path.Combine(realDisk, $"folio-full-{Guid.NewGuid():N}");
        Directory.CreateDirectory(root);
        try
        {
            string filler = Path.Combine(root, "filler");
            long fillerBytes = (cycles - 1) * FreedPerCycle;
            long capacity = 0; // the real disk
            if (realDisk is null)
            {
                capacity = StoreSpace + fillerBytes;
            }
            else
            {
                fillerBytes = Math.Max(0, new DriveInfo(root).AvailableFreeSpace - StoreSpace);
            }

            WriteFiller(filler, fillerBytes);
            await RunCyclesAsync(Path.Combine(root, "store"), filler, cycles, capacity);
        }
        finally
        {
            if (realDisk is not null)
            {
                Directory.Delete(root, recursive: true);
            }
        }
    }

    private async Task RunCyclesAsync(string folder, string filler, int cycles, long capacity)
    {
        var model = new Dictionary<string, long>(StringComparer.Ordinal); // id -> version, every committed put
        long refusedInAll = 0;
        for (int cycle = 0; cycle < cycles; cycle++)
        {
            string tag = string.Create(CultureInfo.InvariantCulture, $"c{cycle}");
            Run run = await RunChildUntilFullThenKillAsync(folder, tag, capacity);
            Assert.True(run.Refused.Count > 0, $"cycle {cycle}: the disk never filled");
            Assert.True(cycle == 0 || run.Acknowledged.Count > 0,
                $"cycle {cycle}: no commit succeeded after space was freed");
            refusedInAll += run.Refused.Count;

            // The writers' puts in flight when the child died: each writer's next index after every id it was answered
            // for (acknowledged or refused).
            var inFlight = new HashSet<string>(StringComparer.Ordinal);
            var answered = new long[Writers];
            Array.Fill(answered, -1);
            foreach (string id in run.Acknowledged.Keys.Concat(run.Refused))
            {
                (int writer, long index) = Parse(id);
                answered[writer] = Math.Max(answered[writer], index);
            }

            for (int writer = 0; writer < Writers; writer++)
            {
                inFlight.Add(string.Create(CultureInfo.InvariantCulture, $"{tag}-{writer}-{answered[writer] + 1}"));
            }

            foreach ((string id, long version) in run.Acknowledged)
            {
                model.Add(id, version);
            }

            // Reopened on the full disk, the store holds exactly the model and perhaps some of the puts in flight.
            await using (var store = DocumentStore.Open(folder, DiskFullWorkload.Options(capacity, folder)))
            {
                foreach (string id in run.Refused)
                {
                    Assert.Null(store.Get(DiskFullWorkload.Collection, id));
                }

                var found = new HashSet<string>(StringComparer.Ordinal);
                foreach (StoredDocument document in store.Scan(DiskFullWorkload.Collection))
                {
                    found.Add(document.Id);
                    Assert.Equal(DiskFullWorkload.Document(document.Id), document.Json.ToArray());
                    if (model.TryGetValue(document.Id, out long version))
                    {
                        Assert.Equal(version, document.Version);
                    }
                    else
                    {
                        Assert.True(inFlight.Contains(document.Id),
                            $"cycle {cycle}: '{document.Id}' was neither acknowledged nor in flight");
                        model.Add(document.Id, document.Version);
                    }
                }

                foreach (string id in model.Keys)
                {
                    Assert.True(found.Contains(id), $"cycle {cycle}: acknowledged '{id}' is missing");
                }
            }

            output.WriteLine(
                $"cycle {cycle}: {run.Acknowledged.Count} acknowledged, {run.Refused.Count} refused for want of " +
                $"space; {model.Count} documents in the store");

            // Free some space for the next child.
            using var stream = new FileStream(filler, FileMode.Open, FileAccess.Write);
            stream.SetLength(Math.Max(0, stream.Length - FreedPerCycle));
        }

        output.WriteLine($"{cycles} cycles, {model.Count} documents, {refusedInAll} puts refused for want of space");
    }

    /// <summary>Starts the child, waits until commits are refused for want of space, lets it go on a random moment
    /// longer, kills it and returns what it was answered.</summary>
    private static async Task<Run> RunChildUntilFullThenKillAsync(string folder, string tag, long capacity)
    {
        using System.Diagnostics.Process child = CrashHostProcess.Start("fill", folder, tag,
            Writers.ToString(CultureInfo.InvariantCulture), capacity.ToString(CultureInfo.InvariantCulture));
        var run = new Run(new Dictionary<string, long>(StringComparer.Ordinal), []);
        var reading = Task.Run(() =>
        {
            while (child.StandardOutput.ReadLine() is { } line)
            {
                string[] parts = line.Split(' ');
                lock (run)
                {
                    if (parts is ["ACK", string version, string id])
                    {
                        run.Acknowledged.Add(id, long.Parse(version, CultureInfo.InvariantCulture));
                    }
                    else if (parts is ["FULL", string refused])
                    {
                        run.Refused.Add(refused);
                    }
                }
            }
        });

        DateTime deadline = DateTime.UtcNow + TestDeadline.Hang;
        while (RefusedCount(run) == 0 && DateTime.UtcNow < deadline && !reading.IsCompleted)
        {
            await Task.Delay(10);
        }

        await Task.Delay(Random.Shared.Next(0, 200));
        await CrashHostProcess.KillAsync(child, reading);
        lock (run)
        {
            return run;
        }
    }

    private static int RefusedCount(Run run)
    {
        lock (run)
        {
            return run.Refused.Count;
        }
    }

    private static (int Writer, long Index) Parse(string id)
    {
        string[] parts = id.Split('-');
        return (int.Parse(parts[1], CultureInfo.InvariantCulture), long.Parse(parts[2], CultureInfo.InvariantCulture));
    }

    private static void WriteFiller(string path, long bytes)
    {
        using var stream = new FileStream(path, FileMode.Create, FileAccess.Write);
        byte[] block = new byte[1 << 20];
        for (long written = 0; written < bytes; written += block.Length)
        {
            stream.Write(block, 0, (int)Math.Min(block.Length, bytes - written));
        }

        stream.Flush(flushToDisk: true);
    }

    private sealed record Run(Dictionary<string, long> Acknowledged, List<string> Refused);
}
