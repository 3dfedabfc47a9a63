namespace Folio;

/// <summary>What <see cref="DocumentStore.VerifyAsync"/> read and checked.</summary>
/// <param name="Chunks">Data-file chunks of the current checkpoint checked.</param>
/// <param name="Pages">Pages read from disk and checked (checksum with their position, structure).</param>
/// <param name="JournalSegments">Journal segments checked.</param>
/// <param name="JournalRecords">Journal records checked (checksum, framing, sequences).</param>
/// <param name="Bytes">Bytes read.</param>
/// <param name="Problems">What failed, one line each naming the file and offset; empty when everything
/// passed.</param>
public sealed record VerifyResult(int Chunks, long Pages, int JournalSegments, long JournalRecords, long Bytes,
    IReadOnlyList<string> Problems)
{
    /// <summary>Whether every check passed.</summary>
    public bool IsHealthy => Problems.Count == 0;
}
