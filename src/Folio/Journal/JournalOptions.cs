using Folio.Storage;
using Microsoft.Extensions.Logging;

namespace Folio.Journal;

/// <summary>Settings of a <see cref="WriteAheadJournal"/>, validated when it opens.</summary>
public sealed class JournalOptions
{
    /// <summary>The smallest allowed <see cref="SegmentSize"/>: 1 KiB.</summary>
    public const long MinSegmentSize = 1024;

    /// <summary>The largest allowed <see cref="SegmentSize"/>: 1 GiB.</summary>
    public const long MaxSegmentSize = 1L << 30;

    /// <summary>The default <see cref="SegmentSize"/>: 64 MiB.</summary>
    public const long DefaultSegmentSize = 64L << 20;

    /// <summary>
    /// Size of one segment file in bytes. Files are preallocated (zero-filled) to this size, a record never spans two
    /// segments, and the largest record is this size less the 64-byte segment header. Default 64 MiB; between
    /// <see cref="MinSegmentSize"/> and <see cref="MaxSegmentSize"/>. Existing segments keep the size they were created
    /// with.
    /// </summary>
    public long SegmentSize { get; set; } = DefaultSegmentSize;

    /// <summary>
    /// The clock that stamps records (UTC). Default <see cref="TimeProvider.System"/>. Record timestamps never go
    /// backwards: a clock that steps back stamps records with the previous record's time.
    /// </summary>
    public TimeProvider TimeProvider { get; set; } = TimeProvider.System;

    /// <summary>Where recovery, rotation and purge are logged. Default: no logging.</summary>
    public ILoggerFactory? LoggerFactory { get; set; }

    /// <summary>The first sequence of a journal created new (0 or 1: from the start). A restored store's journal starts
    /// after the checkpoint its data file holds; ignored when the folder already holds a journal.</summary>
    internal long NewJournalFirstSequence { get; set; }

    /// <summary>With <see cref="NewJournalFirstSequence"/>: the time (UTC ticks) of the record that held the entry
    /// before it, kept in the purge watermark (backups of the restored store name that entry by it); 0 when
    /// unknown.</summary>
    internal long NewJournalPreviousTimestamp { get; set; }

    /// <summary>The smallest piece of a segment zero-filled at once, and a new segment's first: 1 MiB. Tests with
    /// small segments make it smaller, so their segments are filled piece by piece as large ones are.</summary>
    internal long MinFillPiece { get; set; } = WriteAheadJournal.DefaultMinFillPiece;

    /// <summary>The largest piece zero-filled at once, unless one record needs more: 8 MiB.</summary>
    internal long MaxFillPiece { get; set; } = WriteAheadJournal.DefaultMaxFillPiece;

    /// <summary>The file system; tests swap in a fault-injecting one.</summary>
    internal IFileSystem FileSystem { get; set; } = PhysicalFileSystem.Instance;

    internal void Validate()
    {
        if (SegmentSize is < MinSegmentSize or > MaxSegmentSize)
        {
            ThrowHelper.ThrowArgumentOutOfRange(nameof(SegmentSize), SegmentSize,
                $"JournalOptions.SegmentSize must be between {MinSegmentSize} and {MaxSegmentSize} bytes.");
        }

        if (TimeProvider is null)
        {
            ThrowHelper.ThrowArgument(nameof(TimeProvider), "JournalOptions.TimeProvider must not be null.");
        }
    }
}
