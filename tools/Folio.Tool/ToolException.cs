namespace Folio.Tool;

/// <summary>A failure the tool explains in one line (a missing store, a bad input line).</summary>
internal sealed class ToolException(string message) : Exception(message);
