using System.Globalization;

namespace Folio.Samples.Quickstart;

/// <summary>The quickstart's command line: every option has a default, so no argument is needed.</summary>
internal sealed class QuickstartOptions
{
    public const string Usage = """
        Folio quickstart: writes documents from concurrent sessions, loads and queries them, reads the change feed.

        Usage: dotnet run --project samples/Folio.Samples.Quickstart -- [options]

        Options:
          --data <folder>      The store's folder. Default: ./folio-data
          --documents <n>      Documents to write. Default: 5000
          --sessions <n>       Concurrent sessions writing them (one document per SaveChanges). Default: 16
          --buffered           Acknowledge commits after the OS write, fsync every 100 ms (default: after fsync)
          --fresh              Delete the folder first
          -h, --help           Show this help
        """;

    public string DataFolder { get; private set; } = "folio-data";

    public int Documents { get; private set; } = 5000;

    public int Sessions { get; private set; } = 16;

    public bool Buffered { get; private set; }

    public bool Fresh { get; private set; }

    public bool Help { get; private set; }

    /// <summary>Parses <paramref name="args"/>; throws <see cref="ArgumentException"/> with a readable
    /// message.</summary>
    public static QuickstartOptions Parse(string[] args)
    {
        var options = new QuickstartOptions();
        for (int i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "-h" or "--help" or "-?":
                    options.Help = true;
                    break;
                case "--data":
                    options.DataFolder = Value(args, ref i);
                    break;
                case "--documents":
                    options.Documents = Count(args, ref i, 1, 10_000_000);
                    break;
                case "--sessions":
                    options.Sessions = Count(args, ref i, 1, 4096);
                    break;
                case "--buffered":
                    options.Buffered = true;
                    break;
                case "--fresh":
                    options.Fresh = true;
                    break;
                default:
                    throw new ArgumentException($"Unknown option '{args[i]}'. Run with --help for the options.");
            }
        }

        return options;
    }

    private static string Value(string[] args, ref int i)
    {
        if (i + 1 >= args.Length || args[i + 1].StartsWith("--", StringComparison.Ordinal))
        {
            throw new ArgumentException($"Option '{args[i]}' needs a value.");
        }

        return args[++i];
    }

    private static int Count(string[] args, ref int i, int min, int max)
    {
        string name = args[i];
        string text = Value(args, ref i);
        if (!int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out int value) || value < min
            || value > max)
        {
            throw new ArgumentException($"Option '{name}' must be a whole number from {min} to {max} (was '{text}').");
        }

        return value;
    }
}
