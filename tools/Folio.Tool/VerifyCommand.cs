using System.CommandLine;
using System.Globalization;

namespace Folio.Tool;

/// <summary><c>folio verify &lt;store&gt;</c>: reads every page and journal record back from disk and checks it
/// (<see cref="DocumentStore.VerifyFilesAsync"/>, so it checks a store another process has open); exit code 2 when
/// anything fails, each problem on its own line.</summary>
internal static class VerifyCommand
{
    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var command = new Command("verify", "Check every page and journal record of a store.") { store };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string folder = ToolStore.RequireStore(parse.GetValue(store)!);
            ProgressDisplay? display = null;
            var reporter = new SynchronousProgress(report =>
            {
                display ??= new ProgressDisplay("verify", report.TotalBytes);
                display.Report(report.Bytes);
            });
            // From the files, so a store a running service holds can be checked too.
            VerifyResult result = await DocumentStore.VerifyFilesAsync(folder, reporter, cancellationToken)
                .ConfigureAwait(false);
            display?.Complete();
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"checked {result.Chunks} chunks ({result.Pages} pages) and {result.JournalSegments} journal segments "
                + $"({result.JournalRecords} records), {result.Bytes / 1048576.0:F1} MiB")).ConfigureAwait(false);
            foreach (string problem in result.Problems)
            {
                await Console.Out.WriteLineAsync($"problem: {problem}").ConfigureAwait(false);
            }

            if (!result.IsHealthy)
            {
                int damaged = result.Problems.Count;
                await Console.Error.WriteLineAsync(
                    $"folio: the store has {damaged} damaged part{(damaged == 1 ? "" : "s")}").ConfigureAwait(false);
                return ToolStore.Damaged;
            }

            await Console.Out.WriteLineAsync("healthy").ConfigureAwait(false);
            return 0;
        }));
        return command;
    }

    /// <summary>Reports on the scrub's own thread, so the last report is drawn before the result is printed.</summary>
    private sealed class SynchronousProgress(Action<VerifyProgress> report) : IProgress<VerifyProgress>
    {
        public void Report(VerifyProgress value) => report(value);
    }
}
