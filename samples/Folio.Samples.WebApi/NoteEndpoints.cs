using System.Globalization;
using Microsoft.Net.Http.Headers;

namespace Folio.Samples.WebApi;

/// <summary>
/// CRUD and paging for notes. Every request gets its own <see cref="DocumentSession"/> from the request scope
/// (registered by <c>AddFolio</c>). A note's version travels as its ETag; <c>If-Match</c> on PUT and DELETE makes the
/// write conditional (409 when the note changed), and a PUT without it still conflicts with a concurrent writer of
/// the note it loaded.
/// </summary>
internal static class NoteEndpoints
{
    public const string Collection = "notes";
    private const int MaxTitleLength = 200;
    private const int MaxPageSize = 1000;

    public static void MapNoteEndpoints(this IEndpointRouteBuilder app)
    {
        RouteGroupBuilder notes = app.MapGroup("/notes");
        notes.MapGet("/{id}", GetAsync);
        notes.MapPost("/", CreateAsync);
        notes.MapPut("/{id}", ReplaceAsync);
        notes.MapDelete("/{id}", DeleteAsync);
        notes.MapGet("/", ListAsync);
    }

    private static async Task<IResult> GetAsync(string id, DocumentSession session, HttpContext context)
    {
        Note? note = await session.LoadAsync<Note>(id, context.RequestAborted);
        if (note is null)
        {
            return NotFound(id);
        }

        SetETag(context, session.GetVersion(note));
        return TypedResults.Ok(note);
    }

    private static async Task<IResult> CreateAsync(NoteInput input, DocumentSession session, HttpContext context)
    {
        if (Validate(input) is { } invalid)
        {
            return invalid;
        }

        var note = new Note { Id = Guid.CreateVersion7().ToString("N"), UpdatedUtc = DateTime.UtcNow };
        Apply(note, input);
        session.Store(note, note.Id, expectedVersion: 0);
        await session.SaveChangesAsync(context.RequestAborted);
        SetETag(context, session.GetVersion(note));
        return TypedResults.Created($"/notes/{note.Id}", note);
    }

    private static async Task<IResult> ReplaceAsync(string id, NoteInput input, DocumentSession session,
        HttpContext context)
    {
        if (Validate(input) is { } invalid)
        {
            return invalid;
        }

        long? expected = IfMatch(context);
        Note? note = await session.LoadAsync<Note>(id, context.RequestAborted);
        if (note is null)
        {
            return NotFound(id);
        }

        Apply(note, input);
        note.UpdatedUtc = DateTime.UtcNow;
        session.Store(note, id, expected);
        await session.SaveChangesAsync(context.RequestAborted);
        SetETag(context, session.GetVersion(note));
        return TypedResults.Ok(note);
    }

    private static async Task<IResult> DeleteAsync(string id, DocumentSession session, HttpContext context)
    {
        long? expected = IfMatch(context);
        Note? note = await session.LoadAsync<Note>(id, context.RequestAborted);
        if (note is null)
        {
            return NotFound(id);
        }

        if (expected is long version && version != session.GetVersion(note))
        {
            throw new ConcurrencyException($"Note '{id}' is at version {session.GetVersion(note)}, not {version}.");
        }

        session.Delete<Note>(id);
        await session.SaveChangesAsync(context.RequestAborted);
        return TypedResults.NoContent();
    }

    private static async Task<IResult> ListAsync(DocumentSession session, HttpContext context, string? prefix,
        string? after, int? take)
    {
        int pageSize = take ?? 50;
        if (pageSize is < 1 or > MaxPageSize)
        {
            return TypedResults.ValidationProblem(new Dictionary<string,
                string[]> { ["take"] = [$"take must be between 1 and {MaxPageSize}."] });
        }

        var items = new List<Note>(pageSize);
        session.TrackQueryResults = false; // a listing only reads

        // With both a prefix and a continuation, start at whichever comes later: ids before the prefix cannot match.
        string? from = prefix is not null && after is not null && string.CompareOrdinal(prefix, after) > 0 ? prefix
            : after;
        IAsyncEnumerable<Note> query = from is null
            ? session.QueryByPrefixAsync<Note>(prefix ?? "", take: pageSize + 1,
                cancellationToken: context.RequestAborted)
            : session.QueryByRangeAsync<Note>(from, null, take: pageSize + 2,
                cancellationToken: context.RequestAborted);
        bool more = false;
        await foreach (Note note in query)
        {
            if (after is not null && string.Equals(note.Id, after, StringComparison.Ordinal))
            {
                continue; // the range starts at 'after' inclusive; the page starts after it
            }

            if (prefix is not null && !note.Id!.StartsWith(prefix, StringComparison.Ordinal))
            {
                break; // left the prefix
            }

            if (items.Count == pageSize)
            {
                more = true;
                break;
            }

            items.Add(note);
        }

        return TypedResults.Ok(new NotePage(items, more ? items[^1].Id : null));
    }

    private static Microsoft.AspNetCore.Http.HttpResults.ValidationProblem? Validate(NoteInput input)
    {
        if (string.IsNullOrWhiteSpace(input.Title) || input.Title.Length > MaxTitleLength)
        {
            return TypedResults.ValidationProblem(new Dictionary<string,
                string[]> { ["title"] = [$"title is required and at most {MaxTitleLength} characters."] });
        }

        return null;
    }

    private static void Apply(Note note, NoteInput input)
    {
        note.Title = input.Title!;
        note.Body = input.Body ?? "";
        note.Tags = input.Tags ?? [];
    }

    private static Microsoft.AspNetCore.Http.HttpResults.ProblemHttpResult NotFound(string id) =>
        TypedResults.Problem(statusCode: StatusCodes.Status404NotFound, title: "No such note.",
            detail: $"There is no note with id '{id}'.");

    private static void SetETag(HttpContext context, long version) =>
        context.Response.Headers.ETag = new EntityTagHeaderValue("\"" + version.ToString(CultureInfo.InvariantCulture)
            + "\"").ToString();

    /// <summary>The version in an <c>If-Match</c> header (<c>"12"</c>), or null without one; 400 for anything
    /// else.</summary>
    private static long? IfMatch(HttpContext context)
    {
        string? header = context.Request.Headers.IfMatch;
        if (string.IsNullOrEmpty(header))
        {
            return null;
        }

        string value = header.Trim().Trim('"');
        if (!long.TryParse(value, NumberStyles.None, CultureInfo.InvariantCulture, out long version) || version < 1)
        {
            throw new ArgumentException($"If-Match must be a note's ETag (a quoted version number), not '{header}'.");
        }

        return version;
    }
}
