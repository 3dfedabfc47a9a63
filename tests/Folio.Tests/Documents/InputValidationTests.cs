using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

/// <summary>
/// Names and documents that cannot be stored faithfully are refused at the API with <see cref="ArgumentException"/>,
/// and the store stays usable: ids and collection names must be valid UTF-16 (a lone surrogate would be turned into
/// U+FFFD on disk and merge with another id), and raw JSON must be valid UTF-8 whose strings are text (no escaped
/// lone surrogate), nested no deeper than the store's serializer reads, so that System.Text.Json reads every stored
/// document.
/// </summary>
public sealed class InputValidationTests
{
    // Passed to the theory by index: xunit's test-case serialization would turn a lone surrogate into U+FFFD.
    private static readonly string[] s_invalidUtf16Names =
    [
        "dup\uD800",
        "dup\uDBFF",
        "\uDC00dup",
        "a\uD800b",
        "a\uDC00\uD800b", // a low surrogate before a high one is not a pair
        "\uD83D",
    ];

    [Theory]
    [InlineData(0)]
    [InlineData(1)]
    [InlineData(2)]
    [InlineData(3)]
    [InlineData(4)]
    [InlineData(5)]
    public async Task Ids_and_collection_names_with_a_lone_surrogate_are_refused_everywhere_they_enter(int nameIndex)
    {
        string name = s_invalidUtf16Names[nameIndex];
        Assert.Contains(name, static c => char.IsSurrogate(c));
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        byte[] json = "{\"Name\":\"x\"}"u8.ToArray();

        await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync("Bad", name, json).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync(name, "id", json).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.DeleteAsync("Bad", name).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.DeleteAsync(name, "id").AsTask());
        Assert.Throws<ArgumentException>(() => store.Get("Bad", name));
        Assert.Throws<ArgumentException>(() => store.Get(name, "id"));

        await using (var session = store.OpenSession())
        {
            Assert.Throws<ArgumentException>(() => session.Store(new User { Name = "x" }, name));
            Assert.Throws<ArgumentException>(() => session.Store(new User { Id = name, Name = "x" }));
            Assert.Throws<ArgumentException>(() => session.Delete<User>(name));
            await Assert.ThrowsAsync<ArgumentException>(() => session.LoadAsync<User>(name).AsTask());
            await Assert.ThrowsAsync<ArgumentException>(() => session.LoadAsync<User>(new[] { "ok", name }).AsTask());
            session.Store(new User { Name = "fine" }, "u/ok");
            await session.SaveChangesAsync(); // the session is still usable
        }

        // A collection name that comes from the options' CollectionName is checked too.
        using var otherDir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CollectionName = _ => name;
        await using var named = DocumentStore.Open(otherDir.Path, options);
        await using (var session = named.OpenSession())
        {
            Assert.Throws<ArgumentException>(() => session.Store(new User { Name = "x" }, "u/1"));
            await Assert.ThrowsAsync<ArgumentException>(() => session.LoadAsync<User>("u/1").AsTask());
        }

        await using var check = store.OpenSession();
        Assert.Equal("fine", (await check.LoadAsync<User>("u/ok"))!.Name);
    }

    /// <summary>
    /// The raw writes are not async methods (the pending batch is what the caller awaits), yet every failure still
    /// arrives through the returned task, as from an async method: a caller that starts several writes before
    /// awaiting them sees no exception at the call.
    /// </summary>
    [Fact]
    public async Task Raw_writes_report_every_failure_through_the_returned_task()
    {
        using var dir = new TempDirectory();
        var store = DocumentStore.Open(dir.Path, new DocumentStoreOptions { MaxDocumentSize = 1024 });
        ValueTask<long> badId = store.PutAsync("c", "", "{}"u8.ToArray());
        ValueTask<long> badJson = store.PutAsync("c", "a", "{"u8.ToArray());
        ValueTask<long> tooLarge = store.PutAsync("c", "a", Encoding.UTF8.GetBytes($"\"{new string('x', 2000)}\""));
        ValueTask<long> badDelete = store.DeleteAsync("", "a");
        ValueTask<long> cancelled = store.PutAsync("c", "a", "{}"u8.ToArray(),
            cancellationToken: new CancellationToken(true));
        await Assert.ThrowsAnyAsync<ArgumentException>(() => badId.AsTask());
        await Assert.ThrowsAnyAsync<ArgumentException>(() => badJson.AsTask());
        await Assert.ThrowsAsync<DocumentTooLargeException>(() => tooLarge.AsTask());
        await Assert.ThrowsAnyAsync<ArgumentException>(() => badDelete.AsTask());
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => cancelled.AsTask());
        Assert.Equal(1, await store.PutAsync("c", "a", "{}"u8.ToArray())); // still usable
        await store.DisposeAsync();
        ValueTask<long> afterDispose = store.PutAsync("c", "b", "{}"u8.ToArray());
        await Assert.ThrowsAsync<ObjectDisposedException>(() => afterDispose.AsTask());
    }

    [Fact]
    public async Task Two_ids_that_differ_only_in_a_lone_surrogate_cannot_merge_into_one_document()
    {
        using var dir = new TempDirectory();
        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            await Assert.ThrowsAsync<ArgumentException>(()
                => store.PutAsync("Bad", "dup\uD800", "1"u8.ToArray()).AsTask());
            await Assert.ThrowsAsync<ArgumentException>(()
                => store.PutAsync("Bad", "dup\uDBFF", "2"u8.ToArray()).AsTask());
            await store.PutAsync("Bad", "dup\uFFFD", "3"u8.ToArray());
        }

        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            Assert.Equal("3", Encoding.UTF8.GetString(store.Get("Bad", "dup\uFFFD")!.Value.Json.Span));
        }
    }

    [Fact]
    public async Task Valid_surrogate_pairs_in_ids_and_collections_round_trip_through_a_reopen_and_the_change_feed()
    {
        using var dir = new TempDirectory();
        const string Collection = "Emoji\uD83D\uDE00";
        const string Id = "id/\uD83D\uDC4D/\uDBFF\uDFFF";
        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            await store.PutAsync(Collection, Id, "{\"a\":1}"u8.ToArray());
            await foreach (DocumentChange change in store.Changes.ReadAsync(1))
            {
                Assert.Equal(Collection, change.Collection);
                Assert.Equal(Id, change.Id);
                break;
            }
        }

        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            Assert.NotNull(store.Get(Collection, Id));
        }
    }

    public static TheoryData<byte[]> InvalidUtf8Documents => new()
    {
        Bytes("{\"a\":\""u8, [0xFF, 0xFE], "\"}"u8), // bytes that never occur in UTF-8, in a string
        Bytes("{\"a\":\""u8, [0xC0, 0xAF], "\"}"u8), // an overlong encoding of '/'
        Bytes("{\"a\":\""u8, [0xED, 0xA0, 0x80], "\"}"u8), // an encoded surrogate (U+D800)
        Bytes("{\""u8, [0xFF], "\":1}"u8), // in a property name
        Bytes("{\"a\":\""u8, [0xE2, 0x82], "\"}"u8), // a truncated sequence
        Bytes("{\"a\":\""u8, [0xF4, 0x90, 0x80, 0x80], "\"}"u8), // above U+10FFFF
    };

    [Fact]
    public async Task A_bad_collection_name_is_reported_as_a_collection_name_and_a_bad_id_as_an_id()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        string tooLong = new('c', DocumentIds.MaxIdBytes + 1);
        foreach (string bad in new[] { "", tooLong, "a\nb", "a\uD800" })
        {
            var collection = Assert.Throws<ArgumentException>(() => store.Get(bad, "x"));
            Assert.Equal("collection", collection.ParamName);
            Assert.StartsWith("A document collection name ", collection.Message, StringComparison.Ordinal);
            var id = await Assert.ThrowsAsync<ArgumentException>(() =>
                store.PutAsync("c", bad, "{}"u8.ToArray()).AsTask());
            Assert.Equal("id", id.ParamName);
            Assert.StartsWith("A document id ", id.Message, StringComparison.Ordinal);
        }
    }

    [Fact]
    public async Task An_entity_without_an_id_whose_collection_leaves_no_room_for_a_generated_id_is_refused_as_such()
    {
        // A collection name may be 2,048 bytes, but a generated id adds '/' and 19 digits to it.
        using var dir = new TempDirectory();
        string longest = new('c', DocumentIds.MaxIdBytes - 20);
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CollectionName = type => type == typeof(User) ? longest : longest + "c";
        await using var store = DocumentStore.Open(dir.Path, options);
        await using DocumentSession session = store.OpenSession();
        var fits = new User { Name = "fits" };
        session.Store(fits);
        Assert.Equal(DocumentIds.MaxIdBytes, fits.Id!.Length);

        var tooLong = new Envelope<string>();
        var refused = Assert.Throws<ArgumentException>(() => session.Store(tooLong));
        Assert.Equal("entity", refused.ParamName);
        Assert.Contains("Give the entity an Id", refused.Message, StringComparison.Ordinal);
        Assert.Null(tooLong.Id);
        session.Store(tooLong, "given");
        await session.SaveChangesAsync();
        Assert.NotNull(store.Get(longest, fits.Id));
        Assert.NotNull(store.Get(longest + "c", "given"));
    }

    [Fact]
    public async Task A_negative_expected_version_is_refused_by_its_parameter_name_and_nothing_commits()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        var put = await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() =>
            store.PutAsync("c", "a", "{}"u8.ToArray(), expectedVersion: -1).AsTask());
        Assert.Equal("expectedVersion", put.ParamName);
        var delete = await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() =>
            store.DeleteAsync("c", "a", expectedVersion: -7).AsTask());
        Assert.Equal("expectedVersion", delete.ParamName);
        Assert.Equal(0, store.LastCommittedSequence);
        Assert.Equal(1, await store.PutAsync("c", "a", "{}"u8.ToArray(), expectedVersion: 0));
    }

    [Fact]
    public async Task Raw_json_nested_as_deep_as_the_stores_serializer_reads_is_stored_and_deeper_json_is_refused()
    {
        // An object holding arrays holding an object: depth levels in all.
        static byte[] Nested(int depth) => Encoding.UTF8.GetBytes(
            "{\"Extra\":" + new string('[', depth - 2) + "{\"a\":1}" + new string(']', depth - 2) + "}");

        // System.Text.Json's default depth (64), a raised one, and one above what any store accepts.
        (int MaxDepth, int Accepted)[] cases = [(0, 64), (200, 200), (5_000, DocumentStoreOptions.MaxJsonDepth)];
        foreach ((int maxDepth, int accepted) in cases)
        {
            using var dir = new TempDirectory();
            DocumentStoreOptions options = TestStoreOptions.SmallSegments();
            options.JsonSerializerOptions = new System.Text.Json.JsonSerializerOptions { MaxDepth = maxDepth };
            await using var store = DocumentStore.Open(dir.Path, options);
            byte[] deepest = Nested(accepted);
            await store.PutAsync(nameof(DeepDoc), "deep", deepest);
            await store.WriteAsync(new CommitBatch().Put(nameof(DeepDoc), "deep2", deepest));
            Assert.Equal(deepest, store.Get(nameof(DeepDoc), "deep")!.Value.Json.ToArray());

            var error = await Assert.ThrowsAsync<ArgumentException>(() =>
                store.PutAsync(nameof(DeepDoc), "deeper", Nested(accepted + 1)).AsTask());
            Assert.Contains($"more than {accepted} levels deep", error.Message, StringComparison.Ordinal);
            Assert.Contains("MaxDepth", error.Message, StringComparison.Ordinal);
            Assert.Equal("json", error.ParamName);
            await Assert.ThrowsAsync<ArgumentException>(() =>
                store.WriteAsync(new CommitBatch().Put(nameof(DeepDoc), "deeper", Nested(accepted + 1))).AsTask());
            Assert.Null(store.Get(nameof(DeepDoc), "deeper"));
            await store.CheckpointAsync();
            Assert.Equal(deepest, store.Get(nameof(DeepDoc), "deep2")!.Value.Json.ToArray());

            // What was accepted reads as an entity, and a query of the collection reads every document.
            await using var session = store.OpenSession();
            Assert.NotNull(await session.LoadAsync<DeepDoc>("deep"));
            int read = 0;
            await foreach (DeepDoc _ in session.QueryAsync<DeepDoc>())
            {
                read++;
            }

            Assert.Equal(2, read);
        }
    }

    /// <summary>A class the nested test documents load as: the nesting is under a property the class does not map,
    /// which System.Text.Json still reads through (to its depth limit) to skip.</summary>
    private sealed class DeepDoc
    {
        public string? Id { get; set; }
    }

    [Theory]
    [MemberData(nameof(InvalidUtf8Documents))]
    public async Task Raw_json_with_invalid_utf8_is_refused_and_the_store_stays_usable(byte[] json)
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        var error = await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync("Doc", "d/1", json).AsTask());
        Assert.Contains("UTF-8", error.Message, StringComparison.Ordinal);
        Assert.Null(store.Get("Doc", "d/1"));

        await store.PutAsync("User", "d/1", "{\"Name\":\"caf\u00e9 \u2603 \uD83D\uDE00\"}"u8.ToArray());
        await using var session = store.OpenSession();
        Assert.Equal("caf\u00e9 \u2603 \uD83D\uDE00", (await session.LoadAsync<User>("d/1"))!.Name);
    }

    public static TheoryData<string> LoneSurrogateEscapes => new()
    {
        "{\"a\":\"\\ud800\"}", // a high surrogate alone
        "{\"a\":\"\\uDC00\"}", // a low one alone, upper case
        "{\"a\":\"x\\ud800y\"}", // a high one followed by a character
        "{\"a\":\"\\ud800\\u0041\"}", // followed by an escape that is not a low surrogate
        "{\"a\":\"\\udc00\\ud800\"}", // the halves in the wrong order
        "{\"a\":\"\\ud83d\\ude00\\ud83d\"}", // a pair, then a high one alone at the end
        "{\"a\":\"\\ud83d\\n\\ude00\"}", // halves parted by another escape
        "{\"a\":\"\\ud83d\u00e9\"}", // a high one followed by a character written as UTF-8
        "{\"a\\udfff\":1}", // in a property name
        "[1,{\"b\":[\"ok\",\"\\\\\\ud800\"]}]", // after an escaped backslash, nested
    };

    [Theory]
    [MemberData(nameof(LoneSurrogateEscapes))]
    public async Task Raw_json_escaping_half_a_surrogate_pair_alone_is_refused_and_the_store_stays_usable(string text)
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        byte[] json = Encoding.UTF8.GetBytes(text);
        var put = await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync("Doc", "d/1", json).AsTask());
        Assert.Contains("surrogate", put.Message, StringComparison.Ordinal);
        Assert.Equal("json", put.ParamName);
        var batch = new CommitBatch().Put("Doc", "d/0", "{}"u8.ToArray()).Put("Doc", "d/1", json);
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(batch).AsTask());
        Assert.Null(store.Get("Doc", "d/0"));
        Assert.Null(store.Get("Doc", "d/1"));

        // What was refused is what System.Text.Json cannot read as text; the store stays usable.
        Assert.ThrowsAny<InvalidOperationException>(() => ReadEveryString(json));
        await store.PutAsync("Doc", "d/1", "{\"a\":\"\\ud83d\\ude00 \\\\ud800 \\u00e9\"}"u8.ToArray());
        Assert.True(ReadEveryString(store.Get("Doc", "d/1")!.Value.Json.ToArray()));
    }

    [Fact]
    public async Task Every_document_a_raw_write_accepts_reads_as_text_so_no_document_poisons_a_query()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "u/1", "{\"Name\":\"first\"}"u8.ToArray());
        await Assert.ThrowsAsync<ArgumentException>(
            () => store.PutAsync("User", "u/2", "{\"Name\":\"\\ud800\"}"u8.ToArray()).AsTask());
        await store.PutAsync("User", "u/3", "{\"Name\":\"\\uD83D\\uDE00\"}"u8.ToArray());

        await using var session = store.OpenSession();
        var names = new List<string?>();
        await foreach (User user in session.QueryAsync<User>())
        {
            names.Add(user.Name);
        }

        Assert.Equal(["first", "\uD83D\uDE00"], names);
    }

    public static TheoryData<string> NullDocuments => new() { "null", " null", "null\r\n", "\tnull " };

    [Theory]
    [MemberData(nameof(NullDocuments))]
    public async Task A_raw_document_that_is_json_null_is_refused_since_no_typed_load_reads_it(string text)
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "u/1", "{\"Name\":\"first\"}"u8.ToArray());
        byte[] json = Encoding.UTF8.GetBytes(text);
        var put = await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync("User", "u/2", json).AsTask());
        Assert.Contains("null", put.Message, StringComparison.Ordinal);
        Assert.Contains("'User/u/2'", put.Message, StringComparison.Ordinal);
        Assert.Equal("json", put.ParamName);
        var batch = new CommitBatch().Put("User", "u/3", "{}"u8.ToArray()).Put("User", "u/2", json);
        await Assert.ThrowsAsync<ArgumentException>(() => store.WriteAsync(batch).AsTask());
        Assert.Null(store.Get("User", "u/2"));
        Assert.Null(store.Get("User", "u/3"));

        // What a typed load does with such a document: no entity, so a load and a query would have failed.
        Assert.Null(System.Text.Json.JsonSerializer.Deserialize<User>(json));

        // null inside a document, and the other scalars and arrays at the top, are stored byte for byte.
        foreach (string kept in new[] { "{\"Name\":null}", "[null]", "\"null\"", "0", "true" })
        {
            await store.PutAsync("Other", kept, Encoding.UTF8.GetBytes(kept));
            Assert.Equal(kept, Encoding.UTF8.GetString(store.Get("Other", kept)!.Value.Json.Span));
        }

        await using var session = store.OpenSession();
        var names = new List<string?>();
        await foreach (User user in session.QueryAsync<User>())
        {
            names.Add(user.Name);
        }

        Assert.Equal(["first"], names);
    }

    [Fact]
    public async Task An_entity_its_converter_writes_as_json_null_is_refused_at_save_and_the_session_keeps_it()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.JsonSerializerOptions = new System.Text.Json.JsonSerializerOptions();
        options.JsonSerializerOptions.Converters.Add(new NullWritingConverter());
        await using var store = DocumentStore.Open(dir.Path, options);
        await using var session = store.OpenSession();
        var entity = new Gadget { Id = "g/1", Name = "first" };
        session.Store(entity);
        session.Store(new User { Name = "beside" }, "u/1");
        var save = await Assert.ThrowsAsync<InvalidOperationException>(() => session.SaveChangesAsync());
        Assert.Contains("'Gadget/g/1'", save.Message, StringComparison.Ordinal);
        Assert.Contains("null", save.Message, StringComparison.Ordinal);
        Assert.Null(store.Get("Gadget", "g/1"));
        Assert.Null(store.Get("User", "u/1"));

        // Nothing was written; with the entity gone from the session, the rest saves.
        session.Delete<Gadget>("g/1");
        await session.SaveChangesAsync();
        Assert.NotNull(store.Get("User", "u/1"));
        Assert.Null(store.Get("Gadget", "g/1"));
    }

    public sealed class Gadget
    {
        public string? Id { get; set; }

        public string? Name { get; set; }
    }

    /// <summary>Writes every <see cref="Gadget"/> as null, as a faulty custom converter might.</summary>
    private sealed class NullWritingConverter : System.Text.Json.Serialization.JsonConverter<Gadget>
    {
        public override Gadget? Read(ref System.Text.Json.Utf8JsonReader reader, Type typeToConvert,
            System.Text.Json.JsonSerializerOptions options) => null;

        public override void Write(System.Text.Json.Utf8JsonWriter writer, Gadget value,
            System.Text.Json.JsonSerializerOptions options) => writer.WriteNullValue();
    }

    /// <summary>Reads every string and property name of <paramref name="json"/> as a .NET string, as a typed load
    /// does; true when all read (throws otherwise).</summary>
    private static bool ReadEveryString(byte[] json)
    {
        var reader = new System.Text.Json.Utf8JsonReader(json);
        while (reader.Read())
        {
            if (reader.TokenType is System.Text.Json.JsonTokenType.String
                or System.Text.Json.JsonTokenType.PropertyName)
            {
                _ = reader.GetString();
            }
        }

        return true;
    }

    [Fact]
    public async Task An_entity_whose_string_holds_a_lone_surrogate_is_stored_as_escaped_valid_json()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await using (var session = store.OpenSession())
        {
            session.Store(new User { Name = "half \uD800 pair" }, "u/1");
            await session.SaveChangesAsync();
        }

        Assert.True(System.Text.Unicode.Utf8.IsValid(store.Get("User", "u/1")!.Value.Json.Span));
        await using var reader = store.OpenSession();
        Assert.NotNull(await reader.LoadAsync<User>("u/1"));
    }

    private static byte[] Bytes(ReadOnlySpan<byte> head, byte[] middle, ReadOnlySpan<byte> tail)
        => [.. head, .. middle, .. tail];

    [Fact]
    public async Task A_save_whose_documents_together_overflow_one_journal_record_is_refused_clearly_and_can_be_split()
    {
        // The defaults scaled down 16 times: 4 MiB segments, 1 MiB documents, five documents of 0.94 MiB in one save
        // (as five 15 MiB documents overflow the default 64 MiB segment).
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { SegmentSize = 4 << 20, MaxDocumentSize = 1 << 20 });
        string payload = new('x', (15 << 20) / 16);
        await using (DocumentSession session = store.OpenSession())
        {
            for (int i = 0; i < 5; i++)
            {
                session.Store(new User { Name = payload }, $"big{i}");
            }

            var error = await Assert.ThrowsAsync<DocumentTooLargeException>(() => session.SaveChangesAsync());
            Assert.IsAssignableFrom<FolioException>(error);
            Assert.Contains("one commit is written atomically as one journal record", error.Message,
                StringComparison.Ordinal);
            Assert.Contains("SaveChangesAsync", error.Message, StringComparison.Ordinal);
            Assert.True(error.Size > error.Limit);
            Assert.Equal(0, store.LastCommittedSequence);
        }

        // The documented way out: several saves.
        for (int part = 0; part < 2; part++)
        {
            await using DocumentSession session = store.OpenSession();
            for (int i = part * 3; i < Math.Min(5, (part + 1) * 3); i++)
            {
                session.Store(new User { Name = payload }, $"big{i}");
            }

            await session.SaveChangesAsync();
        }

        Assert.Equal(2, store.LastCommittedSequence);
        Assert.NotNull(store.Get("User", "big4"));
    }
}
