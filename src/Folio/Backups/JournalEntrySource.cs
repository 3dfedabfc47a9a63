using Folio.Journal;

namespace Folio.Backups;

/// <summary>Entries read from the store's own journal, through one of its readers.</summary>
internal sealed class JournalEntrySource(JournalReader reader) : IBackupEntrySource
{
    public long NextSequence => reader.NextSequence;

    public bool TryRead(out ReadOnlySpan<byte> data, out long recordFirstSequence, out long timestampTicks)
    {
        if (!reader.TryRead(out JournalEntry entry))
        {
            data = default;
            recordFirstSequence = timestampTicks = 0;
            return false;
        }

        data = entry.Data;
        recordFirstSequence = reader.RecordFirstSequence;
        timestampTicks = entry.TimestampTicks;
        return true;
    }
}
