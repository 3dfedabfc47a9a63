using System.Text;
using Folio.Tests.Infrastructure;
using Folio.Transactions;

namespace Folio.Tests.Documents;

public sealed class User
{
    public string? Id { get; set; }

    public string Name { get; set; } = string.Empty;

    public int Age { get; set; }
}

/// <summary>An entity without an <c>Id</c> property.</summary>
public sealed record Note(string Text);

/// <summary>An entity whose <c>Id</c> is a number.</summary>
public sealed class Invoice
{
    public int Id { get; set; }

    public decimal Total { get; set; }
}

/// <summary>An entity whose <c>Id</c> is a <see cref="long"/>.</summary>
public sealed class Ticket
{
    public long Id { get; set; }

    public string Subject { get; set; } = string.Empty;
}

/// <summary>An entity whose <c>Id</c> is a nullable <see cref="long"/>.</summary>
public sealed class Coupon
{
    public long? Id { get; set; }

    public int Percent { get; set; }
}

/// <summary>An entity whose <c>Id</c> is a nullable GUID.</summary>
public sealed class Parcel
{
    public Guid? Id { get; set; }

    public string Label { get; set; } = string.Empty;
}

/// <summary>An entity whose <c>Id</c> is a GUID.</summary>
public sealed class Envelope<T>
{
    public string? Id { get; set; }

    public T? Body { get; set; }
}

public sealed class Shipment
{
    public Guid Id { get; set; }

    public string Carrier { get; set; } = string.Empty;
}

public sealed class DocumentStoreTests
{
    [Fact]
    public async Task A_number_or_GUID_Id_names_the_document_by_its_text_and_a_default_one_gets_a_generated_id()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        var shipmentId = Guid.NewGuid();
        var unnumbered = new Invoice { Total = 1m };
        var ticket = new Ticket { Subject = "new" };
        var unaddressed = new Shipment { Carrier = "new" };
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(new Invoice { Id = 42, Total = 9.5m });
            session.Store(new Invoice { Id = -7, Total = 2m });
            session.Store(new Shipment { Id = shipmentId, Carrier = "post" });

            // A generated id the Id can hold: a long gets a number, a GUID a version 7 GUID; an int cannot hold one.
            session.Store(ticket);
            session.Store(unaddressed);
            var refused = Assert.Throws<ArgumentException>(() => session.Store(unnumbered));
            Assert.Equal("entity", refused.ParamName);
            Assert.Equal(0, unnumbered.Id);
            session.Store(unnumbered, "7");
            Assert.Equal(7, unnumbered.Id); // an explicit id is set on the entity, as a string Id is
            await session.SaveChangesAsync();
            Assert.InRange(ticket.Id, 1, 1L << 53); // a JSON number a JavaScript client reads exactly
            Assert.Equal(ticket.Id.ToString(System.Globalization.CultureInfo.InvariantCulture), session.GetId(ticket));
            Assert.Equal(7, unaddressed.Id.Version);
            Assert.Equal(unaddressed.Id.ToString(), session.GetId(unaddressed));
        }

        // Stored again from another session (an entity read in one request and stored in the next), each entity
        // updates its document instead of becoming a second one.
        ticket.Subject = "changed";
        unaddressed.Carrier = "changed";
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(ticket);
            session.Store(unaddressed);
            await session.SaveChangesAsync();
        }

        Assert.Single(store.Scan("Ticket"));
        Assert.Equal(2, store.Scan("Shipment").Count());

        await using (DocumentSession session = store.OpenSession())
        {
            Assert.Equal(9.5m, (await session.LoadAsync<Invoice>("42"))!.Total);
            Assert.Equal(2m, (await session.LoadAsync<Invoice>("-7"))!.Total);
            Assert.Equal("post", (await session.LoadAsync<Shipment>(shipmentId.ToString()))!.Carrier);
            Assert.Equal(1m, (await session.LoadAsync<Invoice>("7"))!.Total);

            // The same Id stored again is the same document, not a second one.
            Invoice again = new() { Id = 42, Total = 10m };
            session.Delete<Invoice>("42");
            session.Store(again);
            await session.SaveChangesAsync();
        }

        Assert.Equal(["-7", "42", "7"], store.Scan("Invoice").Select(d => d.Id).Order(StringComparer.Ordinal));
        Assert.Contains("\"Total\":10", Encoding.UTF8.GetString(store.Get("Invoice", "42")!.Value.Json.Span),
            StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_nullable_number_or_GUID_Id_names_its_document_as_the_plain_one_does()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        var coupon = new Coupon { Percent = 10 };
        var parcel = new Parcel { Label = "new" };
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(coupon);
            session.Store(parcel);
            session.Store(new Coupon { Id = 42, Percent = 5 });
            await session.SaveChangesAsync();
            Assert.NotNull(coupon.Id);
            Assert.Equal(coupon.Id!.Value.ToString(System.Globalization.CultureInfo.InvariantCulture),
                session.GetId(coupon));
            Assert.Equal(parcel.Id!.Value.ToString(), session.GetId(parcel));
        }

        // Stored again from another session: the same documents; read back, raw without an Id: filled in.
        coupon.Percent = 20;
        parcel.Label = "changed";
        await store.PutAsync("Coupon", "7", "{\"Percent\":1}"u8.ToArray());
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(coupon);
            session.Store(parcel);
            await session.SaveChangesAsync();
            Assert.Equal(7, (await session.LoadAsync<Coupon>("7"))!.Id);
            Assert.Equal(42, (await session.LoadAsync<Coupon>("42"))!.Id);
        }

        Assert.Equal(3, store.Scan("Coupon").Count());
        Assert.Single(store.Scan("Parcel"));
        Assert.Contains("\"Percent\":20",
            Encoding.UTF8.GetString(store.Get("Coupon", coupon.Id.Value.ToString(System.Globalization.CultureInfo
                .InvariantCulture))!.Value.Json.Span), StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_number_or_GUID_Id_missing_from_the_JSON_is_filled_in_from_the_document_id_on_a_load()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        var shipmentId = Guid.NewGuid();
        await store.PutAsync("Invoice", "42", "{\"Total\":3}"u8.ToArray());
        await store.PutAsync("Invoice", "007", "{\"Total\":4}"u8.ToArray());
        await store.PutAsync("Shipment", shipmentId.ToString(), "{\"Carrier\":\"rail\"}"u8.ToArray());
        Invoice loaded;
        await using (DocumentSession session = store.OpenSession())
        {
            loaded = (await session.LoadAsync<Invoice>("42"))!;
            Assert.Equal(42, loaded.Id);
            Assert.Equal(shipmentId, (await session.LoadAsync<Shipment>(shipmentId.ToString()))!.Id);
            // "007" is no int's text: an Id of 7 would name another document, so it stays unset.
            Assert.Equal(0, (await session.LoadAsync<Invoice>("007"))!.Id);
            Assert.Equal([42], (await session.QueryAsync<Invoice>(i => i.Total == 3).ToListAsync()).Select(i => i.Id));
            await session.SaveChangesAsync(); // filling the Id in is no change
        }

        Assert.Equal(1, store.Get("Invoice", "42")!.Value.Version);

        // The same for a string Id, loaded and queried: filled in, no change until the entity changes.
        long raw = await store.PutAsync("User", "users/raw", "{\"Name\":\"r\"}"u8.ToArray());
        await using (DocumentSession session = store.OpenSession())
        {
            Assert.Equal("users/raw", (await session.QueryByPrefixAsync<User>("users/").ToListAsync()).Single().Id);
            await session.SaveChangesAsync();
            Assert.Equal(raw, store.Get("User", "users/raw")!.Value.Version);
            (await session.LoadAsync<User>("users/raw"))!.Age = 3;
            await session.SaveChangesAsync();
        }

        Assert.Contains("\"Id\":\"users/raw\"",
            Encoding.UTF8.GetString(store.Get("User", "users/raw")!.Value.Json.Span), StringComparison.Ordinal);

        // The loaded entity stored in another session updates its document instead of creating one.
        loaded.Total = 5m;
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(loaded);
            await session.SaveChangesAsync();
        }

        Assert.Equal(["007", "42"], store.Scan("Invoice").Select(d => d.Id));
        Assert.Contains("\"Total\":5", Encoding.UTF8.GetString(store.Get("Invoice", "42")!.Value.Json.Span),
            StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_Id_in_the_JSON_that_names_another_document_is_replaced_by_the_key_the_entity_was_read_from()
    {
        // Raw JSON copied from one document to another (a clone through the raw API) carries the first one's Id.
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "users/1", "{\"Id\":\"users/1\",\"Name\":\"original\"}"u8.ToArray());
        long cloned = await store.PutAsync("User", "users/2", store.Get("User", "users/1")!.Value.Json);
        await store.PutAsync("Invoice", "43", "{\"Id\":42,\"Total\":3}"u8.ToArray());
        await using (DocumentSession session = store.OpenSession())
        {
            User clone = (await session.LoadAsync<User>("users/2"))!;
            Assert.Equal("users/2", clone.Id);
            Assert.Equal(["users/1", "users/2"],
                (await session.QueryByPrefixAsync<User>("users/").ToListAsync()).Select(u => u.Id));
            Assert.Equal(43, (await session.LoadAsync<Invoice>("43"))!.Id);
            await session.SaveChangesAsync(); // setting the Id from the key is no change
            Assert.Equal(cloned, store.Get("User", "users/2")!.Value.Version);

            // Code that acts on the entity's Id acts on the document it read.
            session.Delete<User>(clone.Id!);
            await session.SaveChangesAsync();
        }

        Assert.Null(store.Get("User", "users/2"));
        Assert.NotNull(store.Get("User", "users/1"));

        // A changed entity is saved with its own id in the JSON.
        await store.PutAsync("User", "users/3", store.Get("User", "users/1")!.Value.Json);
        await using (DocumentSession session = store.OpenSession())
        {
            (await session.LoadAsync<User>("users/3"))!.Age = 7;
            await session.SaveChangesAsync();
        }

        Assert.Contains("\"Id\":\"users/3\"",
            Encoding.UTF8.GetString(store.Get("User", "users/3")!.Value.Json.Span), StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_document_the_session_did_not_change_is_never_rewritten_whatever_its_stored_JSON_looks_like()
    {
        // Stored JSON that is not byte for byte what the class serializes to: written raw or by another version of
        // the class. An unchanged load must not rewrite it (a new version, a dropped property, and a conflict with
        // whoever changed it meanwhile).
        string[] stored =
        [
            "{\"Name\":\"a\",\"Age\":1}", // no Id, and an Age the class has
            "{\"Age\":1,\"Name\":\"a\",\"Id\":\"u/1\"}", // another property order
            "{ \"Id\": \"u/2\", \"Name\": \"\\u0061\", \"Age\": 1 }", // whitespace and an escape
            "{\"Id\":\"u/3\",\"Name\":\"a\",\"Age\":1,\"Nickname\":\"kept\"}", // a property the class lacks
            "{\"Id\":\"u/4\",\"Name\":\"a\"}", // a property the class has gained since
        ];
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        var versions = new long[stored.Length];
        for (int i = 0; i < stored.Length; i++)
        {
            versions[i] = await store.PutAsync("User", $"u/{i}", Encoding.UTF8.GetBytes(stored[i]));
        }

        await using (DocumentSession session = store.OpenSession())
        {
            for (int i = 0; i < 3; i++)
            {
                await session.LoadAsync<User>($"u/{i}");
            }

            await foreach (User _ in session.QueryByRangeAsync<User>("u/3", null))
            {
            }

            // Meanwhile another writer changes one of them: this session changed none, so its save has nothing to
            // write and nothing to conflict with.
            await store.PutAsync("User", "u/3", "{\"Id\":\"u/3\",\"Name\":\"b\",\"Nickname\":\"new\"}"u8.ToArray());
            await session.SaveChangesAsync();
            await session.SaveChangesAsync();
        }

        for (int i = 0; i < stored.Length; i++)
        {
            if (i != 3)
            {
                Assert.Equal(versions[i], store.Get("User", $"u/{i}")!.Value.Version);
                Assert.Equal(stored[i], Encoding.UTF8.GetString(store.Get("User", $"u/{i}")!.Value.Json.Span));
            }
        }

        Assert.Contains("\"Nickname\":\"new\"", Encoding.UTF8.GetString(store.Get("User", "u/3")!.Value.Json.Span),
            StringComparison.Ordinal);

        // A changed one is written as the class serializes it, and only it.
        await using (DocumentSession session = store.OpenSession())
        {
            (await session.LoadAsync<User>("u/4"))!.Age = 9;
            await session.LoadAsync<User>("u/0");
            await session.SaveChangesAsync();
        }

        Assert.Equal("{\"Id\":\"u/4\",\"Name\":\"a\",\"Age\":9}",
            Encoding.UTF8.GetString(store.Get("User", "u/4")!.Value.Json.Span));
        Assert.Equal(versions[0], store.Get("User", "u/0")!.Value.Version);
    }

    [Fact]
    public async Task Generic_entity_types_with_different_type_arguments_are_different_collections()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(new Envelope<User> { Id = "e1", Body = new User { Name = "Ada" } });
            session.Store(new Envelope<Invoice> { Id = "e1", Body = new Invoice { Id = 9, Total = 1m } });
            session.Store(new Envelope<Envelope<User>[]> { Id = "e1", Body = [] });
            await session.SaveChangesAsync();
        }

        Assert.Equal(["Envelope<Envelope<User>[]>", "Envelope<Invoice>", "Envelope<User>"],
            store.GetCollections().Order(StringComparer.Ordinal));
        await using (DocumentSession session = store.OpenSession())
        {
            Assert.Equal("Ada", (await session.LoadAsync<Envelope<User>>("e1"))!.Body!.Name);
            Assert.Equal(9, (await session.LoadAsync<Envelope<Invoice>>("e1"))!.Body!.Id);
        }

        Assert.Equal("User", DocumentStoreOptions.DefaultCollectionName(typeof(User)));
        Assert.Equal("Dictionary<String,Int32[,]>",
            DocumentStoreOptions.DefaultCollectionName(typeof(Dictionary<string, int[,]>)));
    }

    [Fact]
    public async Task A_tracked_entity_whose_Id_changed_is_refused_rather_than_written_under_its_old_id()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "users/a", "{\"Id\":\"users/a\",\"Name\":\"Ada\"}"u8.ToArray());
        await store.PutAsync("User", "raw", "{\"Id\":\"other\",\"Name\":\"Raw\"}"u8.ToArray());
        long before = store.LastCommittedSequence;
        await using (DocumentSession session = store.OpenSession())
        {
            User ada = (await session.LoadAsync<User>("users/a"))!;
            ada.Id = "users/z";
            ada.Name = "Ada L.";
            var changed = await Assert.ThrowsAsync<InvalidOperationException>(() => session.SaveChangesAsync());
            Assert.Contains("'users/a' to 'users/z'", changed.Message, StringComparison.Ordinal);
            Assert.Throws<InvalidOperationException>(() => session.Store(ada));
            Assert.Equal(before, store.LastCommittedSequence);

            // Put back, the change saves; a document whose JSON named another id from the start was read with its
            // key as its Id, and saves so. A store under another id is refused and leaves the Id as it was.
            ada.Id = "users/a";
            Assert.Throws<InvalidOperationException>(() => session.Store(ada, "users/y"));
            Assert.Equal("users/a", ada.Id);
            (await session.LoadAsync<User>("raw"))!.Name = "Raw 2";
            await session.SaveChangesAsync();
        }

        Assert.Null(store.Get("User", "users/z"));
        Assert.Contains("Ada L.", Encoding.UTF8.GetString(store.Get("User", "users/a")!.Value.Json.Span),
            StringComparison.Ordinal);
        Assert.Contains("\"Id\":\"raw\"", Encoding.UTF8.GetString(store.Get("User", "raw")!.Value.Json.Span),
            StringComparison.Ordinal);

        // A number Id set after the store gave the entity a generated id would be written under that id: refused.
        await using (DocumentSession session = store.OpenSession())
        {
            var ticket = new Ticket { Subject = "generated" };
            session.Store(ticket);
            ticket.Id = 5;
            await Assert.ThrowsAsync<InvalidOperationException>(() => session.SaveChangesAsync());
        }

        Assert.Empty(store.Scan("Ticket"));
    }

    [Fact]
    public async Task A_load_of_a_document_the_session_tracks_as_another_type_throws_naming_both()
    {
        using var dir = new TempDirectory();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CollectionName = static _ => "shared";
        await using var store = await DocumentStore.OpenAsync(dir.Path, options);
        await using DocumentSession session = store.OpenSession();
        session.Store(new User { Name = "Ada" }, "x");
        var error = await Assert.ThrowsAsync<InvalidOperationException>(
            () => session.LoadAsync<Shipment>("x").AsTask());
        Assert.Contains("as User, which is not a Shipment", error.Message, StringComparison.Ordinal);
        Assert.Equal("Ada", (await session.LoadAsync<User>("x"))!.Name);
    }

    [Fact]
    public async Task GetId_tells_the_id_of_every_tracked_entity_even_one_generated_for_a_type_without_an_Id()
    {
        using var dir = new TempDirectory();
        await using var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments());
        var note = new Note("no id property here");
        var alice = new User { Name = "Alice" };
        string noteId;
        await using (DocumentSession session = store.OpenSession())
        {
            session.Store(note);
            session.Store(alice, "users/alice");
            noteId = session.GetId(note);
            Assert.StartsWith("Note/", noteId, StringComparison.Ordinal);
            Assert.Equal("users/alice", session.GetId(alice));
            Assert.Throws<InvalidOperationException>(() => session.GetId(new Note("untracked")));
            await session.SaveChangesAsync();
            Assert.Equal(noteId, session.GetId(note));
        }

        await using (DocumentSession session = store.OpenSession())
        {
            Note? loaded = await session.LoadAsync<Note>(noteId);
            Assert.Equal("no id property here", loaded!.Text);
            Assert.Equal(noteId, session.GetId(loaded));
            session.Delete<Note>(noteId);
            Assert.Throws<InvalidOperationException>(() => session.GetId(loaded)); // the delete let the entity go
        }
    }

    [Fact]
    public async Task Stored_documents_load_in_other_sessions_and_survive_reopen()
    {
        using var dir = new TempDirectory();
        string id;
        await using (var store = await DocumentStore.OpenAsync(dir.Path, TestStoreOptions.SmallSegments()))
        {
            await using var session = store.OpenSession();
            var alice = new User { Name = "Alice", Age = 30 };
            session.Store(alice);
            session.Store(new User { Name = "Bob", Age = 40 }, "users/bob");
            await session.SaveChangesAsync();
            id = alice.Id!;
            Assert.StartsWith("User/", id, StringComparison.Ordinal);
            Assert.True(session.GetVersion(alice) > 0);

            await using var other = store.OpenSession();
            Assert.Equal("Alice", (await other.LoadAsync<User>(id))!.Name);
            Assert.Null(await other.LoadAsync<User>("users/nobody"));
        }

        await using (var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments()))
        {
            await using var session = store.OpenSession();
            var loaded = await session.LoadAsync<User>(new[] { id, "users/bob", "users/none" });
            Assert.Equal("Alice", loaded[id]!.Name);
            Assert.Equal(40, loaded["users/bob"]!.Age);
            Assert.Null(loaded["users/none"]);
            Assert.Same(loaded[id], await session.LoadAsync<User>(id)); // identity map
        }
    }

    [Fact]
    public async Task Only_changed_documents_are_written()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await using (var session = store.OpenSession())
        {
            session.Store(new User { Name = "a" }, "u/1");
            session.Store(new User { Name = "b" }, "u/2");
            await session.SaveChangesAsync();
        }

        long before = store.LastCommittedSequence;
        await using (var session = store.OpenSession())
        {
            var one = await session.LoadAsync<User>("u/1");
            await session.LoadAsync<User>("u/2");
            await session.SaveChangesAsync();
            Assert.Equal(before, store.LastCommittedSequence); // nothing changed: nothing written

            one!.Age = 5;
            await session.SaveChangesAsync();
            Assert.Equal(before + 1, store.LastCommittedSequence);
            using var reader = store.Journal.OpenReader(before + 1);
            Assert.True(reader.TryRead(out var entry));
            var commands = BatchEncoding.Decode(entry.Data);
            Assert.Equal("u/1", Assert.Single(commands).Key.Id);
        }
    }

    [Fact]
    public async Task A_concurrent_change_to_a_loaded_document_makes_SaveChanges_throw_naming_it()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "u/1", Encoding.UTF8.GetBytes("{\"Name\":\"v1\",\"Age\":1}"));
        await using var first = store.OpenSession();
        await using var second = store.OpenSession();
        var a = await first.LoadAsync<User>("u/1");
        var b = await second.LoadAsync<User>("u/1");
        a!.Name = "first";
        b!.Name = "second";
        await first.SaveChangesAsync();
        var conflict = await Assert.ThrowsAsync<ConcurrencyException>(() => second.SaveChangesAsync());
        Assert.Contains(new DocumentKey("User", "u/1"), conflict.Conflicts);
        Assert.Contains("u/1", conflict.Message, StringComparison.Ordinal);

        // Nothing of the failed session was written; the store is usable.
        Assert.Contains("first", Encoding.UTF8.GetString(store.Get("User", "u/1")!.Value.Json.Span),
            StringComparison.Ordinal);
        await using var third = store.OpenSession();
        (await third.LoadAsync<User>("u/1"))!.Age = 99;
        await third.SaveChangesAsync();
    }

    [Theory]
    [InlineData(3)]
    [InlineData(8)]
    [InlineData(9)]
    [InlineData(40)]
    public async Task A_session_finds_each_tracked_document_by_id_and_by_entity_however_many_it_tracks(int count)
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        for (int i = 0; i < count; i += 2)
        {
            await store.PutAsync("User", $"u/{i}", Encoding.UTF8.GetBytes($"{{\"Name\":\"stored {i}\"}}"));
        }

        await using var session = store.OpenSession();
        var entities = new User?[count];
        for (int i = 0; i < count; i++)
        {
            // Even ids exist (loaded), odd ones do not (stored new); loading again answers from the identity map.
            entities[i] = await session.LoadAsync<User>($"u/{i}");
            Assert.Equal(i % 2 == 0, entities[i] is not null);
            if (entities[i] is null)
            {
                session.Store(entities[i] = new User { Name = $"new {i}" }, $"u/{i}");
            }

            Assert.Same(entities[i], await session.LoadAsync<User>($"u/{i}"));
        }

        for (int i = 0; i < count; i++)
        {
            Assert.Equal(i % 2 == 0 ? store.Get("User", $"u/{i}")!.Value.Version : 0, session.GetVersion(entities[i]!));
            var other = new User { Name = "impostor" };
            Assert.Throws<InvalidOperationException>(() => session.Store(other, $"u/{i}"));
            Assert.Throws<InvalidOperationException>(() => session.Store(entities[i]!, $"elsewhere/{i}"));
        }

        // Delete every third, change the rest; after the save each survivor has the commit's version and the deleted
        // ones are no longer tracked (their entities refused, their ids read as absent).
        for (int i = 0; i < count; i++)
        {
            if (i % 3 == 0)
            {
                session.Delete<User>($"u/{i}");
            }
            else
            {
                entities[i]!.Age = i;
            }
        }

        await session.SaveChangesAsync();
        long saved = store.LastCommittedSequence;
        for (int i = 0; i < count; i++)
        {
            if (i % 3 == 0)
            {
                Assert.Throws<InvalidOperationException>(() => session.GetVersion(entities[i]!));
                Assert.Null(await session.LoadAsync<User>($"u/{i}"));
                Assert.Null(store.Get("User", $"u/{i}"));
            }
            else
            {
                Assert.Equal(saved, session.GetVersion(entities[i]!));
                Assert.Equal(i, (await session.LoadAsync<User>($"u/{i}"))!.Age);
                Assert.Equal(saved, store.Get("User", $"u/{i}")!.Value.Version);
            }
        }

        // Nothing left to write: a second save commits nothing.
        await session.SaveChangesAsync();
        Assert.Equal(saved, store.LastCommittedSequence);
    }

    [Fact]
    public async Task A_session_reads_one_snapshot_taken_at_its_first_read()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "u/1", Encoding.UTF8.GetBytes("{\"Name\":\"old1\"}"));
        await store.PutAsync("User", "u/2", Encoding.UTF8.GetBytes("{\"Name\":\"old2\"}"));
        await using var reader = store.OpenSession();
        Assert.Equal("old1", (await reader.LoadAsync<User>("u/1"))!.Name);

        await store.PutAsync("User", "u/2", Encoding.UTF8.GetBytes("{\"Name\":\"new2\"}"));
        await store.PutAsync("User", "u/3", Encoding.UTF8.GetBytes("{\"Name\":\"new3\"}"));
        await store.DeleteAsync("User", "u/1");

        Assert.Equal("old2", (await reader.LoadAsync<User>("u/2"))!.Name);
        Assert.Null(await reader.LoadAsync<User>("u/3"));
        await using var fresh = store.OpenSession();
        Assert.Null(await fresh.LoadAsync<User>("u/1"));
        Assert.Equal("new2", (await fresh.LoadAsync<User>("u/2"))!.Name);
    }

    /// <summary>A store with two documents, doctors on call: the data of the write-skew examples.</summary>
    private static async Task<DocumentStore> TwoDoctorsOnCall(TempDirectory dir)
    {
        var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "doctor/1", Encoding.UTF8.GetBytes("{\"Name\":\"on call\"}"));
        await store.PutAsync("User", "doctor/2", Encoding.UTF8.GetBytes("{\"Name\":\"on call\"}"));
        return store;
    }

    [Fact]
    public async Task Writers_of_the_same_loaded_document_conflict_and_writers_of_different_ones_do_not()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = await TwoDoctorsOnCall(dir);

        // Snapshot isolation: each session read both and changed a different one; neither write conflicts (this is
        // the classic write skew, which snapshot isolation allows).
        await using var s1 = store.OpenSession();
        await using var s2 = store.OpenSession();
        var d1 = await s1.LoadAsync<User>("doctor/1");
        await s1.LoadAsync<User>("doctor/2");
        await s2.LoadAsync<User>("doctor/1");
        var d2 = await s2.LoadAsync<User>("doctor/2");
        Assert.Equal("doctor/1", d1!.Id); // the id is filled in on load
        d1.Name = "off";
        d2!.Name = "off";
        s1.Store(d1);
        await s1.SaveChangesAsync();
        await s2.SaveChangesAsync();

        // The cases that must conflict do: both change the same document, or one deletes what the other changed.
        await using var s3 = store.OpenSession();
        await using var s4 = store.OpenSession();
        await using var s5 = store.OpenSession();
        var x3 = await s3.LoadAsync<User>("doctor/1");
        var x4 = await s4.LoadAsync<User>("doctor/1");
        await s5.LoadAsync<User>("doctor/1");
        x3!.Age = 1;
        x4!.Age = 2;
        s5.Delete<User>("doctor/1");
        await s3.SaveChangesAsync();
        await Assert.ThrowsAsync<ConcurrencyException>(() => s4.SaveChangesAsync());
        await Assert.ThrowsAsync<ConcurrencyException>(() => s5.SaveChangesAsync());
        Assert.NotNull(store.Get("User", "doctor/1"));
    }

    [Fact]
    public async Task Documents_required_unchanged_fail_the_save_if_another_commit_changed_them_so_no_write_skew()
    {
        using var dir = new TempDirectory();
        await using DocumentStore store = await TwoDoctorsOnCall(dir);

        // Each session goes off call only if the other doctor is on call, and requires that doctor unchanged.
        await using var s1 = store.OpenSession();
        await using var s2 = store.OpenSession();
        User mine1 = (await s1.LoadAsync<User>("doctor/1"))!;
        User other1 = (await s1.LoadAsync<User>("doctor/2"))!;
        User other2 = (await s2.LoadAsync<User>("doctor/1"))!;
        User mine2 = (await s2.LoadAsync<User>("doctor/2"))!;
        Assert.Equal("on call", other1.Name);
        Assert.Equal("on call", other2.Name);
        mine1.Name = mine2.Name = "off";
        s1.RequireUnchanged(other1);
        s2.RequireUnchanged(other2);
        await s1.SaveChangesAsync();
        ConcurrencyException skew = await Assert.ThrowsAsync<ConcurrencyException>(() => s2.SaveChangesAsync());
        Assert.Equal([new DocumentKey("User", "doctor/1")], skew.Conflicts);
        Assert.Contains("on call", Encoding.UTF8.GetString(store.Get("User", "doctor/2")!.Value.Json.Span),
            StringComparison.Ordinal);

        // A save that writes nothing checks its requirements against the latest commits and commits nothing: it
        // passes while the document is unchanged, and fails once another commit changed it.
        long before = store.LastCommittedSequence;
        await using (DocumentSession reader = store.OpenSession())
        {
            User read = (await reader.LoadAsync<User>("doctor/2"))!;
            reader.RequireUnchanged(read);
            await reader.SaveChangesAsync();
            Assert.Equal(before, store.LastCommittedSequence);
            reader.RequireUnchanged(read);
            await store.PutAsync("User", "doctor/2", Encoding.UTF8.GetBytes("{\"Name\":\"away\"}"));
            await Assert.ThrowsAsync<ConcurrencyException>(() => reader.SaveChangesAsync());
            Assert.Throws<InvalidOperationException>(() => reader.RequireUnchanged(new User()));
            var fresh = new User { Name = "new" };
            reader.Store(fresh, "doctor/3");
            Assert.Throws<InvalidOperationException>(() => reader.RequireUnchanged(fresh));
        }

        // Likewise an explicit expected version on an unchanged entity is checked, no longer skipped.
        await using (DocumentSession explicitly = store.OpenSession())
        {
            User read = (await explicitly.LoadAsync<User>("doctor/1"))!;
            explicitly.Store(read, "doctor/1", expectedVersion: 1);
            await Assert.ThrowsAsync<ConcurrencyException>(() => explicitly.SaveChangesAsync());
        }
    }

    [Fact]
    public async Task Concurrent_sessions_that_require_what_they_read_unchanged_keep_an_invariant_over_two_documents()
    {
        // Each pair of documents must keep a sum of at least 0: a session withdraws 100 from one only when the pair's
        // sum at its snapshot is at least 100, and requires the other unchanged; otherwise it deposits 100 into one,
        // so pairs stay contended. Under snapshot isolation alone, two sessions withdrawing from the two documents of
        // a pair at once would both commit. In the first round every task reads pair 0 and waits until all have read
        // it before saving, so the race is certain rather than left to the scheduler: exactly one of them commits.
        const int Pairs = 4;
        const int Tasks = 16;
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { Durability = DurabilityMode.Buffered });
        for (int pair = 0; pair < Pairs; pair++)
        {
            await store.PutAsync("User", $"p{pair}/a", "{\"Age\":100}"u8.ToArray());
            await store.PutAsync("User", $"p{pair}/b", "{\"Age\":100}"u8.ToArray());
        }

        int withdrawals = 0;
        int deposits = 0;
        int conflicts = 0;
        int readFirstRound = 0;
        var allReadFirstRound = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await Task.WhenAll(Enumerable.Range(0, Tasks).Select(t => Task.Run(async () =>
        {
            var random = new Random(t);
            for (int i = 0; i < 200; i++)
            {
                int pair = i == 0 ? 0 : random.Next(Pairs);
                await using DocumentSession session = store.OpenSession();
                User a = (await session.LoadAsync<User>($"p{pair}/a"))!;
                User b = (await session.LoadAsync<User>($"p{pair}/b"))!;
                Assert.True(a.Age + b.Age >= 0, $"pair {pair} read below zero");
                if (i == 0)
                {
                    if (Interlocked.Increment(ref readFirstRound) == Tasks)
                    {
                        allReadFirstRound.SetResult();
                    }

                    await allReadFirstRound.Task;
                }
                else
                {
                    await Task.Yield(); // let other sessions read the same pair
                }

                (User mine, User other) = random.Next(2) == 0 ? (a, b) : (b, a);
                bool withdraw = a.Age + b.Age >= 100;
                if (withdraw)
                {
                    mine.Age -= 100;
                    session.RequireUnchanged(other);
                }
                else
                {
                    mine.Age += 100;
                }

                try
                {
                    await session.SaveChangesAsync();
                    Interlocked.Increment(ref withdraw ? ref withdrawals : ref deposits);
                }
                catch (ConcurrencyException)
                {
                    Interlocked.Increment(ref conflicts);
                }
            }
        })));

        int total = 0;
        for (int pair = 0; pair < Pairs; pair++)
        {
            await using DocumentSession session = store.OpenSession();
            int sum = (await session.LoadAsync<User>($"p{pair}/a"))!.Age
                + (await session.LoadAsync<User>($"p{pair}/b"))!.Age;
            Assert.True(sum >= 0, $"pair {pair} ends at {sum}");
            total += sum;
        }

        // Every acknowledged withdrawal and deposit, and only those.
        Assert.Equal((Pairs * 200) - (withdrawals * 100) + (deposits * 100), total);
        Assert.True(conflicts >= Tasks - 1, $"{conflicts} conflicts: the first round alone must give {Tasks - 1}");
        Assert.True(withdrawals > 0 && deposits > 0, $"{withdrawals} withdrawals, {deposits} deposits");
    }

    [Fact]
    public async Task Deletes_are_committed_and_guarded_by_the_loaded_version()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await store.PutAsync("User", "u/1", Encoding.UTF8.GetBytes("{}"));
        await using (var session = store.OpenSession())
        {
            session.Delete<User>("u/1");
            Assert.Null(await session.LoadAsync<User>("u/1"));
            await session.SaveChangesAsync();
        }

        Assert.Null(store.Get("User", "u/1"));
        long version = await store.PutAsync("User", "u/2", Encoding.UTF8.GetBytes("{}"));
        await Assert.ThrowsAsync<ConcurrencyException>(()
            => store.DeleteAsync("User", "u/2", expectedVersion: version + 5).AsTask());
        await store.DeleteAsync("User", "u/2", expectedVersion: version);
        Assert.Null(store.Get("User", "u/2"));
        await Assert.ThrowsAsync<ConcurrencyException>(()
            => store.PutAsync("User", "u/3", "{}"u8.ToArray(), expectedVersion: 7).AsTask());
        Assert.True(await store.PutAsync("User", "u/3", "{}"u8.ToArray(), expectedVersion: 0) > 0);
    }

    [Fact]
    public async Task A_session_can_ask_for_durable_saves_in_a_buffered_store()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.Durability = DurabilityMode.Buffered;
        options.BufferedSyncInterval = TimeSpan.FromHours(1); // no background fsync during the test
        options.FileSystem = files;
        await using var store = DocumentStore.Open(dir.Path, options);
        int before = Volatile.Read(ref files.Syncs);

        await using (var buffered = store.OpenSession())
        {
            buffered.Store(new User { Name = "fast" }, "u/1");
            await buffered.SaveChangesAsync();
        }

        Assert.Equal(before, Volatile.Read(ref files.Syncs)); // acknowledged without an fsync

        await using (var durable = store.OpenSession())
        {
            durable.Durability = DurabilityMode.Durable;
            durable.Store(new User { Name = "safe" }, "u/2");
            await durable.SaveChangesAsync();
        }

        Assert.True(Volatile.Read(ref files.Syncs) > before, "a durable save is fsynced before it is acknowledged");
        await using var session = store.OpenSession();
        Assert.Throws<ArgumentOutOfRangeException>(() => session.Durability = (DurabilityMode)42);
    }

    [Fact]
    public async Task Bad_input_gets_typed_exceptions_and_leaves_the_store_usable()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path,
            new DocumentStoreOptions { MaxDocumentSize = 1024, SegmentSize = 1 << 20 });
        await using var session = store.OpenSession();
        Assert.Throws<ArgumentException>(() => session.Store(new User(), ""));
        Assert.Throws<ArgumentException>(() => session.Store(new User(), new string('x', 2049)));
        Assert.Throws<ArgumentException>(() => session.Store(new User(), "bad\u0001id"));
        await Assert.ThrowsAsync<ArgumentException>(() => session.LoadAsync<User>("").AsTask());
        await Assert.ThrowsAnyAsync<ArgumentException>(() => store.PutAsync("User", null!, "{}"u8.ToArray()).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(()
            => store.PutAsync("User", "u/1", "{not json"u8.ToArray()).AsTask());
        await Assert.ThrowsAsync<ArgumentException>(() => store.PutAsync("User", "u/1", "{} {}"u8.ToArray()).AsTask());
        var tooLarge = await Assert.ThrowsAsync<DocumentTooLargeException>(()
            => store.PutAsync("User", "u/1", Encoding.UTF8.GetBytes($"\"{new string('x', 2000)}\"")).AsTask());
        Assert.Equal(1024, tooLarge.Limit);

        session.Store(new User { Name = new string('y', 2000) }, "u/big");
        await Assert.ThrowsAsync<DocumentTooLargeException>(() => session.SaveChangesAsync());
        session.Delete<User>("u/big");

        await using var unserializable = store.OpenSession();
        unserializable.Store(new Unserializable(), "x/1");
        await Assert.ThrowsAnyAsync<NotSupportedException>(() => unserializable.SaveChangesAsync());

        Assert.True(await store.PutAsync("User", "u/ok", "{\"Name\":\"fine\"}"u8.ToArray()) > 0);
        Assert.NotNull(store.Get("User", "u/ok"));

        // Reads validate ids too (a hit skips it only because written keys were validated): invalid ids throw.
        Assert.Throws<ArgumentException>(() => store.Get("User", "bad\u0001id"));
        Assert.Throws<ArgumentException>(() => store.Get("User", new string('x', 2049)));
        Assert.Throws<ArgumentException>(() => store.Get("", "u/ok"));
        Assert.Throws<ArgumentException>(() => store.Get("Us\u0007er", "u/ok"));
        Assert.ThrowsAny<ArgumentException>(() => store.Get("User", null!));
        await using (var reader = store.OpenSession())
        {
            await Assert.ThrowsAsync<ArgumentException>(() => reader.LoadAsync<User>("bad\u0001id").AsTask());
            await Assert.ThrowsAsync<ArgumentException>(() => reader.LoadAsync<User>(new string('x', 2049)).AsTask());
            Assert.Equal("fine", (await reader.LoadAsync<User>("u/ok"))!.Name); // the session is still usable
            Assert.Null(await reader.LoadAsync<User>("u/missing"));
        }
        Assert.Throws<ArgumentOutOfRangeException>(()
            => DocumentStore.Open(dir.Path + "-other", new DocumentStoreOptions { MaxDocumentSize = 0 }));
        var depth = Assert.Throws<ArgumentOutOfRangeException>(()
            => DocumentStore.Open(dir.Path + "-other", new DocumentStoreOptions { MaxGroupsInFlight = 0 }));
        Assert.Equal("MaxGroupsInFlight", depth.ParamName);
        Assert.Throws<ArgumentOutOfRangeException>(()
            => DocumentStore.Open(dir.Path + "-other", new DocumentStoreOptions { MaxGroupsInFlight = 7 }));
        Assert.Throws<StoreLockedException>(() => DocumentStore.Open(dir.Path));
    }

    [Fact]
    public async Task A_session_used_by_two_callers_at_once_throws_and_a_disposed_one_refuses_work()
    {
        using var dir = new TempDirectory();
        var files = new FaultInjectingFileSystem();
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.FileSystem = files;
        await using var store = DocumentStore.Open(dir.Path, options);
        var session = store.OpenSession();
        session.Store(new User { Name = "x" }, "u/1");

        // Hold the commit inside its fsync, so the first SaveChanges is still in flight when the second call comes.
        (ManualResetEventSlim gate, Task first) = files.HoldNextSync(() => Task.Run(() => session.SaveChangesAsync()));
        await Assert.ThrowsAsync<InvalidOperationException>(() => session.SaveChangesAsync());
        await Assert.ThrowsAsync<InvalidOperationException>(() => session.LoadAsync<User>("u/1").AsTask());
        files.SyncGate = null;
        gate.Set();
        await first;
        Assert.Equal("x", (await session.LoadAsync<User>("u/1"))!.Name);

        session.Dispose();
        session.Dispose();
        Assert.Throws<ObjectDisposedException>(() => session.Store(new User()));
        await Assert.ThrowsAsync<ObjectDisposedException>(() => session.LoadAsync<User>("u/1").AsTask());

        await store.DisposeAsync();
        Assert.Throws<ObjectDisposedException>(() => store.OpenSession());
        Assert.Throws<ObjectDisposedException>(() => store.Get("User", "u/1"));
    }

    [Fact]
    public async Task Sessions_work_across_awaits_on_any_thread()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await using var session = store.OpenSession();
        for (int i = 0; i < 20; i++)
        {
            session.Store(new User { Name = $"n{i}" }, $"u/{i}");
            await Task.Yield();
            await Task.Run(() => session.SaveChangesAsync());
        }

        await using var check = store.OpenSession();
        Assert.Equal("n19", (await check.LoadAsync<User>("u/19"))!.Name);
    }

    private sealed class Unserializable
    {
        public IntPtr Pointer { get; set; } = 1;

        public Action Callback { get; set; } = () => { };
    }

    [Fact]
    public async Task A_generated_id_never_overwrites_a_document_that_already_has_it()
    {
        using var dir = new TempDirectory();
        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());

        // The ids the next Store calls will generate (the clock is made to stand 10 s behind them) already name
        // documents, as after the clock stepped back past an earlier run's ids.
        long floor = DateTime.UtcNow.AddSeconds(10).Ticks;
        var batch = new CommitBatch();
        for (int k = 1; k <= 500; k++)
        {
            batch.Put(nameof(User), $"{nameof(User)}/{floor + k:D19}",
                Encoding.UTF8.GetBytes($"{{\"Name\":\"e{k}\"}}"));
        }

        await store.WriteAsync(batch);
        DocumentIds.GenerateAbove(floor);

        await using (DocumentSession session = store.OpenSession())
        {
            var user = new User { Name = "new" };
            session.Store(user);
            Assert.StartsWith($"{nameof(User)}/", user.Id, StringComparison.Ordinal);
            var conflict = await Assert.ThrowsAsync<ConcurrencyException>(() => session.SaveChangesAsync());
            Assert.Equal(user.Id, Assert.Single(conflict.Conflicts).Id);
        }

        for (int k = 1; k <= 500; k++)
        {
            Assert.Equal($"{{\"Name\":\"e{k}\"}}",
                Encoding.UTF8.GetString(store.Get(nameof(User), $"{nameof(User)}/{floor + k:D19}")!.Value.Json.Span));
        }
    }

    [Fact]
    public async Task Ids_generated_after_an_open_sort_after_the_stores_last_commit_even_when_the_clock_is_behind_it()
    {
        using var dir = new TempDirectory();
        // A commit written when the clock read 20 s later than it does now (as before the clock was stepped back).
        DateTimeOffset then = DateTimeOffset.UtcNow.AddSeconds(20);
        string journalFolder = Path.Combine(dir.Path, DocumentStore.JournalFolderName);
        using (var journal = Folio.Journal.WriteAheadJournal.Open(journalFolder, new Folio.Journal.JournalOptions
        {
            SegmentSize = TestStoreOptions.SmallSegments().SegmentSize,
            TimeProvider = new ManualTimeProvider(then),
        }))
        {
            journal.AppendBatch(new CommitBatch().Put(nameof(User), "earlier", "{\"Name\":\"e\"}"u8.ToArray()));
            journal.Sync();
        }

        await using var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        Assert.NotNull(store.Get(nameof(User), "earlier"));
        await using DocumentSession session = store.OpenSession();
        var user = new User { Name = "new" };
        session.Store(user);
        long generated = long.Parse(user.Id![(nameof(User).Length + 1)..],
            System.Globalization.CultureInfo.InvariantCulture);
        Assert.True(generated > then.UtcTicks, $"{generated} is not after the last commit at {then.UtcTicks}");
        await session.SaveChangesAsync();
    }
}
