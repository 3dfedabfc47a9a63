using System.Buffers;
using System.Text.Json;

namespace Folio.Tool;

/// <summary>
/// The tool's NDJSON lines, one JSON object a line. Export and import:
/// <c>{"collection":"c","id":"i","version":12,"modified":"2026-11-26T10:00:00+00:00","document":{...}}</c> (import
/// reads <c>collection</c>, <c>id</c> and <c>document</c>). Tail:
/// <c>{"sequence":12,"time":"...","collection":"c","id":"i","kind":"put","document":{...}}</c>, no document for a
/// delete. Documents are written as stored, byte for byte, but for line breaks: in valid JSON (and the store holds
/// only valid JSON) a line break can only be white space between tokens, since strings escape theirs, so each becomes
/// a space and every document stays on its line.
/// </summary>
internal static class NdjsonLine
{
    public static void WriteDocument(Utf8JsonWriter writer, StoredDocument document)
    {
        writer.WriteStartObject();
        writer.WriteString("collection", document.Collection);
        writer.WriteString("id", document.Id);
        writer.WriteNumber("version", document.Version);
        writer.WriteString("modified", document.LastModified);
        writer.WritePropertyName("document");
        WriteOnOneLine(writer, document.Json.Span);
        writer.WriteEndObject();
    }

    public static void WriteChange(Utf8JsonWriter writer, DocumentChange change)
    {
        writer.WriteStartObject();
        writer.WriteNumber("sequence", change.Sequence);
        writer.WriteString("time", change.Timestamp);
        writer.WriteString("collection", change.Collection);
        writer.WriteString("id", change.Id);
        writer.WriteString("kind", change.Kind == ChangeKind.Put ? "put" : "delete");
        if (change.Kind == ChangeKind.Put)
        {
            writer.WritePropertyName("document");
            WriteOnOneLine(writer, change.Json.Span);
        }

        writer.WriteEndObject();
    }

    /// <summary>Writes a stored document as the current value, its line breaks (white space between tokens) as
    /// spaces.</summary>
    private static void WriteOnOneLine(Utf8JsonWriter writer, ReadOnlySpan<byte> json)
    {
        if (json.IndexOfAny((byte)'\n', (byte)'\r') < 0)
        {
            writer.WriteRawValue(json, skipInputValidation: true);
            return;
        }

        byte[] copy = ArrayPool<byte>.Shared.Rent(json.Length);
        try
        {
            Span<byte> line = copy.AsSpan(0, json.Length);
            json.CopyTo(line);
            line.Replace((byte)'\n', (byte)' ');
            line.Replace((byte)'\r', (byte)' ');
            writer.WriteRawValue(line, skipInputValidation: true);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(copy);
        }
    }

    /// <summary>
    /// Reads an import line: its collection, id and document, the document's bytes exactly as in the line (not parsed
    /// and written again, which would change its spacing and escapes); throws <see cref="ToolException"/> naming the
    /// line when it is not one JSON object with a string <c>collection</c>, a string <c>id</c> and a
    /// <c>document</c>, each once.
    /// </summary>
    public static (string Collection, string Id, byte[] Document) ReadDocument(ReadOnlySpan<byte> line,
        long lineNumber)
    {
        // One level more than a document may have: the line's object holds it.
        var reader = new Utf8JsonReader(line,
            new JsonReaderOptions { MaxDepth = DocumentStoreOptions.MaxJsonDepth + 1 });
        string? collection = null;
        string? id = null;
        byte[]? document = null;
        try
        {
            if (!reader.Read() || reader.TokenType != JsonTokenType.StartObject)
            {
                throw Expected(lineNumber);
            }

            while (reader.Read() && reader.TokenType == JsonTokenType.PropertyName)
            {
                string name = reader.GetString()!;
                reader.Read();
                switch (name)
                {
                    case "collection":
                        collection = ReadOnce(ref reader, collection, name, lineNumber);
                        break;
                    case "id":
                        id = ReadOnce(ref reader, id, name, lineNumber);
                        break;
                    case "document":
                        if (document is not null)
                        {
                            throw Twice(name, lineNumber);
                        }

                        int start = (int)reader.TokenStartIndex;
                        reader.Skip();
                        document = line[start..(int)reader.BytesConsumed].ToArray();
                        break;
                    default:
                        reader.Skip();
                        break;
                }
            }

            // Reading on checks that nothing but white space follows the object.
            if (reader.TokenType != JsonTokenType.EndObject || reader.Read())
            {
                throw Expected(lineNumber);
            }
        }
        catch (JsonException e)
        {
            throw new ToolException($"line {lineNumber} is not valid JSON: {e.Message}");
        }
        catch (InvalidOperationException e)
        {
            throw new ToolException($"line {lineNumber}: {e.Message}"); // a name whose escapes are not valid UTF-16
        }

        if (collection is null || id is null || document is null)
        {
            throw Expected(lineNumber);
        }

        return (collection, id, document);
    }

    private static string ReadOnce(ref Utf8JsonReader reader, string? seen, string name, long lineNumber)
    {
        if (seen is not null)
        {
            throw Twice(name, lineNumber);
        }

        if (reader.TokenType != JsonTokenType.String)
        {
            throw Expected(lineNumber);
        }

        return reader.GetString()!;
    }

    private static ToolException Expected(long lineNumber) =>
        new($"line {lineNumber}: expected an object with \"collection\", \"id\" and \"document\"");

    private static ToolException Twice(string name, long lineNumber) =>
        new($"line {lineNumber}: \"{name}\" appears twice");
}
