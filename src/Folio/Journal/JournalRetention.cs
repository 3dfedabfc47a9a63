namespace Folio.Journal;

/// <summary>
/// A hold on a journal's entries from one sequence on: while it is held, <see cref="WriteAheadJournal.Purge(long)"/>
/// removes no segment holding an entry at or after <see cref="FromSequence"/>. Taken and released under the journal's
/// segments lock, which purges also hold. Disposing is idempotent.
/// </summary>
internal sealed class JournalRetention(WriteAheadJournal journal, long fromSequence) : IDisposable
{
    private int _released;

    /// <summary>The first sequence kept.</summary>
    public long FromSequence { get; } = fromSequence;

    public void Dispose()
    {
        if (Interlocked.Exchange(ref _released, 1) == 0)
        {
            journal.Release(this);
        }
    }
}
