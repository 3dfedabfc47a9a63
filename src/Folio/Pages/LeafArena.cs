namespace Folio.Pages;

/// <summary>
/// Memory for the leaves one checkpoint's edit encodes before it serializes them (<see cref="LeafEncoder"/>): pages
/// cut front to back from blocks of <see cref="BlockSize"/> bytes. A block is a large object, which the collector
/// never copies and which holds no references for it to trace, where a leaf's own arrays of ids and values (one small
/// object per id, and two per leaf) lived through the whole checkpoint and were copied at every collection that
/// promoted them (docs/measurements.md, "Checkpoints that encode their leaves as they finish them"). The arena is
/// garbage with its edit: an encoded leaf's bytes are copied into the checkpoint's chunk buffer when it is
/// serialized, and a leaf decoded again from them keeps its block alive through the slices it holds.
/// <para>Owned by the thread that applies its edit (a checkpoint applies each collection's edit on one
/// thread).</para>
/// </summary>
internal sealed class LeafArena
{
    /// <summary>The size of a block: 1 MiB, about sixty leaves of the target size.</summary>
    public const int BlockSize = 1024 * 1024;

    private byte[]? _block;
    private int _used;

    /// <summary>The bytes handed out so far (tests and statistics).</summary>
    public long AllocatedBytes { get; private set; }

    /// <summary>Returns <paramref name="length"/> bytes nothing else writes; a page larger than a quarter of a block
    /// gets an array of its own, so a block's unused tail stays small.</summary>
    public Memory<byte> Allocate(int length)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(length);
        AllocatedBytes += length;
        if (length > BlockSize / 4)
        {
            return GC.AllocateUninitializedArray<byte>(length);
        }

        if (_block is null || _block.Length - _used < length)
        {
            _block = GC.AllocateUninitializedArray<byte>(BlockSize);
            _used = 0;
        }

        Memory<byte> memory = _block.AsMemory(_used, length);
        _used += length;
        return memory;
    }
}
