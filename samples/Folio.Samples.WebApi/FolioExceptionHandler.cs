using System.Text.Json;
using Microsoft.AspNetCore.Diagnostics;
using Microsoft.AspNetCore.Mvc;

namespace Folio.Samples.WebApi;

/// <summary>
/// Turns exceptions into ProblemDetails responses: <see cref="ConcurrencyException"/> 409,
/// <see cref="DocumentTooLargeException"/> 413, bad ids and bodies (<see cref="ArgumentException"/>,
/// <see cref="JsonException"/>, <see cref="BadHttpRequestException"/>) 400 or the request's own status,
/// a purged change-feed position 410, a faulted store 503. Anything else falls through to the default 500.
/// </summary>
internal sealed class FolioExceptionHandler(IProblemDetailsService problemDetails) : IExceptionHandler
{
    public async ValueTask<bool> TryHandleAsync(HttpContext httpContext, Exception exception,
        CancellationToken cancellationToken)
    {
        (int status, string title) = exception switch
        {
            ConcurrencyException => (StatusCodes.Status409Conflict, "The document was changed by someone else."),
            DocumentTooLargeException => (StatusCodes.Status413PayloadTooLarge, "The document is too large."),
            BadHttpRequestException bad
                => (bad.StatusCode, bad.StatusCode == StatusCodes.Status413PayloadTooLarge
                ? "The request body is too large." : "The request is not valid."),
            ArgumentException or JsonException => (StatusCodes.Status400BadRequest, "The request is not valid."),
            JournalPositionPurgedException => (StatusCodes.Status410Gone, "The change-feed position was purged."),
            StoreFaultedException
                => (StatusCodes.Status503ServiceUnavailable, "The store cannot commit: it is faulted."),
            _ => (0, ""),
        };

        if (status == 0 || httpContext.Response.HasStarted)
        {
            return false;
        }

        httpContext.Response.StatusCode = status;
        var problem = new ProblemDetails { Status = status, Title = title, Detail = exception.Message };
        if (exception is ConcurrencyException conflict)
        {
            problem.Extensions["conflicts"] = conflict.Conflicts.Select(static k => k.Id).ToArray();
        }

        return await problemDetails.TryWriteAsync(
            new ProblemDetailsContext { HttpContext = httpContext, ProblemDetails = problem,
            Exception = exception }).ConfigureAwait(false);
    }
}
