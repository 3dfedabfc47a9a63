namespace Folio;

/// <summary>How far <see cref="DocumentStore.VerifyAsync"/> has come.</summary>
/// <param name="Bytes">Bytes read and checked so far.</param>
/// <param name="TotalBytes">Bytes the scrub will read in all (the chunks' and committed journal's sizes when it
/// started).</param>
public readonly record struct VerifyProgress(long Bytes, long TotalBytes);
