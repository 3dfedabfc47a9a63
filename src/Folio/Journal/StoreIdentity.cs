namespace Folio.Journal;

/// <summary>
/// The id of the store a folder's files belong to, as far as the files read so far say: the first non-empty id one
/// of them carries (a checkpoint header, the journal's durable mark, a segment header), and that file. Every later
/// file that carries an id must carry the same one; files written before stores had ids carry none and match any.
/// Used by the journal's recovery, the follower of a journal's files and the verifier of a store's files. Owned by
/// the one reader walking the files.
/// </summary>
internal struct StoreIdentity
{
    /// <summary>Starts from an id read already (<see cref="Guid.Empty"/>: none) and the file it came from.</summary>
    public StoreIdentity(Guid id, string? source)
    {
        Id = id;
        Source = id == Guid.Empty ? null : source;
    }

    /// <summary>The store's id; <see cref="Guid.Empty"/> while no file read so far carried one.</summary>
    public Guid Id { get; private set; }

    /// <summary>The file <see cref="Id"/> was read from.</summary>
    public string? Source { get; private set; }

    /// <summary>
    /// Checks the id <paramref name="file"/> carries (<paramref name="what"/> names it in the message): takes it when
    /// none is known yet. Returns null when it matches (or carries none), else why the file belongs to another store.
    /// </summary>
    public string? Conflict(Guid id, string file, string what)
    {
        if (id == Guid.Empty || id == Id)
        {
            return null;
        }

        if (Id == Guid.Empty)
        {
            (Id, Source) = (id, file);
            return null;
        }

        return $"{what} belongs to another store (store id {id}) than {Source} (store id {Id}): files of two stores " +
            "are mixed in one folder; put back the files of one store";
    }

    /// <summary>The id in the header of the segment file <paramref name="path"/> (first sequence
    /// <paramref name="first"/>), read without the journal; <see cref="Guid.Empty"/> when the header carries none, is
    /// not valid, or the file cannot be read (gone meanwhile: the journal's own checks report what matters).</summary>
    public static Guid OfSegmentFile(string path, long first)
    {
        byte[] header = new byte[JournalFormat.SegmentHeaderSize];
        try
        {
            using var file = new FileStream(path, FileMode.Open, FileAccess.Read,
                FileShare.ReadWrite | FileShare.Delete);
            if (file.ReadAtLeast(header, header.Length, throwOnEndOfStream: false) < header.Length
                || JournalFormat.ValidateSegmentHeader(header, first) is not null)
            {
                return Guid.Empty;
            }
        }
        catch (IOException)
        {
            return Guid.Empty;
        }

        return JournalFormat.ReadSegmentStoreId(header);
    }

    /// <summary>The id the journal's durable mark in <paramref name="journal"/> carries; <see cref="Guid.Empty"/> when
    /// there is no mark, it has none, or it cannot be read (the store's open reports damage).</summary>
    public static Guid OfDurableMark(string journal)
    {
        try
        {
            return JournalDurableMark.TryRead(Storage.PhysicalFileSystem.Instance, journal, out JournalDurableMark mark)
                ? mark.StoreId
                : Guid.Empty;
        }
        catch (Exception e) when (e is IOException or StoreCorruptedException)
        {
            return Guid.Empty;
        }
    }
}
