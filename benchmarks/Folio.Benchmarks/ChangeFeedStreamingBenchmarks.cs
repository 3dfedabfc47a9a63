using System.Globalization;
using System.IO.Pipelines;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Text.Json;
using BenchmarkDotNet.Attributes;
using Folio.Samples.WebApi;

namespace Folio.Benchmarks;

/// <summary>
/// The web sample's Server-Sent Events change feed streamed to a loopback TCP socket (another task drains the other
/// end): <see cref="PerEvent"/> is the sample's endpoint before it wrote through <c>Response.BodyWriter</c> (each
/// event built as a string, encoded, written and flushed on its own); <see cref="Pipe"/> is
/// <see cref="ServerSentEvents.WriteAsync"/>, the sample's endpoint now, over a <see cref="PipeWriter"/> on the
/// socket's stream. Each invocation streams the <see cref="Changes"/> changes of a store of notes from the first to
/// the last; time per change.
/// </summary>
public class ChangeFeedStreamingBenchmarks : BenchmarkDirectory
{
    private const int Changes = 20_000;
    private DocumentStore? _store;
    private Socket? _listener;
    private Socket? _client;
    private Socket? _server;
    private NetworkStream? _stream;
    private Task? _drain;

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        _store = DocumentStore.Open(NewFolder("store"), new DocumentStoreOptions
        {
            Durability = DurabilityMode.Buffered,
        });
        for (int i = 0; i < Changes; i++)
        {
            var note = new Note
            {
                Id = FormattableString.Invariant($"n{i:D6}"),
                Title = FormattableString.Invariant($"Note {i}"),
                Body = "A note of a few words, as a user writes them.",
                Tags = ["work", "ideas"],
                UpdatedUtc = new DateTime(2026, 11, 26, 0, 0, 0, DateTimeKind.Utc),
            };
            _store.WriteAsync(new CommitBatch().Put(NoteEndpoints.Collection, note.Id!,
                JsonSerializer.SerializeToUtf8Bytes(note, NotesJsonContext.Default.Note))).AsTask().GetAwaiter()
                .GetResult();
        }

        _listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        _listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        _listener.Listen(1);
        _client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        _client.Connect(_listener.LocalEndPoint!);
        _server = _listener.Accept();
        _stream = new NetworkStream(_client, ownsSocket: false);
        _drain = Task.Run(async () =>
        {
            byte[] buffer = new byte[1 << 16];
            while (await _server.ReceiveAsync(buffer).ConfigureAwait(false) > 0)
            {
            }
        });
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _client?.Shutdown(SocketShutdown.Both);
        _client?.Dispose();
        _drain?.Wait(TimeSpan.FromSeconds(5));
        _server?.Dispose();
        _listener?.Dispose();
        _store?.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Changes)]
    public async Task<long> PerEvent()
    {
        long events = 0;
        await foreach (DocumentChange change in _store!.Changes.ReadAsync(1, _store.LastCommittedSequence)
            .ConfigureAwait(false))
        {
            Note? note = change.Kind == ChangeKind.Put
                ? JsonSerializer.Deserialize(change.Json.Span, NotesJsonContext.Default.Note) : null;
            var payload = new ChangeEvent(change.Sequence, change.Timestamp, change.Id,
                change.Kind == ChangeKind.Put ? "put" : "delete", note);
            string json = JsonSerializer.Serialize(payload, NotesJsonContext.Default.ChangeEvent);
            string frame = string.Create(CultureInfo.InvariantCulture,
                $"id: {change.Sequence}\nevent: {payload.Kind}\ndata: {json}\n\n");
            await _stream!.WriteAsync(Encoding.UTF8.GetBytes(frame)).ConfigureAwait(false);
            await _stream.FlushAsync().ConfigureAwait(false);
            events++;
        }

        return events;
    }

    [Benchmark(OperationsPerInvoke = Changes)]
    public async Task<long> Pipe()
    {
        PipeWriter writer = PipeWriter.Create(_stream!, new StreamPipeWriterOptions(leaveOpen: true));
        await using IAsyncEnumerator<DocumentChange> changes = _store!.Changes
            .ReadAsync(1, _store.LastCommittedSequence).GetAsyncEnumerator();
        long events = await ServerSentEvents.WriteAsync(changes, await changes.MoveNextAsync().ConfigureAwait(false),
            writer, CancellationToken.None).ConfigureAwait(false);
        await writer.CompleteAsync().ConfigureAwait(false);
        return events;
    }
}
