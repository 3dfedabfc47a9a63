using System.Text.Json;
using Microsoft.AspNetCore.Diagnostics.HealthChecks;
using Microsoft.AspNetCore.Http.Json;
using Microsoft.Extensions.Diagnostics.HealthChecks;

namespace Folio.Samples.WebApi;

/// <summary>
/// Builds the sample web application: Folio registered with <c>AddFolio</c> from the <c>Folio</c> configuration
/// section, CRUD and paging endpoints for <see cref="Note"/>, a change feed over Server-Sent Events, <c>/health</c>,
/// and errors as ProblemDetails (400 bad input, 404 unknown id, 409 conflict, 412 failed If-Match, 413 too large,
/// 503 faulted store).
/// </summary>
public static class WebApiApp
{
    /// <summary>Builds (does not start) the application.</summary>
    /// <param name="args">Command-line arguments (<c>--urls</c>, <c>--Folio:Path=...</c>, ...).</param>
    /// <param name="configure">Optional changes to the builder before it is built (tests use it).</param>
    /// <returns>The application.</returns>
    public static WebApplication Create(string[] args, Action<WebApplicationBuilder>? configure = null)
    {
        WebApplicationBuilder builder = WebApplication.CreateBuilder(args);
        builder.Services.AddFolio(builder.Configuration.GetSection("Folio"), options =>
        {
            Action<DocumentStoreOptions>? configured = options.ConfigureStore;
            options.ConfigureStore = store =>
            {
                store.JsonSerializerOptions = new JsonSerializerOptions(JsonSerializerDefaults.Web) {
                    TypeInfoResolver = NotesJsonContext.Default };
                store.CollectionName = static type => type == typeof(Note) ? NoteEndpoints.Collection
                    : DocumentStoreOptions.DefaultCollectionName(type);
                configured?.Invoke(store);
            };
        });
        builder.Services.AddHealthChecks().AddFolioHealthCheck();
        builder.Services.AddProblemDetails();
        builder.Services.AddExceptionHandler<FolioExceptionHandler>();
        builder.Services.Configure<JsonOptions>(options
            => options.SerializerOptions.TypeInfoResolverChain.Insert(0, NotesJsonContext.Default));
        builder.Services.Configure<RouteHandlerOptions>(options => options.ThrowOnBadRequest = true);

        // Let oversized documents reach Folio's own check (413 from DocumentTooLargeException); Kestrel still caps
        // bodies at 4x the document limit so a huge upload is cut off early (also 413).
        long maxDocument = builder.Configuration.GetValue("Folio:MaxDocumentSize",
            (long)DocumentStoreOptions.DefaultMaxDocumentSize);
        builder.WebHost.ConfigureKestrel(kestrel
            => kestrel.Limits.MaxRequestBodySize = Math.Max(64 * 1024, maxDocument * 4));
        configure?.Invoke(builder);

        WebApplication app = builder.Build();
        app.UseExceptionHandler();
        app.UseStatusCodePages();
        app.MapNoteEndpoints();
        app.MapChangeFeedEndpoint();
        app.MapHealthChecks("/health", new HealthCheckOptions { ResponseWriter = WriteHealth });
        return app;
    }

    private static Task WriteHealth(HttpContext context, HealthReport report)
    {
        context.Response.ContentType = "application/json";
        var writer = new Utf8JsonWriter(context.Response.Body);
        writer.WriteStartObject();
        writer.WriteString("status", report.Status.ToString());
        writer.WriteStartObject("checks");
        foreach ((string name, HealthReportEntry entry) in report.Entries)
        {
            writer.WriteStartObject(name);
            writer.WriteString("status", entry.Status.ToString());
            writer.WriteString("description", entry.Description);
            foreach ((string key, object value) in entry.Data)
            {
                writer.WriteString(key, Convert.ToString(value, System.Globalization.CultureInfo.InvariantCulture));
            }

            writer.WriteEndObject();
        }

        writer.WriteEndObject();
        writer.WriteEndObject();
        return FlushAsync(writer);

        static async Task FlushAsync(Utf8JsonWriter writer)
        {
            await writer.FlushAsync().ConfigureAwait(false);
            await writer.DisposeAsync().ConfigureAwait(false);
        }
    }
}
