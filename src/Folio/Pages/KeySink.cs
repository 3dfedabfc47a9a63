namespace Folio.Pages;

/// <summary>Takes one key of a tree walk (<see cref="BTree.VisitKeys"/>); the span is valid for the call only.
/// Returns false to stop the walk.</summary>
internal delegate bool KeySink(ReadOnlySpan<char> key);
