using System.Buffers;
using System.Text.Json;

namespace Folio.Tool;

/// <summary>
/// The tool's NDJSON lines, one JSON object a line. Export and import:
/// <c>{"collection":"c","id":"i","version":12,"modified":"2026-11-26T10:00:00+00:00","document":{...}}</c> (import
/// reads <c>collection</c>, <c>id</c> and <c>document</c>). Tail:
/// <c>{"sequence":12,"time":"...","collection":"c","id":"i","kind":"put","document":{...}}</c>, no document for a
/// delete. Documents are written as stored, byte for byte.
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
        writer.WriteRawValue(document.Json.Span, skipInputValidation: true);
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
            writer.WriteRawValue(change.Json.Span, skipInputValidation: true);
        }

        writer.WriteEndObject();
    }

    /// <summary>Reads an import line: its collection, id and document bytes; throws <see cref="ToolException"/>
    /// naming the line when a part is missing.</summary>
    public static (string Collection, string Id, byte[] Document) ReadDocument(ReadOnlySpan<byte> line,
        long lineNumber)
    {
        try
        {
            using JsonDocument parsed = JsonDocument.Parse(line.ToArray());
            JsonElement root = parsed.RootElement;
            if (root.ValueKind != JsonValueKind.Object
                || !root.TryGetProperty("collection", out JsonElement collection)
                || collection.ValueKind != JsonValueKind.String
                || !root.TryGetProperty("id", out JsonElement id) || id.ValueKind != JsonValueKind.String
                || !root.TryGetProperty("document", out JsonElement document))
            {
                throw new ToolException(
                    $"line {lineNumber}: expected an object with \"collection\", \"id\" and \"document\"");
            }

            var buffer = new ArrayBufferWriter<byte>();
            using (var writer = new Utf8JsonWriter(buffer))
            {
                document.WriteTo(writer);
            }

            return (collection.GetString()!, id.GetString()!, buffer.WrittenSpan.ToArray());
        }
        catch (JsonException e)
        {
            throw new ToolException($"line {lineNumber} is not valid JSON: {e.Message}");
        }
    }
}
