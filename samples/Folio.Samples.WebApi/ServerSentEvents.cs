using System.Buffers;
using System.IO.Pipelines;
using System.Text.Json;

namespace Folio.Samples.WebApi;

/// <summary>
/// Writes the notes' change feed as Server-Sent Events straight into a <see cref="PipeWriter"/> (Kestrel's
/// <c>Response.BodyWriter</c>): each event's framing and JSON go into the pipe's own memory (no string, no encoding
/// copy per event), and the pipe is flushed only when the feed has nothing more ready (before it waits for the next
/// commit) or 64 KiB are pending, so a burst of changes goes out in few writes. The flush's result carries the
/// client's backpressure: a slow client holds the loop at the pipe's threshold, and a closed connection ends it.
/// </summary>
internal static class ServerSentEvents
{
    private const int FlushThreshold = 64 * 1024;

    // ChangeEvent's property names as its source-generated serializer writes them (JsonSerializerDefaults.Web).
    private static readonly JsonEncodedText s_sequence = JsonEncodedText.Encode("sequence");
    private static readonly JsonEncodedText s_timestamp = JsonEncodedText.Encode("timestamp");
    private static readonly JsonEncodedText s_id = JsonEncodedText.Encode("id");
    private static readonly JsonEncodedText s_kind = JsonEncodedText.Encode("kind");
    private static readonly JsonEncodedText s_note = JsonEncodedText.Encode("note");
    private static readonly JsonEncodedText s_put = JsonEncodedText.Encode("put");
    private static readonly JsonEncodedText s_delete = JsonEncodedText.Encode("delete");

    /// <summary>Writes every change of <paramref name="changes"/> (its first step, <paramref name="first"/>, already
    /// taken) to <paramref name="destination"/> until the feed ends, the client goes away, or
    /// <paramref name="cancellationToken"/> fires; returns the events written.</summary>
    public static async Task<long> WriteAsync(IAsyncEnumerator<DocumentChange> changes, bool first,
        PipeWriter destination, CancellationToken cancellationToken)
    {
        long events = 0;
        long pending = 0; // bytes written since the last flush (not every PipeWriter can tell its unflushed bytes)
        using var json = new Utf8JsonWriter(destination);
        bool any = first;
        while (any)
        {
            DocumentChange change = changes.Current;
            if (change.Collection == NoteEndpoints.Collection)
            {
                pending += Write(change, destination, json);
                events++;
            }

            ValueTask<bool> next = changes.MoveNextAsync();
            if (!next.IsCompleted || pending >= FlushThreshold)
            {
                pending = 0;
                FlushResult flushed = await destination.FlushAsync(cancellationToken);
                if (flushed.IsCompleted || flushed.IsCanceled)
                {
                    await next; // a ValueTask is awaited once, even when its result is not needed
                    return events;
                }
            }

            any = await next;
        }

        await destination.FlushAsync(cancellationToken);
        return events;
    }

    /// <summary>Writes <c>id: {sequence}\nevent: {kind}\ndata: {ChangeEvent JSON}\n\n</c> into the pipe's memory and
    /// returns its length. The
    /// <see cref="ChangeEvent"/> is written field by field with the note's stored JSON copied in as it is (the store
    /// checked it when it was written), its line breaks as spaces, so no note is deserialized and serialized again per
    /// event.</summary>
    private static long Write(DocumentChange change, PipeWriter destination, Utf8JsonWriter json)
    {
        bool put = change.Kind == ChangeKind.Put;
        Span<byte> head = destination.GetSpan(64);
        "id: "u8.CopyTo(head);
        int at = 4;
        change.Sequence.TryFormat(head[at..], out int digits,
            provider: System.Globalization.CultureInfo.InvariantCulture);
        at += digits;
        ReadOnlySpan<byte> kind = put ? "\nevent: put\ndata: "u8 : "\nevent: delete\ndata: "u8;
        kind.CopyTo(head[at..]);
        at += kind.Length;
        destination.Advance(at);
        json.Reset(destination);
        json.WriteStartObject();
        json.WriteNumber(s_sequence, change.Sequence);
        json.WriteString(s_timestamp, change.Timestamp);
        json.WriteString(s_id, change.Id);
        json.WriteString(s_kind, put ? s_put : s_delete);
        json.WritePropertyName(s_note);
        if (put)
        {
            WriteOnOneLine(json, change.Json.Span);
        }
        else
        {
            json.WriteNullValue();
        }

        json.WriteEndObject();
        json.Flush();
        destination.Write("\n\n"u8);
        return at + json.BytesCommitted + 2;
    }

    /// <summary>Writes a stored note as the current value. An event's data is one line, and a note stored
    /// pretty-printed (by another writer) has line breaks; in valid JSON they can only be white space between tokens
    /// (strings escape theirs), so each is written as a space.</summary>
    private static void WriteOnOneLine(Utf8JsonWriter json, ReadOnlySpan<byte> note)
    {
        if (note.IndexOfAny((byte)'\n', (byte)'\r') < 0)
        {
            json.WriteRawValue(note, skipInputValidation: true);
            return;
        }

        byte[] copy = ArrayPool<byte>.Shared.Rent(note.Length);
        try
        {
            Span<byte> line = copy.AsSpan(0, note.Length);
            note.CopyTo(line);
            line.Replace((byte)'\n', (byte)' ');
            line.Replace((byte)'\r', (byte)' ');
            json.WriteRawValue(line, skipInputValidation: true);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(copy);
        }
    }
}
