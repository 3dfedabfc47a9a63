using System.Text.Json;
using System.Text.Json.Serialization;

namespace Folio.Samples.WebApi;

/// <summary>The sample's document: a note. Stored in the <c>notes</c> collection under its <see cref="Id"/>.</summary>
public sealed class Note
{
    /// <summary>The note's id (a time-ordered GUID without dashes unless the client chose one with PUT).</summary>
    public string? Id { get; set; }

    /// <summary>Title, 1 to 200 characters.</summary>
    public string Title { get; set; } = "";

    /// <summary>Free text.</summary>
    public string Body { get; set; } = "";

    /// <summary>Labels.</summary>
    public IList<string> Tags { get; set; } = [];

    /// <summary>When the note was last written, UTC.</summary>
    public DateTime UpdatedUtc { get; set; }
}

/// <summary>What a client sends to create or replace a note.</summary>
/// <param name="Title">Title, 1 to 200 characters.</param>
/// <param name="Body">Free text; null for empty.</param>
/// <param name="Tags">Labels; null for none.</param>
public sealed record NoteInput(string? Title, string? Body, IList<string>? Tags);

/// <summary>One page of notes and the id to continue after (null on the last page).</summary>
/// <param name="Items">The notes, in id order.</param>
/// <param name="Next">Pass as <c>after</c> for the next page; null when there is none.</param>
public sealed record NotePage(IReadOnlyList<Note> Items, string? Next);

/// <summary>One change-feed event as sent over Server-Sent Events.</summary>
/// <param name="Sequence">The commit sequence (also the SSE event id: resume with Last-Event-ID).</param>
/// <param name="Timestamp">The commit time, UTC.</param>
/// <param name="Id">The note's id.</param>
/// <param name="Kind"><c>put</c> or <c>delete</c>.</param>
/// <param name="Note">The note for a put; null for a delete.</param>
public sealed record ChangeEvent(long Sequence, DateTimeOffset Timestamp, string Id, string Kind, Note? Note);

/// <summary>Source-generated JSON for the sample's types (the store and the HTTP layer share it).</summary>
[JsonSourceGenerationOptions(JsonSerializerDefaults.Web)]
[JsonSerializable(typeof(Note))]
[JsonSerializable(typeof(NoteInput))]
[JsonSerializable(typeof(NotePage))]
[JsonSerializable(typeof(ChangeEvent))]
[JsonSerializable(typeof(Microsoft.AspNetCore.Mvc.ProblemDetails))]
[JsonSerializable(typeof(Microsoft.AspNetCore.Http.HttpValidationProblemDetails))]
internal sealed partial class NotesJsonContext : JsonSerializerContext;
