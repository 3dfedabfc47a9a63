using System.Globalization;

namespace Folio.Samples.WebApi;

/// <summary>
/// <c>GET /changes</c>: the notes' change feed as Server-Sent Events. Starts at <c>?from=</c> (a sequence, inclusive),
/// or after the <c>Last-Event-ID</c> a reconnecting client sends, or else at the next commit; then tails new commits
/// until the client disconnects. Each event's id is its commit sequence, so a client that saved it resumes exactly.
/// The events are written through <c>Response.BodyWriter</c> (<see cref="ServerSentEvents"/>).
/// </summary>
internal static class ChangeFeedEndpoint
{
    public static void MapChangeFeedEndpoint(this IEndpointRouteBuilder app) => app.MapGet("/changes", StreamAsync);

    private static async Task StreamAsync(HttpContext context, DocumentStore store, long? from)
    {
        long start = from
            ?? (long.TryParse(context.Request.Headers["Last-Event-ID"], NumberStyles.None, CultureInfo.InvariantCulture,
            out long last)
            ? last + 1
            : store.LastCommittedSequence + 1);
        if (start < 1)
        {
            throw new ArgumentException($"from must be a sequence number of 1 or more (was {start}).");
        }

        CancellationToken aborted = context.RequestAborted;
        await using IAsyncEnumerator<DocumentChange> changes = store.Changes.ReadAsync(start, aborted)
            .GetAsyncEnumerator(aborted);

        // A purged position throws from the first MoveNextAsync, before the response starts (410). When the first step
        // does not complete at once, the feed is waiting for the next commit: send the headers now so the client knows
        // it is subscribed.
        ValueTask<bool> first = changes.MoveNextAsync();
        if (!first.IsCompleted)
        {
            await StartStreamAsync(context, aborted);
        }

        bool any;
        try
        {
            any = await first;
        }
        catch (OperationCanceledException) when (aborted.IsCancellationRequested)
        {
            return;
        }

        if (!context.Response.HasStarted)
        {
            await StartStreamAsync(context, aborted);
        }

        try
        {
            await ServerSentEvents.WriteAsync(changes, any, context.Response.BodyWriter, aborted);
        }
        catch (OperationCanceledException) when (aborted.IsCancellationRequested)
        {
            // the client went away
        }
    }

    private static async Task StartStreamAsync(HttpContext context, CancellationToken aborted)
    {
        context.Response.ContentType = "text/event-stream";
        context.Response.Headers.CacheControl = "no-cache";
        await context.Response.Body.FlushAsync(aborted);
    }
}
