using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using Folio.Tests.Infrastructure;
using Xunit.Abstractions;

namespace Folio.Tests.Documents;

/// <summary>
/// Raw writes of mutated JSON and of random ids, each decided against an oracle written from the rules alone, not from
/// the store's code: a document is taken exactly when it is valid UTF-8, one complete JSON value (not null) that
/// System.Text.Json reads, and every string and property name in it reads as text (no escaped lone surrogate); an id
/// or a collection name exactly when it is not empty, at most 2 KiB of UTF-8, without control characters and without a
/// lone surrogate. A refusal is an <see cref="ArgumentException"/> that leaves the document as it was; what is taken
/// reads back byte for byte by its id, through a session's query, after a checkpoint and after a reopen. Each write
/// may be a single put or part of a batch whose other put is valid, so a refused batch must leave that one out too.
/// CI runs 400 writes of each kind; <c>FOLIO_FUZZ_WRITES</c> and <c>FOLIO_FUZZ_SEED</c> run more or others.
/// </summary>
public sealed class InputFuzzTests(ITestOutputHelper output)
{
    private static readonly string[] s_seeds =
    [
        "{\"Name\":\"Ada\",\"Age\":36,\"Tags\":[\"a\",\"b\"],\"Nested\":{\"x\":1.5e3,\"y\":null,\"z\":true}}",
        "{\"Text\":\"caf\\u00e9 \\ud83d\\ude00 \\\"quoted\\\" \\\\ tab\\t\",\"Emoji\":\"\u00e9\u6771\U0001F600\"}",
        "[1,2,3,{\"a\":[[],{}]},\"s\",-0.5,false]",
        "\"just a string\"",
        "12345",
        "{\"a\":{\"b\":{\"c\":{\"d\":[1,[2,[3]]]}}},\"e\":\"\\u0041\\u00DF\"}",
        "  { \"spaced\" : [ 1 , 2 ] }  ",
    ];

    // Bytes a mutation inserts: JSON's structure, escapes, and UTF-8 that is invalid or encodes what text cannot hold
    // (an overlong form, a surrogate, a code point past U+10FFFF, a lone continuation byte, a byte-order mark).
    private static readonly byte[][] s_insertions =
    [
        "\""u8.ToArray(), "\\"u8.ToArray(), "{"u8.ToArray(), "}"u8.ToArray(), "["u8.ToArray(), "]"u8.ToArray(),
        ","u8.ToArray(), ":"u8.ToArray(), "null"u8.ToArray(), "\\ud800"u8.ToArray(), "\\udc00"u8.ToArray(),
        "\\ud83d\\ude00"u8.ToArray(), "\\u0000"u8.ToArray(), "\\x"u8.ToArray(), [0x00], [0x7F], [0xC0, 0xAF],
        [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80], [0xFF], [0xEF, 0xBB, 0xBF], [0xC3, 0xA9],
        [0xF0, 0x9F, 0x98, 0x80], "/* c */"u8.ToArray(), " "u8.ToArray(), "1e999"u8.ToArray(),
    ];

    // Characters ids are built from: ASCII, the control ranges, both halves of a surrogate pair alone and together,
    // characters whose UTF-8 orders otherwise than their UTF-16, and ones that look alike.
    private static readonly string[] s_idParts =
    [
        "a", "Z", "0", "/", "-", ".", " ", "\\", "\"", "\u0000", "\u001f", "\u007f", "\u0085", "\u009f", "\u00a0",
        "\u00e9", "e\u0301", "\u6771", "\uD83D", "\uDE00", "\U0001F600", "\uE000", "\uFF21", "\uFFFD", "\uFEFF",
        "\uFFFF",
    ];

    [Fact]
    public async Task Mutated_json_is_taken_exactly_when_valid_text_and_reads_back_byte_for_byte()
    {
        var random = new Random(Seed());
        using var dir = new TempDirectory();
        DocumentStore store = DocumentStore.Open(dir.Path, Options("fuzz"));
        var model = new SortedDictionary<string, byte[]>(StringComparer.Ordinal);
        int taken = 0;
        int refused = 0;
        try
        {
            int writes = Writes();
            for (int i = 0; i < writes; i++)
            {
                string id = $"doc-{random.Next(64):D2}";
                byte[] json = Mutate(Encoding.UTF8.GetBytes(s_seeds[random.Next(s_seeds.Length)]), random);
                bool valid = IsValidDocument(json);
                bool batched = random.Next(3) == 0;
                string other = $"other-{i}";
                try
                {
                    if (batched)
                    {
                        await store.WriteAsync(new CommitBatch().Put("fuzz", other, "{\"ok\":1}"u8.ToArray())
                            .Put("fuzz", id, json));
                    }
                    else
                    {
                        await store.PutAsync("fuzz", id, json);
                    }
                }
                catch (ArgumentException e)
                {
                    Assert.False(valid, $"refused a valid document {Show(json)}: {e.Message}");
                    refused++;
                    if (batched)
                    {
                        Assert.Null(store.Get("fuzz", other)); // the batch's valid put is left out too
                    }

                    AssertStored(store, id, model);
                    continue;
                }

                Assert.True(valid, $"took an invalid document {Show(json)}");
                taken++;
                model[id] = json;
                if (batched)
                {
                    model[other] = "{\"ok\":1}"u8.ToArray();
                }

                AssertStored(store, id, model);
                if (random.Next(100) == 0)
                {
                    await store.CheckpointAsync();
                }
            }

            await AssertAllAsync(store, model);
            await store.CheckpointAsync();
            await AssertAllAsync(store, model);
            await store.DisposeAsync();
            store = DocumentStore.Open(dir.Path, Options("fuzz"));
            await AssertAllAsync(store, model);
        }
        finally
        {
            await store.DisposeAsync();
        }

        output.WriteLine($"{taken} documents taken, {refused} refused");
        Assert.True(taken > 20 && refused > 20, $"both outcomes occur: {taken} taken, {refused} refused");
    }

    [Fact]
    public async Task Random_ids_and_collection_names_are_taken_exactly_when_valid_and_round_trip_in_order()
    {
        var random = new Random(Seed());
        using var dir = new TempDirectory();
        DocumentStore store = DocumentStore.Open(dir.Path, Options("ids"));
        var model = new SortedDictionary<string, byte[]>(StringComparer.Ordinal);
        var collections = new SortedSet<string>(StringComparer.Ordinal) { "ids" };
        int taken = 0;
        int refused = 0;
        try
        {
            int writes = Writes();
            for (int i = 0; i < writes; i++)
            {
                string id = RandomName(random);
                bool asCollection = random.Next(8) == 0;
                string collection = asCollection ? id : "ids";
                string documentId = asCollection ? "x" : id;
                byte[] json = Encoding.UTF8.GetBytes($"{{\"n\":{i}}}");
                bool valid = IsValidName(id);
                try
                {
                    await store.PutAsync(collection, documentId, json);
                }
                catch (ArgumentException e)
                {
                    Assert.False(valid, $"refused a valid {(asCollection ? "collection" : "id")} {Show(id)}: " +
                        e.Message);
                    Assert.Equal(asCollection ? "collection" : "id", e.ParamName);
                    refused++;
                    continue;
                }

                Assert.True(valid, $"took an invalid {(asCollection ? "collection" : "id")} {Show(id)}");
                taken++;
                if (asCollection)
                {
                    collections.Add(collection);
                    Assert.Equal(json, store.Get(collection, "x")?.Json.ToArray());
                }
                else
                {
                    model[id] = json;
                    Assert.Equal(json, store.Get("ids", id)?.Json.ToArray());
                }

                if (random.Next(100) == 0)
                {
                    await store.CheckpointAsync();
                }
            }

            AssertIds(store, model, collections);
            await store.CheckpointAsync();
            AssertIds(store, model, collections);
            await store.DisposeAsync();
            store = DocumentStore.Open(dir.Path, Options("ids"));
            AssertIds(store, model, collections);
        }
        finally
        {
            await store.DisposeAsync();
        }

        output.WriteLine($"{taken} names taken, {refused} refused");
        Assert.True(taken > 20 && refused > 20, $"both outcomes occur: {taken} taken, {refused} refused");
    }

    /// <summary>The oracle for documents, from the rules: valid UTF-8, one complete value that is not null, every
    /// string and property name readable as text.</summary>
    private static bool IsValidDocument(byte[] json)
    {
        if (!Utf8IsValid(json))
        {
            return false;
        }

        try
        {
            var reader = new Utf8JsonReader(json);
            bool any = false;
            while (reader.Read())
            {
                any = true;
                if (reader.TokenType is JsonTokenType.String or JsonTokenType.PropertyName)
                {
                    _ = reader.GetString(); // throws for an escaped lone surrogate
                }
            }

            return any && reader.BytesConsumed == json.Length
                && !(reader.TokenType == JsonTokenType.Null && reader.CurrentDepth == 0);
        }
        catch (Exception e) when (e is JsonException or InvalidOperationException)
        {
            return false;
        }
    }

    /// <summary>Strict UTF-8 by the decoder that throws (no replacement characters).</summary>
    private static bool Utf8IsValid(byte[] bytes)
    {
        try
        {
            _ = new UTF8Encoding(false, throwOnInvalidBytes: true).GetString(bytes);
            return true;
        }
        catch (DecoderFallbackException)
        {
            return false;
        }
    }

    /// <summary>The oracle for ids and collection names, from the documented rules.</summary>
    private static bool IsValidName(string name)
    {
        if (name.Length == 0)
        {
            return false;
        }

        for (int i = 0; i < name.Length; i++)
        {
            char c = name[i];
            if (char.IsControl(c))
            {
                return false;
            }

            if (char.IsHighSurrogate(c) && i + 1 < name.Length && char.IsLowSurrogate(name[i + 1]))
            {
                i++;
            }
            else if (char.IsSurrogate(c))
            {
                return false;
            }
        }

        return Encoding.UTF8.GetByteCount(name) <= 2048;
    }

    private static byte[] Mutate(byte[] json, Random random)
    {
        var bytes = new List<byte>(json);
        for (int step = random.Next(0, 3); step >= 0; step--)
        {
            int at = random.Next(bytes.Count + 1);
            switch (random.Next(6))
            {
                case 0 when bytes.Count > 0:
                    bytes[Math.Min(at, bytes.Count - 1)] ^= (byte)(1 << random.Next(8));
                    break;
                case 1 when bytes.Count > 0:
                    bytes.RemoveAt(Math.Min(at, bytes.Count - 1));
                    break;
                case 2:
                    bytes.RemoveRange(at, bytes.Count - at); // truncated
                    break;
                case 3:
                    // Inserted inside a string, where an escape or a raw byte is read as text.
                    int quote = bytes.IndexOf((byte)'"', Math.Min(at, bytes.Count));
                    bytes.InsertRange(quote >= 0 ? quote + 1 : at, s_insertions[random.Next(s_insertions.Length)]);
                    break;
                default:
                    bytes.InsertRange(at, s_insertions[random.Next(s_insertions.Length)]);
                    break;
            }
        }

        return [.. bytes];
    }

    private static string RandomName(Random random)
    {
        if (random.Next(50) == 0)
        {
            // Around the 2 KiB limit: 682 three-byte characters are 2,046 bytes.
            return new string('\u6771', 681 + random.Next(3)) + (random.Next(2) == 0 ? "a" : "ab");
        }

        var name = new StringBuilder();
        for (int part = random.Next(0, 5); part >= 0; part--)
        {
            name.Append(random.Next(3) == 0 ? s_idParts[random.Next(s_idParts.Length)] : s_idParts[random.Next(3)]);
        }

        return random.Next(40) == 0 ? string.Empty : name.ToString();
    }

    private static void AssertStored(DocumentStore store, string id, SortedDictionary<string, byte[]> model)
        => Assert.Equal(model.TryGetValue(id, out byte[]? json) ? json : null, store.Get("fuzz", id)?.Json.ToArray());

    private static async Task AssertAllAsync(DocumentStore store, SortedDictionary<string, byte[]> model)
    {
        foreach ((string id, byte[] json) in model)
        {
            Assert.Equal(json, store.Get("fuzz", id)?.Json.ToArray());
        }

        Assert.Equal(model.Keys, store.Scan("fuzz").Select(d => d.Id));

        // A query deserializes every document: none that was taken fails it.
        await using DocumentSession session = store.OpenSession();
        var read = new List<string>();
        await foreach (JsonNode node in session.QueryAsync<JsonNode>())
        {
            read.Add(node.ToJsonString());
        }

        Assert.Equal(model.Count, read.Count);
    }

    private static void AssertIds(DocumentStore store, SortedDictionary<string, byte[]> model,
        SortedSet<string> collections)
    {
        Assert.Equal(model.Keys, store.Scan("ids").Select(d => d.Id));
        foreach ((string id, byte[] json) in model)
        {
            Assert.Equal(json, store.Get("ids", id)?.Json.ToArray());
        }

        Assert.Equal(collections, store.GetCollections());
        string[] withPrefix = model.Keys.Where(k => k.StartsWith('a')).ToArray();
        using DocumentSession session = store.OpenSession();
        Assert.Equal(withPrefix.Length,
            session.QueryByPrefixAsync<JsonNode>("a").ToBlockingEnumerable().Count());
    }

    /// <summary>Small segments, and every entity type's collection <paramref name="collection"/>, so a session's
    /// queries of <see cref="JsonNode"/> read it.</summary>
    private static DocumentStoreOptions Options(string collection)
    {
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CollectionName = _ => collection;
        return options;
    }

    private static string Show(byte[] json) => $"[{Convert.ToHexString(json)}] {Encoding.UTF8.GetString(json)}";

    private static string Show(string name) => string.Join(" ", name.Select(c => ((int)c).ToString("X4")));

    private static int Seed() =>
        int.TryParse(Environment.GetEnvironmentVariable("FOLIO_FUZZ_SEED"), out int seed) ? seed : 20261130;

    private static int Writes() =>
        int.TryParse(Environment.GetEnvironmentVariable("FOLIO_FUZZ_WRITES"), out int writes) ? writes : 400;
}
