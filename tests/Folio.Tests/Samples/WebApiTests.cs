using System.Net;
using System.Net.Http.Headers;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json;
using Folio.Samples.WebApi;
using Folio.Tests.Infrastructure;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace Folio.Tests.Samples;

/// <summary>
/// Starts the web sample on Kestrel at 127.0.0.1 on a free port (the ASP.NET test host is not available here) and
/// drives it with HttpClient.
/// </summary>
public sealed class WebApiTests : IAsyncLifetime, IDisposable
{
    private readonly TempDirectory _directory = new();
    private readonly FaultInjectingFileSystem _files = new();
    private WebApplication _app = null!;
    private HttpClient _client = null!;

    public async Task InitializeAsync()
    {
        _app = WebApiApp.Create(
            // small segments: each open zero-fills two
            ["--urls", "http://127.0.0.1:0", "--Folio:Path", Path.Combine(_directory.Path, "db"),
                "--Folio:MaxDocumentSize", "65536", "--Folio:SegmentSize", "1048576"],
            builder =>
            {
                builder.Logging.ClearProviders();
                builder.Services.PostConfigure<Folio.Extensions.Hosting.FolioOptions>(o =>
                {
                    Action<DocumentStoreOptions>? inner = o.ConfigureStore;
                    o.ConfigureStore = s =>
                    {
                        inner?.Invoke(s);
                        s.FileSystem = _files;
                    };
                });
            });
        await _app.StartAsync();
        string address = _app.Services.GetRequiredService<IServer>()
            .Features.Get<IServerAddressesFeature>()!.Addresses.First();
        Assert.StartsWith("http://127.0.0.1:", address, StringComparison.Ordinal);
        _client = new HttpClient { BaseAddress = new Uri(address), Timeout = TimeSpan.FromSeconds(30) };
    }

    public async Task DisposeAsync()
    {
        _client.Dispose();
        await _app.StopAsync();
        await _app.DisposeAsync();
        _directory.Dispose();
    }

    public void Dispose()
    {
        _client?.Dispose();
        _directory.Dispose();
    }

    private static StringContent Json(string json) => new(json, Encoding.UTF8, "application/json");

    private async Task<(Note Note, string ETag)> CreateAsync(string title)
    {
        using HttpResponseMessage response =
            await _client.PostAsync("/notes", Json($$"""{"title":"{{title}}","body":"b","tags":["x"]}"""));
        Assert.Equal(HttpStatusCode.Created, response.StatusCode);
        Note note = (await response.Content.ReadFromJsonAsync<Note>(JsonSerializerOptions.Web))!;
        Assert.Equal($"/notes/{note.Id}", response.Headers.Location!.OriginalString);
        return (note, response.Headers.ETag!.Tag);
    }

    private static async Task<JsonElement> ProblemAsync(HttpResponseMessage response, HttpStatusCode status)
    {
        Assert.Equal(status, response.StatusCode);
        Assert.Equal("application/problem+json", response.Content.Headers.ContentType!.MediaType);
        JsonElement problem = await response.Content.ReadFromJsonAsync<JsonElement>();
        Assert.Equal((int)status, problem.GetProperty("status").GetInt32());
        return problem;
    }

    [Fact]
    public async Task Create_read_replace_and_delete_a_note()
    {
        (Note created, string etag) = await CreateAsync("first");
        Assert.Equal("first", created.Title);

        using (HttpResponseMessage get = await _client.GetAsync($"/notes/{created.Id}"))
        {
            Assert.Equal(HttpStatusCode.OK, get.StatusCode);
            Assert.Equal(etag, get.Headers.ETag!.Tag);
            Note read = (await get.Content.ReadFromJsonAsync<Note>(JsonSerializerOptions.Web))!;
            Assert.Equal(["x"], read.Tags);
        }

        var put = new HttpRequestMessage(HttpMethod.Put, $"/notes/{created.Id}")
        {
            Content = Json("""{"title":"second","body":"changed"}"""),
        };
        put.Headers.IfMatch.Add(new EntityTagHeaderValue(etag));
        using (HttpResponseMessage replaced = await _client.SendAsync(put))
        {
            Assert.Equal(HttpStatusCode.OK, replaced.StatusCode);
            Assert.NotEqual(etag, replaced.Headers.ETag!.Tag);
            Assert.Equal("second", (await replaced.Content.ReadFromJsonAsync<Note>(JsonSerializerOptions.Web))!.Title);
        }

        using (HttpResponseMessage deleted = await _client.DeleteAsync($"/notes/{created.Id}"))
        {
            Assert.Equal(HttpStatusCode.NoContent, deleted.StatusCode);
        }

        using HttpResponseMessage gone = await _client.GetAsync($"/notes/{created.Id}");
        JsonElement problem = await ProblemAsync(gone, HttpStatusCode.NotFound);
        Assert.Contains(created.Id!, problem.GetProperty("detail").GetString(), StringComparison.Ordinal);
    }

    [Fact]
    public async Task Unknown_ids_are_404_for_get_put_and_delete()
    {
        await ProblemAsync(await _client.GetAsync("/notes/nope"), HttpStatusCode.NotFound);
        await ProblemAsync(await _client.PutAsync("/notes/nope", Json("""{"title":"t"}""")), HttpStatusCode.NotFound);
        await ProblemAsync(await _client.DeleteAsync("/notes/nope"), HttpStatusCode.NotFound);
    }

    [Fact]
    public async Task A_stale_If_Match_is_a_412_and_changes_nothing_and_star_weak_and_lists_follow_the_rfc()
    {
        (Note note, string etag) = await CreateAsync("v1");
        using (HttpResponseMessage first = await _client.PutAsync($"/notes/{note.Id}", Json("""{"title":"v2"}""")))
        {
            Assert.Equal(HttpStatusCode.OK, first.StatusCode);
        }

        HttpRequestMessage Request(HttpMethod method, string ifMatch) =>
            new(method, $"/notes/{note.Id}")
            {
                Content = method == HttpMethod.Put ? Json("""{"title":"v3"}""") : null,
                Headers = { { "If-Match", ifMatch } },
            };

        // RFC 9110: a precondition that does not hold is 412. A tag that is no version, and a weak tag (If-Match
        // compares strongly), match nothing.
        foreach (string stale in new[] { etag, $"W/{etag}", "\"not-a-version\"" })
        {
            JsonElement problem = await ProblemAsync(await _client.SendAsync(Request(HttpMethod.Put, stale)),
                HttpStatusCode.PreconditionFailed);
            Assert.Contains(note.Id!, problem.GetProperty("detail").GetString(), StringComparison.Ordinal);
            await ProblemAsync(await _client.SendAsync(Request(HttpMethod.Delete, stale)),
                HttpStatusCode.PreconditionFailed);
        }

        Note current = (await _client.GetFromJsonAsync<Note>($"/notes/{note.Id}", JsonSerializerOptions.Web))!;
        Assert.Equal("v2", current.Title);

        // "*" (any current version) and a list that names the current version hold.
        string now;
        using (HttpResponseMessage any = await _client.SendAsync(Request(HttpMethod.Put, "*")))
        {
            Assert.Equal(HttpStatusCode.OK, any.StatusCode);
            now = any.Headers.ETag!.Tag;
        }

        using (HttpResponseMessage listed = await _client.SendAsync(Request(HttpMethod.Delete, $"{etag}, {now}")))
        {
            Assert.Equal(HttpStatusCode.NoContent, listed.StatusCode);
        }

        await ProblemAsync(await _client.SendAsync(Request(HttpMethod.Put, "*")), HttpStatusCode.NotFound);
    }

    [Theory]
    [InlineData("""{"title":""}""")]
    [InlineData("""{"body":"no title"}""")]
    [InlineData("""{"title": """)]
    [InlineData("""not json""")]
    public async Task Bad_bodies_are_400_problems(string body)
    {
        await ProblemAsync(await _client.PostAsync("/notes", Json(body)), HttpStatusCode.BadRequest);
    }

    [Fact]
    public async Task Bad_ids_paging_and_headers_are_400_problems()
    {
        await ProblemAsync(await _client.GetAsync("/notes/" + new string('a', 3000)), HttpStatusCode.BadRequest);
        await ProblemAsync(await _client.GetAsync("/notes/bad%01id"), HttpStatusCode.BadRequest);
        await ProblemAsync(await _client.GetAsync("/notes?take=0"), HttpStatusCode.BadRequest);
        await ProblemAsync(await _client.GetAsync("/notes?take=abc"), HttpStatusCode.BadRequest);
        await ProblemAsync(await _client.GetAsync("/changes?from=0"), HttpStatusCode.BadRequest);
        (Note note, _) = await CreateAsync("t");
        var put = new HttpRequestMessage(HttpMethod.Put, $"/notes/{note.Id}") { Content = Json("""{"title":"u"}""") };
        put.Headers.TryAddWithoutValidation("If-Match", "not-an-entity-tag");
        await ProblemAsync(await _client.SendAsync(put), HttpStatusCode.BadRequest);
    }

    [Fact]
    public async Task A_document_over_the_size_limit_is_413_and_the_store_stays_usable()
    {
        string big = new('x', 70_000); // over Folio:MaxDocumentSize (64 KiB), under Kestrel's body cap
        JsonElement problem = await ProblemAsync(
            await _client.PostAsync("/notes", Json($$"""{"title":"big","body":"{{big}}"}""")),
            HttpStatusCode.RequestEntityTooLarge);
        Assert.Contains("65536", problem.GetProperty("detail").GetString(), StringComparison.Ordinal);

        string huge = new('x', 300_000); // over Kestrel's body cap (4x the document limit)
        await ProblemAsync(
            await _client.PostAsync("/notes", Json($$"""{"title":"huge","body":"{{huge}}"}""")),
            HttpStatusCode.RequestEntityTooLarge);

        await CreateAsync("still works");
    }

    [Fact]
    public async Task Paging_walks_every_note_once_in_id_order()
    {
        var ids = new List<string>();
        for (int i = 0; i < 23; i++)
        {
            ids.Add((await CreateAsync($"n{i}")).Note.Id!);
        }

        ids.Sort(StringComparer.Ordinal);
        var seen = new List<string>();
        string? after = null;
        int pages = 0;
        do
        {
            NotePage page = (
                await _client.GetFromJsonAsync<NotePage>("/notes?take=5" + (after is null ? "" : "&after=" + after),
                JsonSerializerOptions.Web))!;
            seen.AddRange(page.Items.Select(n => n.Id!));
            after = page.Next;
            pages++;
        }
        while (after is not null);

        Assert.Equal(ids, seen);
        Assert.Equal(5, pages);

        string prefix = ids[0][..10];
        NotePage byPrefix = (
            await _client.GetFromJsonAsync<NotePage>($"/notes?prefix={prefix}&take=1000", JsonSerializerOptions.Web))!;
        Assert.Equal(ids.Where(id => id.StartsWith(prefix, StringComparison.Ordinal)),
            byPrefix.Items.Select(n => n.Id!));

        // A continuation before the prefix: the page starts at the prefix (non-matching ids in between are skipped).
        NotePage one = (
            await _client.GetFromJsonAsync<NotePage>($"/notes?prefix={ids[5]}&after={ids[0]}",
            JsonSerializerOptions.Web))!;
        Assert.Equal([ids[5]], one.Items.Select(n => n.Id!));
        NotePage none = (
            await _client.GetFromJsonAsync<NotePage>($"/notes?prefix={ids[5]}&after={ids[5]}",
            JsonSerializerOptions.Web))!;
        Assert.Empty(none.Items);
    }

    [Fact]
    public async Task Change_feed_streams_server_sent_events_and_resumes_from_a_saved_sequence()
    {
        (Note a, _) = await CreateAsync("a");
        (Note b, _) = await CreateAsync("b");
        using (HttpResponseMessage deleted = await _client.DeleteAsync($"/notes/{a.Id}"))
        {
            Assert.Equal(HttpStatusCode.NoContent, deleted.StatusCode);
        }

        List<(long Id, string Event, JsonElement Data)> events = await ReadEventsAsync("/changes?from=1", count: 3,
            lastEventId: null);
        Assert.Equal([(a.Id, "put"), (b.Id, "put"), (a.Id, "delete")],
            events.Select(e => (e.Data.GetProperty("id").GetString(), e.Event)));
        Assert.Equal("b", events[1].Data.GetProperty("note").GetProperty("title").GetString());
        Assert.True(events[0].Id < events[1].Id && events[1].Id < events[2].Id);

        // Resume after the first event, as a reconnecting EventSource would (Last-Event-ID), while tailing a new
        // commit.
        Task<List<(long Id, string Event, JsonElement Data)>> resumed = ReadEventsAsync("/changes", count: 3,
            lastEventId: events[0].Id);
        (Note c, _) = await CreateAsync("c");
        List<(long Id, string Event, JsonElement Data)> tail = await resumed;
        Assert.Equal([b.Id, a.Id, c.Id], tail.Select(e => e.Data.GetProperty("id").GetString()));
        Assert.Equal(events[1].Id, tail[0].Id);
    }

    [Fact]
    public async Task A_tail_only_subscriber_gets_the_stream_headers_before_the_next_commit()
    {
        (Note before, _) = await CreateAsync("before"); // not sent: the feed starts at the next commit
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
        using var request = new HttpRequestMessage(HttpMethod.Get, "/changes");
        Task<HttpResponseMessage> send = _client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead,
            cts.Token);
        Task first = await Task.WhenAny(send, Task.Delay(TimeSpan.FromSeconds(5)));
        Assert.True(ReferenceEquals(first, send), "the headers arrive while nothing is committed");
        using HttpResponseMessage response = await send;
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType!.MediaType);

        (Note after, _) = await CreateAsync("after");
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync(cts.Token));
        string? line;
        do
        {
            line = await reader.ReadLineAsync(cts.Token);
        }
        while (line is not null && !line.StartsWith("data: ", StringComparison.Ordinal));

        Assert.NotNull(line);
        Assert.Equal(after.Id, JsonDocument.Parse(line[6..]).RootElement.GetProperty("id").GetString());
        Assert.NotEqual(before.Id, after.Id);
    }

    [Fact]
    public async Task Health_is_200_healthy_then_503_when_the_store_is_faulted()
    {
        await CreateAsync("warm-up");
        using (HttpResponseMessage healthy = await _client.GetAsync("/health"))
        {
            Assert.Equal(HttpStatusCode.OK, healthy.StatusCode);
            Assert.Equal("Healthy",
                (await healthy.Content.ReadFromJsonAsync<JsonElement>()).GetProperty("status").GetString());
        }

        _files.Arm(FileFault.SyncFails);
        await ProblemAsync(
            await _client.PostAsync("/notes", Json("""{"title":"lost"}""")),
            HttpStatusCode.ServiceUnavailable);
        using HttpResponseMessage unhealthy = await _client.GetAsync("/health");
        Assert.Equal(HttpStatusCode.ServiceUnavailable, unhealthy.StatusCode);
        JsonElement report = await unhealthy.Content.ReadFromJsonAsync<JsonElement>();
        Assert.Equal("Unhealthy", report.GetProperty("checks").GetProperty("folio").GetProperty("status").GetString());
    }

    private async Task<List<(long Id, string Event, JsonElement Data)>> ReadEventsAsync(string url, int count,
        long? lastEventId)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(20));
        var request = new HttpRequestMessage(HttpMethod.Get, url);
        if (lastEventId is long id)
        {
            request.Headers.Add("Last-Event-ID", id.ToString(System.Globalization.CultureInfo.InvariantCulture));
        }

        using HttpResponseMessage response = await _client.SendAsync(request, HttpCompletionOption.ResponseHeadersRead,
            cts.Token);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal("text/event-stream", response.Content.Headers.ContentType!.MediaType);
        using var reader = new StreamReader(await response.Content.ReadAsStreamAsync(cts.Token));
        var events = new List<(long, string, JsonElement)>();
        long eventId = 0;
        string kind = "";
        while (events.Count < count)
        {
            string? line = await reader.ReadLineAsync(cts.Token);
            Assert.NotNull(line);
            if (line.StartsWith("id: ", StringComparison.Ordinal))
            {
                eventId = long.Parse(line[4..], System.Globalization.CultureInfo.InvariantCulture);
            }
            else if (line.StartsWith("event: ", StringComparison.Ordinal))
            {
                kind = line[7..];
            }
            else if (line.StartsWith("data: ", StringComparison.Ordinal))
            {
                events.Add((eventId, kind, JsonDocument.Parse(line[6..]).RootElement.Clone()));
            }
        }

        return events;
    }
}
