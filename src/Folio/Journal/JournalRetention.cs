namespace Folio.Journal;

/// <summary>
/// A hold on a journal's entries from one sequence on: while it is held, <see cref="WriteAheadJournal.Purge(long)"/>
/// removes no segment holding an entry at or after <see cref="FromSequence"/>.
/// <para>
/// Owners: the journal's segments lock guards taking, releasing and lapsing a hold (purges hold it too). The one
/// consumer that took the hold (an online backup, a change-feed stream) moves <see cref="FromSequence"/> forward with
/// <see cref="Advance"/> as it reads, without the lock: the field only grows, and a purge that reads an older value
/// (<see cref="Volatile"/> on both sides) merely keeps a segment the consumer no longer needs until the next purge.
/// A hold with a <see cref="MaxHeldBytes"/> (a change-feed reader's) is bounded: a purge that would keep more
/// than that many bytes of sealed segments for it alone lapses it instead (<see cref="IsLapsed"/>), and so does any
/// purge while the disk is full, so a consumer that stopped reading cannot fill the disk nor keep a full one full; the
/// consumer then fails as an unheld reader does, with <see cref="JournalPositionPurgedException"/> when it reaches a
/// purged segment. Disposing is idempotent.
/// </para>
/// </summary>
internal sealed class JournalRetention(WriteAheadJournal journal, long fromSequence, long? maxHeldBytes) : IDisposable
{
    private long _fromSequence = fromSequence;
    private int _released;
    private string? _lapseReason;

    /// <summary>The first sequence kept.</summary>
    public long FromSequence => Volatile.Read(ref _fromSequence);

    /// <summary>The most bytes of sealed segments a purge keeps for this hold alone before it lapses it;
    /// null for a hold that never lapses (a backup's).</summary>
    public long? MaxHeldBytes { get; } = maxHeldBytes;

    /// <summary>Whether a purge gave up this hold (<see cref="LapseReason"/> says why).</summary>
    public bool IsLapsed => LapseReason is not null;

    /// <summary>Why a purge gave up this hold, as a sentence; null while it holds.</summary>
    public string? LapseReason => Volatile.Read(ref _lapseReason);

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
    /// <param name="reason">Why, as a sentence.</param>
    internal void Lapse(string reason) => Volatile.Write(ref _lapseReason, reason);

    public void Dispose()
    {
        if (Interlocked.Exchange(ref _released, 1) == 0)
        {
            journal.Release(this);
        }
    }
}
