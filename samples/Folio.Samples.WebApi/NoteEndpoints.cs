using System.Globalization;
using Microsoft.Net.Http.Headers;

namespace Folio.Samples.WebApi;

/// <summary>
/// CRUD and paging for notes. Every request gets its own <see cref="DocumentSession"/> from the request scope
/// (registered by <c>AddFolio</c>). A note's version travels as its ETag; <c>If-Match</c> on PUT and DELETE makes the
/// write conditional (412 when the note is not at a version it names, checked again at the save), and a PUT or
/// DELETE without it still conflicts (409) with a concurrent writer of the note it loaded.
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

        IfMatchCondition? condition = IfMatchCondition.Parse(context);
        Note? note = await session.LoadAsync<Note>(id, context.RequestAborted);
        if (note is null)
        {
            return NotFound(id);
        }

        if (condition is not null && !condition.Matches(session.GetVersion(note)))
        {
            return PreconditionFailed(id, session.GetVersion(note));
        }

        Apply(note, input);
        note.UpdatedUtc = DateTime.UtcNow;
        if (!await SaveAsync(session, condition, context))
        {
            return PreconditionFailed(id, null);
        }

        SetETag(context, session.GetVersion(note));
        return TypedResults.Ok(note);
    }

    private static async Task<IResult> DeleteAsync(string id, DocumentSession session, HttpContext context)
    {
        IfMatchCondition? condition = IfMatchCondition.Parse(context);
        Note? note = await session.LoadAsync<Note>(id, context.RequestAborted);
        if (note is null)
        {
            return NotFound(id);
        }

        if (condition is not null && !condition.Matches(session.GetVersion(note)))
        {
            return PreconditionFailed(id, session.GetVersion(note));
        }

        session.Delete<Note>(id);
        return await SaveAsync(session, condition, context) ? TypedResults.NoContent() : PreconditionFailed(id, null);
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

    /// <summary>Saves the session's change, which is conditional on the version it loaded. False when that failed and
    /// the request carried <c>If-Match</c>: the precondition held at the load but not at the save (412); without
    /// <c>If-Match</c> the <see cref="ConcurrencyException"/> goes to the exception handler (409).</summary>
    private static async Task<bool> SaveAsync(DocumentSession session, IfMatchCondition? condition,
        HttpContext context)
    {
        try
        {
            await session.SaveChangesAsync(context.RequestAborted);
            return true;
        }
        catch (ConcurrencyException) when (condition is not null)
        {
            return false;
        }
    }

    private static Microsoft.AspNetCore.Http.HttpResults.ProblemHttpResult PreconditionFailed(string id,
        long? version) =>
        TypedResults.Problem(statusCode: StatusCodes.Status412PreconditionFailed, title: "The If-Match did not match.",
            detail: version is long current
                ? $"Note '{id}' is at version {current.ToString(CultureInfo.InvariantCulture)}, which the If-Match " +
                    "does not name."
                : $"Note '{id}' was changed by another request after this one read it.");
}
