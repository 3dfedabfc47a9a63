using System.IO.Pipelines;
using System.Text;
using System.Text.Json;
using Folio.Samples.WebApi;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Samples;

/// <summary>
/// The web sample's Server-Sent Events writer over a <see cref="PipeWriter"/>: every note change arrives once, in
/// order, in the SSE framing; a slow reader holds the writer at the pipe's threshold; a reader that goes away ends
/// the stream.
/// </summary>
public sealed class ServerSentEventsTests
{
    [Fact]
    public async Task Every_change_arrives_in_order_and_a_slow_reader_holds_the_writer_back()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"),
            TestStoreOptions.SmallSegments());
        // Some notes stored pretty-printed by another writer: their line breaks must not break an event's data line.
        var indented = new NotesJsonContext(
            new JsonSerializerOptions(NotesJsonContext.Default.Options) { WriteIndented = true });
        for (int i = 0; i < 2_000; i++)
        {
            var note = new Note { Id = $"n{i:D5}", Title = $"Note {i}", Body = new string('b', 200) };
            await store.PutAsync(NoteEndpoints.Collection, note.Id, i % 7 == 0
                ? JsonSerializer.SerializeToUtf8Bytes(note, indented.Note)
                : JsonSerializer.SerializeToUtf8Bytes(note, NotesJsonContext.Default.Note));
            if (i % 10 == 9)
            {
                await store.DeleteAsync(NoteEndpoints.Collection, $"n{i - 5:D5}");
            }
        }

        await store.PutAsync("other", "x", "{}"u8.ToArray()); // not a note: not sent

        const int Threshold = 16 * 1024;
        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: Threshold, resumeWriterThreshold: Threshold / 2,
            useSynchronizationContext: false));
        long largest = 0;
        var text = new StringBuilder();
        Task reader = Task.Run(async () =>
        {
            while (true)
            {
                ReadResult result = await pipe.Reader.ReadAsync();
                largest = Math.Max(largest, result.Buffer.Length);
                foreach (ReadOnlyMemory<byte> segment in result.Buffer)
                {
                    text.Append(Encoding.UTF8.GetString(segment.Span));
                }

                pipe.Reader.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    return;
                }

                await Task.Delay(1);
            }
        });

        await using (IAsyncEnumerator<DocumentChange> changes = store.Changes.ReadAsync(1,
            store.LastCommittedSequence).GetAsyncEnumerator())
        {
            long events = await ServerSentEvents.WriteAsync(changes, await changes.MoveNextAsync(), pipe.Writer,
                CancellationToken.None);
            Assert.Equal(2_200, events);
        }

        await pipe.Writer.CompleteAsync();
        await reader;

        // A flush waits while the pipe holds the threshold; between flushes the writer adds at most 64 KiB and an
        // event.
        Assert.True(largest <= Threshold + (64 * 1024) + 4096, $"{largest} bytes were buffered");
        string[] frames = text.ToString().Split("\n\n", StringSplitOptions.RemoveEmptyEntries);
        Assert.Equal(2_200, frames.Length);
        long previous = 0;
        foreach (string frame in frames)
        {
            string[] lines = frame.Split('\n');
            Assert.Equal(3, lines.Length);
            Assert.StartsWith("id: ", lines[0], StringComparison.Ordinal);
            long id = long.Parse(lines[0][4..], System.Globalization.CultureInfo.InvariantCulture);
            Assert.True(id > previous);
            previous = id;
            Assert.True(lines[1] is "event: put" or "event: delete", lines[1]);
            // The event reads back as the sample's ChangeEvent through its own serializer.
            ChangeEvent? data = JsonSerializer.Deserialize(lines[2]["data: ".Length..],
                NotesJsonContext.Default.ChangeEvent);
            Assert.NotNull(data);
            Assert.Equal(id, data.Sequence);
            Assert.Equal(lines[1]["event: ".Length..], data.Kind);
            Assert.Equal(data.Kind == "put", data.Note is not null);
            if (data.Note is { } note)
            {
                Assert.Equal(data.Id, note.Id);
                Assert.Equal($"Note {int.Parse(note.Id!.AsSpan(1), System.Globalization.CultureInfo.InvariantCulture)}",
                    note.Title);
            }
        }
    }

    [Fact]
    public async Task A_reader_that_goes_away_ends_the_stream()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = DocumentStore.Open(Path.Combine(dir.Path, "store"),
            TestStoreOptions.SmallSegments());
        for (int i = 0; i < 3_000; i++)
        {
            await store.PutAsync(NoteEndpoints.Collection, $"n{i:D5}", "{\"title\":\"t\"}"u8.ToArray());
        }

        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: 8 * 1024, resumeWriterThreshold: 4 * 1024));
        await pipe.Reader.CompleteAsync(); // the client is gone
        await using IAsyncEnumerator<DocumentChange> changes = store.Changes.ReadAsync(1,
            store.LastCommittedSequence).GetAsyncEnumerator();
        long events = await ServerSentEvents.WriteAsync(changes, await changes.MoveNextAsync(), pipe.Writer,
            CancellationToken.None);
        Assert.InRange(events, 1, 2_999); // stopped at the first flush that found the reader gone
    }
}
