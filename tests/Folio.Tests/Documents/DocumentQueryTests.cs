using System.Text;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Documents;

public sealed class DocumentQueryTests
{
    private static async Task<DocumentStore> Seed(TempDirectory dir)
    {
        var store = DocumentStore.Open(dir.Path, TestStoreOptions.SmallSegments());
        await using var session = store.OpenSession();
        foreach (string id in new[] { "users/a", "users/b", "users/c", "users/ca", "admins/x", "users/d" })
        {
            session.Store(new User { Name = id, Age = id.Length }, id);
        }

        await session.SaveChangesAsync();
        return store;
    }

    [Fact]
    public async Task Prefix_and_range_queries_stream_in_id_order_both_ways_with_paging()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using var session = store.OpenSession();
        Assert.Equal(["users/a", "users/b", "users/c", "users/ca", "users/d"],
            await Ids(session.QueryByPrefixAsync<User>("users/")));
        Assert.Equal(["users/d", "users/ca", "users/c", "users/b", "users/a"],
            await Ids(session.QueryByPrefixAsync<User>("users/", descending: true)));
        Assert.Equal(["users/c", "users/ca"], await Ids(session.QueryByPrefixAsync<User>("users/c")));
        Assert.Equal(["users/b", "users/c"], await Ids(session.QueryByPrefixAsync<User>("users/", skip: 1, take: 2)));
        Assert.Equal(["users/b", "users/c", "users/ca"],
            await Ids(session.QueryByRangeAsync<User>("users/b", "users/d")));
        Assert.Equal(["users/ca", "users/c"],
            await Ids(session.QueryByRangeAsync<User>("users/b", "users/d", descending: true, take: 2)));
        Assert.Equal(["admins/x", "users/a"], await Ids(session.QueryByRangeAsync<User>(null, "users/b")));
        Assert.Equal(["admins/x", "users/ca"], await Ids(session.QueryAsync<User>(u => u.Age == 8)));
        Assert.Equal(["users/ca"], await Ids(session.QueryAsync<User>(u => u.Age == 8, skip: 1)));
        Assert.Equal(6, await session.CountAsync<User>());
        Assert.Empty(await Ids(session.QueryByPrefixAsync<User>("nobody/")));
        Assert.Throws<ArgumentException>(() => session.QueryByRangeAsync<User>("users/d", "users/a"));
        Assert.Throws<ArgumentOutOfRangeException>(() => session.QueryByPrefixAsync<User>("users/", skip: -1));
    }

    [Fact]
    public async Task A_query_given_a_cancelled_token_throws_even_when_nothing_matches()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using var session = store.OpenSession();
        var cancelled = new CancellationToken(true);
        foreach (IAsyncEnumerable<User> query in new[]
        {
            session.QueryByPrefixAsync<User>("nobody/", cancellationToken: cancelled),
            session.QueryByRangeAsync<User>("x", "y", cancellationToken: cancelled),
            session.QueryAsync<User>(static _ => false, cancellationToken: cancelled),
            session.QueryByPrefixAsync<User>("users/", cancellationToken: cancelled),
        })
        {
            await Assert.ThrowsAnyAsync<OperationCanceledException>(() => Ids(query));
        }
    }

    [Fact]
    public async Task Queries_read_the_sessions_snapshot_while_writers_commit()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using var reader = store.OpenSession();
        Assert.Equal(6, await reader.CountAsync<User>());
        await store.PutAsync("User", "users/e", Encoding.UTF8.GetBytes("{\"Name\":\"e\"}"));
        await store.DeleteAsync("User", "users/a");
        Assert.Equal(6, await reader.CountAsync<User>());
        Assert.Equal("users/a", (await Ids(reader.QueryByPrefixAsync<User>("users/")))[0]);
        await using var fresh = store.OpenSession();
        Assert.Equal(["users/b", "users/c", "users/ca", "users/d", "users/e"],
            await Ids(fresh.QueryByPrefixAsync<User>("users/")));
    }

    [Fact]
    public async Task Metadata_gives_version_and_last_modified_and_an_explicit_expected_version_is_checked()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using var session = store.OpenSession();
        var user = await session.LoadAsync<User>("users/a");
        long version = session.GetVersion(user!);
        DateTimeOffset? modified = session.GetLastModified(user!);
        Assert.True(version > 0);
        Assert.NotNull(modified);
        Assert.InRange(modified.Value, DateTimeOffset.UtcNow.AddMinutes(-5), DateTimeOffset.UtcNow.AddMinutes(1));
        Assert.Equal(version, store.Get("User", "users/a")!.Value.Version);
        Assert.Equal(modified, store.Get("User", "users/a")!.Value.LastModified);

        await using var blind = store.OpenSession();
        var overwrite = new User { Name = "overwrite" };
        blind.Store(overwrite, "users/a", expectedVersion: version + 100);
        await Assert.ThrowsAsync<ConcurrencyException>(() => blind.SaveChangesAsync());
        blind.Store(overwrite, "users/a", expectedVersion: version);
        await blind.SaveChangesAsync();
        Assert.Contains("overwrite", Encoding.UTF8.GetString(store.Get("User", "users/a")!.Value.Json.Span),
            StringComparison.Ordinal);
    }

    [Fact]
    public async Task Query_results_are_tracked_so_their_changes_are_saved_and_checked_against_the_version_read()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using (DocumentSession session = store.OpenSession())
        {
            User loaded = (await session.LoadAsync<User>("users/b"))!;
            loaded.Age = 100;
            session.Delete<User>("users/c");
            List<User> page = await session.QueryByPrefixAsync<User>("users/", skip: 1, take: 2).ToListAsync();

            // The loaded entity comes back as the session has it; the deleted document counts for neither skip nor
            // take; the predicate sees tracked entities as changed.
            Assert.Equal(["users/b", "users/ca"], page.Select(u => u.Id));
            Assert.Same(loaded, page[0]);
            Assert.Equal(["users/b"],
                (await session.QueryAsync<User>(u => u.Age == 100).ToListAsync()).Select(u => u.Id));
            User queried = (await session.QueryByRangeAsync<User>("users/d", null).ToListAsync()).Single();
            Assert.Same(queried, await session.LoadAsync<User>("users/d"));
            Assert.Same(queried, (await session.QueryAsync<User>(u => u.Id == "users/d").ToListAsync()).Single());
            queried.Age = 40; // changed without Store: saved, as a loaded entity's change is
            page[1].Age = 41;
            await session.SaveChangesAsync();
        }

        Assert.Equal([100, 41, 40], new[] { "users/b", "users/ca", "users/d" }.Select(id => Age(store, id)));
        Assert.Null(store.Get("User", "users/c"));

        // A query result changed after another commit changed its document: the save fails, as a load's would,
        // instead of overwriting that commit.
        await using (DocumentSession session = store.OpenSession())
        {
            User stale = (await session.QueryByPrefixAsync<User>("users/a").ToListAsync()).Single();
            await using (DocumentSession other = store.OpenSession())
            {
                other.Store(new User { Name = "other", Age = 7 }, "users/a");
                await other.SaveChangesAsync();
            }

            stale.Age = 8;
            session.Store(stale);
            await Assert.ThrowsAsync<ConcurrencyException>(() => session.SaveChangesAsync());
        }

        Assert.Equal(7, Age(store, "users/a"));

        // Untracked results: each query makes new entities, and a change to one is not saved.
        await using (DocumentSession session = store.OpenSession())
        {
            session.TrackQueryResults = false;
            User first = (await session.QueryByPrefixAsync<User>("users/d").ToListAsync()).Single();
            Assert.NotSame(first, (await session.QueryByPrefixAsync<User>("users/d").ToListAsync()).Single());
            first.Age = 1;
            await session.SaveChangesAsync();
        }

        Assert.Equal(40, Age(store, "users/d"));
    }

    [Fact]
    public async Task A_session_sees_its_saves_in_queries_and_counts_and_a_query_across_a_save_keeps_its_snapshot()
    {
        using var dir = new TempDirectory();
        await using var store = await Seed(dir);
        await using (DocumentSession session = store.OpenSession())
        {
            Assert.Equal(6, await session.CountAsync<User>());
            session.Store(new User { Name = "new" }, "users/e");
            await session.SaveChangesAsync();
            Assert.Equal(7, await session.CountAsync<User>());
            Assert.Equal("users/e", (await Ids(session.QueryByPrefixAsync<User>("users/")))[^1]);
            session.Delete<User>("users/a");
            await session.SaveChangesAsync();
            Assert.Equal(6, await session.CountAsync<User>());
            Assert.Equal("users/b", (await Ids(session.QueryByPrefixAsync<User>("users/")))[0]);
        }

        Assert.Equal(0, store.Index.OpenSnapshots);
        await using (DocumentSession session = store.OpenSession())
        {
            var seen = new List<string>();
            await foreach (User user in session.QueryByPrefixAsync<User>("users/"))
            {
                seen.Add(user.Id!);
                if (seen.Count == 1)
                {
                    user.Age = 99;
                    await session.SaveChangesAsync(); // releases the snapshot this enumeration still reads at
                    await store.PutAsync("User", "users/bb", "{\"Name\":\"later\"}"u8.ToArray());
                    await store.DeleteAsync("User", "users/d");
                    Assert.Equal(1, store.Index.OpenSnapshots);
                }
            }

            // The enumeration read its snapshot to the end: no document created after it, none deleted after it
            // missing; then the snapshot closed.
            Assert.Equal(["users/b", "users/c", "users/ca", "users/d", "users/e"], seen);
            Assert.Equal(0, store.Index.OpenSnapshots);
            Assert.Equal(["users/b", "users/bb", "users/c", "users/ca", "users/e"],
                await Ids(session.QueryByPrefixAsync<User>("users/")));
            Assert.Equal(99, (await session.LoadAsync<User>("users/b"))!.Age);
        }

        Assert.Equal(0, store.Index.OpenSnapshots);
    }

    private static int Age(DocumentStore store, string id)
        => System.Text.Json.JsonDocument.Parse(store.Get("User", id)!.Value.Json).RootElement.GetProperty("Age")
            .GetInt32();

    private static async Task<List<string>> Ids(IAsyncEnumerable<User> users)
    {
        var ids = new List<string>();
        await foreach (User user in users)
        {
            ids.Add(user.Id!);
        }

        return ids;
    }
}
