namespace Folio.Buffers;

/// <summary>What <see cref="BufferPool.Prefetch"/> did with a page.</summary>
internal enum PrefetchOutcome
{
    /// <summary>Read into a frame, unpinned, on probation.</summary>
    Loaded,

    /// <summary>Cached or being loaded already: nothing to do.</summary>
    Cached,

    /// <summary>No frame the clock would give up without forcing: dropped.</summary>
    NoFrame,

    /// <summary>The loader threw: dropped (a pin that needs the page reads it again and reports the
    /// failure).</summary>
    Failed,
}
