using System.Buffers;
using System.CommandLine;
using System.Diagnostics.CodeAnalysis;
using System.Globalization;
using System.IO.Pipelines;
using System.Text.Unicode;

namespace Folio.Tool;

/// <summary><c>folio import &lt;store&gt; &lt;file&gt;</c>: puts every document of an NDJSON file (the export's
/// lines; <c>-</c> reads standard input), 1,000 a commit or fewer when they pass 4 MiB (a commit is one journal
/// record, and large documents would outgrow it), into a store it creates if the folder holds none.
/// Documents get new versions. A bad line stops the import; the commits before it stay. A line is read whole before
/// it is parsed, so a line longer than the largest document allowed plus <see cref="LineEnvelopeBytes"/> stops the
/// import as soon as that much of it is buffered (a file with no line breaks never fills memory), and the search for
/// a line's end never reads a byte twice.</summary>
internal static class ImportCommand
{
    private const int DocumentsPerCommit = 1_000;

    /// <summary>The bytes of documents past which a commit takes no more: a commit is one journal record, which a
    /// segment must hold (a single document larger than this commits alone).</summary>
    private const long BytesPerCommit = 4 << 20;

    /// <summary>What a line holds besides its document: the collection and the id (at most 2,048 UTF-8 bytes each,
    /// up to six bytes per byte when escaped), the other members of an export line and white space.</summary>
    private const int LineEnvelopeBytes = 64 << 10;

    /// <summary>The largest <see cref="DocumentStoreOptions.MaxDocumentSize"/> a store accepts: 256 MiB.</summary>
    private const int LargestDocumentSize = 256 << 20;

    public static Command Create()
    {
        Argument<string> store = ToolStore.StoreArgument();
        var file = new Argument<string>("file") { Description = "An NDJSON file ('-' for standard input)." };
        var maxSize = new Option<int>("--max-document-size")
        {
            Description = "The largest document to accept, in bytes (the store's MaxDocumentSize for this import; "
                + "raise it for an export of a store that allows larger documents).",
            DefaultValueFactory = _ => DocumentStoreOptions.DefaultMaxDocumentSize,
        };
        var command = new Command("import", "Put every document of an NDJSON file into a store.")
        {
            store, file, maxSize,
        };
        command.SetAction((parse, cancellationToken) => ToolStore.RunAsync(async () =>
        {
            string name = parse.GetValue(file)!;
            int maxDocumentSize = parse.GetValue(maxSize);
            if (maxDocumentSize is <= 0 or > LargestDocumentSize)
            {
                throw new ToolException(string.Create(CultureInfo.InvariantCulture,
                    $"--max-document-size must be between 1 and {LargestDocumentSize} bytes, "
                    + $"not {maxDocumentSize}."));
            }

            if (name != "-" && !File.Exists(name))
            {
                throw new ToolException($"no file at '{Path.GetFullPath(name)}'");
            }

            await using DocumentStore opened = ToolStore.Open(parse.GetValue(store)!, create: true, maxDocumentSize);
            long maxLine = (long)maxDocumentSize + LineEnvelopeBytes;
            Stream input = name == "-" ? Console.OpenStandardInput()
                : new FileStream(name, FileMode.Open, FileAccess.Read, FileShare.Read, 1 << 16,
                    FileOptions.SequentialScan);
            long inputLength = name == "-" ? 0 : input.Length;
            ProgressDisplay? display = name == "-" ? null : new ProgressDisplay("import", inputLength);
            long imported = 0;
            long lineNumber = 0;
            long committedThrough = 0; // the last line of the last batch committed
            long searched = 0; // bytes of the buffered partial line already searched for its end
            var batch = new CommitBatch();
            long batchBytes = 0;
            PipeReader lines = PipeReader.Create(input, new StreamPipeReaderOptions(bufferSize: 1 << 16));

            // Commits the batch, whose last document came from line <through>, and starts the next.
            async Task CommitBatchAsync(long through)
            {
                imported += await CommitAsync(opened, batch, through, cancellationToken).ConfigureAwait(false);
                committedThrough = through;
                batch = new CommitBatch();
                batchBytes = 0;
                display?.Report(input.Position);
            }

            try
            {
                while (true)
                {
                    ReadResult read = await lines.ReadAsync(cancellationToken).ConfigureAwait(false);
                    ReadOnlySequence<byte> buffer = read.Buffer;
                    while (TryTakeLine(ref buffer, read.IsCompleted, ref searched, out ReadOnlySequence<byte> line))
                    {
                        lineNumber++;
                        if (line.Length > maxLine)
                        {
                            ThrowLineTooLong(lineNumber, maxLine, maxDocumentSize);
                        }

                        if (ReadLine(line, lineNumber) is not { } document)
                        {
                            continue;
                        }

                        if (document.Document.Length > maxDocumentSize)
                        {
                            throw new ToolException(string.Create(CultureInfo.InvariantCulture,
                                $"line {lineNumber}: the document is {document.Document.Length} bytes, more than "
                                + $"--max-document-size ({maxDocumentSize})"));
                        }

                        long documentBytes = document.Document.Length + (2L * (document.Collection.Length
                            + document.Id.Length));
                        if (batch.Count > 0 && batchBytes + documentBytes > BytesPerCommit)
                        {
                            await CommitBatchAsync(lineNumber - 1).ConfigureAwait(false);
                        }

                        try
                        {
                            batch.Put(document.Collection, document.Id, document.Document);
                            batchBytes += documentBytes;
                        }
                        catch (ArgumentException e)
                        {
                            throw new ToolException($"line {lineNumber}: {e.Message}");
                        }

                        if (batch.Count == DocumentsPerCommit)
                        {
                            await CommitBatchAsync(lineNumber).ConfigureAwait(false);
                        }
                    }

                    if (buffer.Length > maxLine)
                    {
                        ThrowLineTooLong(lineNumber + 1, maxLine, maxDocumentSize); // its end not even in sight
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

    [DoesNotReturn]
    private static void ThrowLineTooLong(long lineNumber, long maxLine, int maxDocumentSize) =>
        throw new ToolException(string.Create(CultureInfo.InvariantCulture,
            $"line {lineNumber} is longer than {maxLine} bytes, more than a line with a document of at most "
            + $"--max-document-size ({maxDocumentSize}) bytes can be"));

    /// <summary>Takes the next line (without its line break) off <paramref name="buffer"/>; at the end of the input,
    /// what is left is the last line. <paramref name="searched"/>: how much of a partial line earlier calls searched
    /// (its end is after those bytes), kept up to date so that no byte is searched twice.</summary>
    private static bool TryTakeLine(ref ReadOnlySequence<byte> buffer, bool isCompleted, ref long searched,
        out ReadOnlySequence<byte> line)
    {
        if (buffer.Slice(searched).PositionOf((byte)'\n') is { } end)
        {
            line = buffer.Slice(0, end);
            buffer = buffer.Slice(buffer.GetPosition(1, end));
            searched = 0;
            return true;
        }

        if (!isCompleted || buffer.IsEmpty)
        {
            searched = buffer.Length;
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
