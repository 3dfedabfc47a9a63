using System.Diagnostics;
using System.Text;
using Folio.Journal;

// A tour of the write-ahead journal: open a folder, append groups of entries, make them durable with one sync,
// read them back by sequence and by time, tail new commits, reopen, purge.
string directory = args.Length > 0 ? args[0]
    : Path.Combine(Path.GetTempPath(), "folio-journal-sample-" + Guid.NewGuid().ToString("N")[..8]);
bool cleanUp = args.Length == 0;
Console.WriteLine($"Journal folder: {directory}");

try
{
    var options = new JournalOptions { SegmentSize = 64 * 1024 };
    using (var journal = WriteAheadJournal.Open(directory, options))
    {
        Console.WriteLine(
            $"Opened: {journal.Recovery.Segments} segment(s), {journal.Recovery.Entries} entries recovered, " +
            $"committed sequence {journal.CommittedSequence}.");

        // A tailing reader: wakes on each commit, never polls.
        using var tail = journal.OpenReader(journal.CommittedSequence + 1);
        var tailed = 0;
        var tailTask = Task.Run(async () =>
        {
            while (tailed < 10_000 && await tail.WaitToReadAsync())
            {
                while (tail.TryRead(out _))
                {
                    tailed++;
                }
            }
        });

        var stopwatch = Stopwatch.StartNew();
        long first = 0;
        DateTimeOffset middle = default;
        for (int group = 0; group < 100; group++)
        {
            var entries = new ReadOnlyMemory<byte>[100];
            for (int i = 0; i < entries.Length; i++)
            {
                entries[i] = Encoding.UTF8.GetBytes($"{{\"group\":{group},\"item\":{i}}}");
            }

            long sequence = journal.Append(entries);
            first = first == 0 ? sequence : first;
            journal.Sync();
            if (group == 50)
            {
                middle = DateTimeOffset.UtcNow;
            }
        }

        stopwatch.Stop();
        Console.WriteLine(
            $"Appended 10,000 entries in 100 durable groups (one fdatasync each) in " +
            $"{stopwatch.Elapsed.TotalMilliseconds:F1} ms; committed sequence {journal.CommittedSequence}, " +
            $"{journal.SegmentCount} segments.");

        await tailTask.WaitAsync(TimeSpan.FromSeconds(30));
        Console.WriteLine($"The tailing reader saw {tailed:N0} entries as they were committed.");

        using (var reader = journal.OpenReader(first + 4_321))
        {
            reader.TryRead(out JournalEntry entry);
            Console.WriteLine($"Read by sequence {entry.Sequence}: {Encoding.UTF8.GetString(entry.Data)}");
        }

        using (var reader = journal.OpenReader(middle))
        {
            reader.TryRead(out JournalEntry entry);
            Console.WriteLine(
                $"First entry at or after {middle:O}: #{entry.Sequence} {Encoding.UTF8.GetString(entry.Data)}");
        }

        int purged = journal.Purge(first + 5_000);
        Console.WriteLine(
            $"Purged {purged} segment(s) before sequence {first + 5_000}; oldest available is now " +
            $"{journal.FirstSequence}.");
    }

    using (var journal = WriteAheadJournal.Open(directory, new JournalOptions { SegmentSize = 64 * 1024 }))
    {
        long count = 0;
        using var reader = journal.OpenReader(journal.FirstSequence);
        while (reader.TryRead(out _))
        {
            count++;
        }

        Console.WriteLine(
            $"Reopened: recovery checked {journal.Recovery.Records} records in " +
            $"{journal.Recovery.Duration.TotalMilliseconds:F1} ms; {count:N0} entries readable from sequence " +
            $"{journal.FirstSequence} to {journal.CommittedSequence}.");
    }
}
finally
{
    if (cleanUp)
    {
        Directory.Delete(directory, recursive: true);
    }
}

return 0;
