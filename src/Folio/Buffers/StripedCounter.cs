using System.Numerics;

namespace Folio.Buffers;

/// <summary>
/// A count that many threads change at once and few read: each processor adds to a cell of its own, on its own
/// 64-byte cache line, so two cores that pin and unpin pages at the same time do not pass one line back and forth on
/// every change, as they would with one shared field.
/// <para>
/// Protocol. Writers: any thread, by <see cref="Interlocked"/> increment or decrement of the cell of the processor it
/// runs on now (two threads on one processor share a cell, hence the interlocked operations). A thread may change
/// one cell and undo the change in another (it moved between processors, or an unpin ran on another thread than its
/// pin), so a cell alone means nothing and may be negative; only the sum does. Readers: <see cref="Sum"/> reads every
/// cell (acquire) and adds them up: exact when no change runs meanwhile; changes made while it reads may be seen in
/// one cell and not in another, so a sum read under changes is only an estimate (it may even be negative). That is
/// what its readers need: a gauge, a wait for a free frame that looks again within 10 ms, and a dispose that runs
/// after the pins it cares about.
/// </para>
/// </summary>
internal sealed class StripedCounter
{
    private const int Stride = 64 / sizeof(int); // ints between two cells: one cache line each

    private readonly int[] _cells;
    private readonly int _mask;

    public StripedCounter()
    {
        int stripes = (int)BitOperations.RoundUpToPowerOf2((uint)Math.Max(1, Environment.ProcessorCount));
        _mask = stripes - 1;

        // One line more than the cells: cell 0 is unused, so no cell shares a line with the array's length.
        _cells = new int[(stripes + 1) * Stride];
    }

    public void Increment() => Interlocked.Increment(ref _cells[Cell()]);

    public void Decrement() => Interlocked.Decrement(ref _cells[Cell()]);

    /// <summary>The count: the sum of the cells.</summary>
    public int Sum()
    {
        int sum = 0;
        for (int i = Stride; i < _cells.Length; i += Stride)
        {
            sum += Volatile.Read(ref _cells[i]);
        }

        return sum;
    }

    private int Cell() => ((Thread.GetCurrentProcessorId() & _mask) + 1) * Stride;
}
