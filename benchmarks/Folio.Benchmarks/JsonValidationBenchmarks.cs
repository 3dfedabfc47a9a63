using System.Text;
using System.Text.Json;
using BenchmarkDotNet.Attributes;

namespace Folio.Benchmarks;

/// <summary>
/// What validating a raw document costs on the point-write path: <c>PutAsync</c> checks that its bytes are one JSON
/// value (<see cref="Utf8JsonReader"/>) and, since that reader does not check the UTF-8 inside strings and property
/// names, that they are valid UTF-8 (<see cref="System.Text.Unicode.Utf8.IsValid(ReadOnlySpan{byte})"/>).
/// <c>JsonGrammar</c> is the reader pass alone (the check before the UTF-8 validation was added), <c>JsonAndUtf8</c>
/// the store's whole check, and <c>PutAsyncBuffered</c> the public point write of the same document into a
/// <see cref="DurabilityMode.Buffered"/> store (no fsync per write, so the check is as visible as it can
/// be; a durable write adds an fdatasync of 80-500 µs on this host). Document size: <see cref="Bytes"/>; text: ASCII or
/// with a multi-byte character every few bytes (<see cref="NonAscii"/>).
/// </summary>
public class JsonValidationBenchmarks : BenchmarkDirectory
{
    private static readonly JsonSerializerOptions s_unescaped = new() {
        Encoder = System.Text.Encodings.Web.JavaScriptEncoder.UnsafeRelaxedJsonEscaping };
    private DocumentStore _store = null!;
    private byte[] _json = null!;
    private int _next;

    /// <summary>The document size in bytes (about: a JSON object with one string of text with some
    /// non-ASCII).</summary>
    [Params(200, 4096, 65536)]
    public int Bytes { get; set; }

    /// <summary>Whether the text is German with umlauts (a multi-byte sequence every few bytes) or plain
    /// ASCII.</summary>
    [Params(false, true)]
    public bool NonAscii { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        CreateRoot();
        var text = new StringBuilder();
        while (Encoding.UTF8.GetByteCount(text.ToString()) < Bytes - 20)
        {
            text.Append(NonAscii ? "Grüße aus Zürich, " : "Greetings from Zurich, ");
        }

        _json = JsonSerializer.SerializeToUtf8Bytes(new { Text = text.ToString() }, s_unescaped);
        _store = DocumentStore.Open(NewFolder("folio"),
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered, MaxDocumentSize = 1 << 20 });
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _store.Dispose();
        DeleteRoot();
    }

    [Benchmark(Baseline = true)]
    public bool JsonGrammar()
    {
        // The store's grammar check, as it was before the UTF-8 validation.
        var reader = new Utf8JsonReader(_json);
        while (reader.Read())
        {
        }

        return reader.BytesConsumed == _json.Length && reader.TokenType != JsonTokenType.None;
    }

    [Benchmark]
    public void JsonAndUtf8() => _store.CheckDocument("Docs", "doc", _json, validateJson: true);

    [Benchmark]
    public ValueTask<long> PutAsyncBuffered() => _store.PutAsync("Docs", $"doc{_next++ & 1023}", _json);
}
