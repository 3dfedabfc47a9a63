namespace Folio.Buffers;

/// <summary>
/// The 64-bit word that holds a buffer pool frame's state, reader count and generation, so one compare-and-swap
/// checks all three (<see cref="BufferPool"/>'s protocol).
/// <para>
/// Layout: bits 0-23 the readers (pins) of the frame; bits 24-25 the state (<see cref="Free"/>, <see cref="Loading"/>,
/// <see cref="Loaded"/>, <see cref="Evicting"/>); bits 26-63 the generation, incremented each time the frame is
/// claimed for another page, so a word read before an eviction never compares equal to one after it (38 bits: a
/// frame would have to be reloaded 2^38 times between a pin's read and its compare-and-swap to wrap).
/// </para>
/// </summary>
internal static class FrameWord
{
    /// <summary>No page: the clock may claim it.</summary>
    public const int Free = 0;

    /// <summary>Claimed for a page whose bytes its loader is reading; pins of the page wait for it.</summary>
    public const int Loading = 1;

    /// <summary>Holds its page's bytes; pins increment the readers.</summary>
    public const int Loaded = 2;

    /// <summary>Being taken from its page by the clock (readers were zero when it was claimed).</summary>
    public const int Evicting = 3;

    /// <summary>The most readers a frame counts.</summary>
    public const int MaxReaders = (1 << ReaderBits) - 1;

    private const int ReaderBits = 24;
    private const int StateShift = ReaderBits;
    private const int GenerationShift = ReaderBits + 2;
    private const long ReaderMask = MaxReaders;

    public static long Make(int state, long generation, int readers) =>
        (generation << GenerationShift) | ((long)state << StateShift) | (uint)readers;

    public static int State(long word) => (int)((word >>> StateShift) & 3);

    public static int Readers(long word) => (int)(word & ReaderMask);

    public static long Generation(long word) => word >>> GenerationShift;
}
