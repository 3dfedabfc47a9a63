namespace Folio.Journal;

/// <summary>
/// A hold on a journal's entries from one sequence on: while it is held, <see cref="WriteAheadJournal.Purge(long)"/>
/// removes no segment holding an entry at or after <see cref="FromSequence"/>.
/// <para>
/// Owners: the journal's segments lock guards taking, releasing and lapsing a hold (purges hold it too). The one
/// consumer that took the hold (an online backup, a change-feed stream) moves <see cref="FromSequence"/> forward with
/// <see cref="Advance"/> as it reads, without the lock: the field only grows, and a purge that reads an older value
/// (<see cref="Volatile"/> on both sides) merely keeps a segment the consumer no longer needs until the next purge.
/// A hold with a <see cref="MaxHeldBytes"/> below <see cref="long.MaxValue"/> is bounded: a purge that would keep more
/// than that many bytes of sealed segments for it alone lapses it instead (<see cref="IsLapsed"/>), so a consumer that
/// stopped reading cannot fill the disk; the consumer then fails as an unheld reader does, with
/// <see cref="JournalPositionPurgedException"/> when it reaches a purged segment. Disposing is idempotent.
/// </para>
/// </summary>
internal sealed class JournalRetention(WriteAheadJournal journal, long fromSequence, long maxHeldBytes) : IDisposable
{
    private long _fromSequence = fromSequence;
    private int _released;
    private int _lapsed;

    /// <summary>The first sequence kept.</summary>
    public long FromSequence => Volatile.Read(ref _fromSequence);

    /// <summary>The most bytes of sealed segments a purge keeps for this hold alone before it lapses it;
    /// <see cref="long.MaxValue"/> for a hold that never lapses.</summary>
    public long MaxHeldBytes { get; } = maxHeldBytes;

    /// <summary>Whether a purge gave up this hold because it kept more than <see cref="MaxHeldBytes"/>.</summary>
    public bool IsLapsed => Volatile.Read(ref _lapsed) != 0;

    /// <summary>Keeps only the entries from <paramref name="sequence"/> on (the consumer has read the ones before).
    /// Called by the hold's one consumer; a smaller value than the current one is ignored.</summary>
    /// <param name="sequence">The next sequence the consumer reads.</param>
    public void Advance(long sequence)
    {
        if (sequence > _fromSequence)
        {
            Volatile.Write(ref _fromSequence, sequence);
        }
    }

    /// <summary>Marks the hold lapsed; the purge that calls this (under the segments lock) has removed it from the
    /// journal's holds.</summary>
    internal void Lapse() => Volatile.Write(ref _lapsed, 1);

    public void Dispose()
    {
        if (Interlocked.Exchange(ref _released, 1) == 0)
        {
            journal.Release(this);
        }
    }
}
