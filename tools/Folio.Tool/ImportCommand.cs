using System.Buffers;
using System.CommandLine;
using System.Globalization;
using System.IO.Pipelines;
using System.Text.Unicode;

namespace Folio.Tool;

/// <summary><c>folio import &lt;store&gt; &lt;file&gt;</c>: puts every document of an NDJSON file (the export's
/// lines; <c>-</c> reads standard input), 1,000 a commit, into a store it creates if the folder holds none.
/// Documents get new versions. A bad line stops the import; the commits before it stay.</summary>
internal static class ImportCommand
{
    private const int DocumentsPerCommit = 1_000;

    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var file = new Argument<string>("file") { Description = "An NDJSON file ('-' for standard input)." };
        var command = new Command("import", "Put every document of an NDJSON file into a store.") { store, file };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string name = parse.GetValue(file)!;
            if (name != "-" && !File.Exists(name))
            {
                throw new ToolException($"no file at '{Path.GetFullPath(name)}'");
            }

            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!, create: true);
            Stream input = name == "-" ? Console.OpenStandardInput()
                : new FileStream(name, FileMode.Open, FileAccess.Read, FileShare.Read, 1 << 16,
                    FileOptions.SequentialScan);
            long inputLength = name == "-" ? 0 : input.Length;
            ProgressDisplay? display = name == "-" ? null : new ProgressDisplay("import", inputLength);
            long imported = 0;
            long lineNumber = 0;
            long committedThrough = 0; // the last line of the last batch committed
            var batch = new CommitBatch();
            PipeReader lines = PipeReader.Create(input, new StreamPipeReaderOptions(bufferSize: 1 << 16));
            try
            {
                while (true)
                {
                    ReadResult read = await lines.ReadAsync(cancellationToken).ConfigureAwait(false);
                    ReadOnlySequence<byte> buffer = read.Buffer;
                    while (TryTakeLine(ref buffer, read.IsCompleted, out ReadOnlySequence<byte> line))
                    {
                        lineNumber++;
                        if (ReadLine(line, lineNumber) is not { } document)
                        {
                            continue;
                        }

                        try
                        {
                            batch.Put(document.Collection, document.Id, document.Document);
                        }
                        catch (ArgumentException e)
                        {
                            throw new ToolException($"line {lineNumber}: {e.Message}");
                        }

                        if (batch.Count == DocumentsPerCommit)
                        {
                            imported += await CommitAsync(opened, batch, lineNumber, cancellationToken)
                                .ConfigureAwait(false);
                            committedThrough = lineNumber;
                            batch = new CommitBatch();
                            display?.Report(input.Position);
                        }
                    }

                    lines.AdvanceTo(buffer.Start, buffer.End);
                    if (read.IsCompleted)
                    {
                        break;
                    }
                }

                if (batch.Count > 0)
                {
                    imported += await CommitAsync(opened, batch, lineNumber, cancellationToken).ConfigureAwait(false);
                }
            }
            catch (ToolException e)
            {
                // Batches commit as the lines are read: say what the store holds now, so the operator knows that
                // fixing the line and importing the file again rewrites the same documents.
                throw new ToolException($"{e.Message.TrimEnd('.')}; {Kept(imported, committedThrough)}");
            }
            finally
            {
                await lines.CompleteAsync().ConfigureAwait(false);
            }

            display?.Complete(inputLength);
            await Console.Out.WriteLineAsync(string.Create(CultureInfo.InvariantCulture,
                $"imported {imported} documents, last commit {opened.LastCommittedSequence}")).ConfigureAwait(false);
            return 0;
        }));
        return command;
    }

    /// <summary>What an import that stopped kept: the batches committed before it stopped.</summary>
    private static string Kept(long imported, long committedThrough) => imported == 0
        ? "nothing was imported"
        : string.Create(CultureInfo.InvariantCulture,
            $"the {imported} documents of lines 1 to {committedThrough} were imported, none after");

    /// <summary>Takes the next line (without its line break) off <paramref name="buffer"/>; at the end of the input,
    /// what is left is the last line.</summary>
    private static bool TryTakeLine(ref ReadOnlySequence<byte> buffer, bool isCompleted,
        out ReadOnlySequence<byte> line)
    {
        if (buffer.PositionOf((byte)'\n') is { } end)
        {
            line = buffer.Slice(0, end);
            buffer = buffer.Slice(buffer.GetPosition(1, end));
            return true;
        }

        if (!isCompleted || buffer.IsEmpty)
        {
            line = default; // a partial line stays in the buffer until its end arrives
            return false;
        }

        line = buffer;
        buffer = buffer.Slice(buffer.End);
        return true;
    }

    /// <summary>The document of one line, or null for an empty line; throws <see cref="ToolException"/> naming the
    /// line when its bytes are not UTF-8 or it is not an export line.</summary>
    private static (string Collection, string Id, byte[] Document)? ReadLine(ReadOnlySequence<byte> line,
        long lineNumber)
    {
        ReadOnlySpan<byte> bytes = line.IsSingleSegment ? line.FirstSpan : line.ToArray();
        if (bytes.EndsWith((byte)'\r'))
        {
            bytes = bytes[..^1];
        }

        if (lineNumber == 1 && bytes.StartsWith("\uFEFF"u8))
        {
            bytes = bytes[3..]; // a byte order mark, as some editors and shells write before UTF-8 text
        }

        if (bytes.IsEmpty)
        {
            return null;
        }

        if (!Utf8.IsValid(bytes))
        {
            throw new ToolException($"line {lineNumber} is not valid UTF-8");
        }

        return NdjsonLine.ReadDocument(bytes, lineNumber);
    }

    private static async Task<int> CommitAsync(DocumentStore store, CommitBatch batch, long lineNumber,
        CancellationToken cancellationToken)
    {
        try
        {
            await store.WriteAsync(batch, cancellationToken).ConfigureAwait(false);
            return batch.Count;
        }
        catch (ArgumentException e)
        {
            throw new ToolException($"the documents up to line {lineNumber} were refused: {e.Message}");
        }
    }
}
