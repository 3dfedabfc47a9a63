namespace Folio.Backups;

/// <summary>The journal entries a backup copies, one at a time in sequence order: read from the store's own journal
/// (<see cref="JournalEntrySource"/>), or spooled from the files of a store another process holds
/// (<see cref="SpooledEntrySource"/>). One backup owns a source.</summary>
internal interface IBackupEntrySource
{
    /// <summary>The sequence of the entry <see cref="TryRead"/> returns next.</summary>
    long NextSequence { get; }

    /// <summary>Reads the next entry: its bytes (valid until the next call), the first sequence of its record and
    /// the record's timestamp; false when there is none.</summary>
    bool TryRead(out ReadOnlySpan<byte> data, out long recordFirstSequence, out long timestampTicks);
}
