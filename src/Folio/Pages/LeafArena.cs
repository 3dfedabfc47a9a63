namespace Folio.Pages;

/// <summary>
/// Memory for the leaves one checkpoint's edit encodes before it serializes them (<see cref="LeafEncoder"/>): pages
/// cut front to back from blocks of <see cref="BlockSize"/> bytes. A block is a large object, which the collector
/// never copies and which holds no references for it to trace, whereas a leaf's own arrays of ids and values (one
/// small object per id, and two per leaf), kept until the checkpoint ends, are copied by every collection that
/// promotes them (docs/measurements.md, "Checkpoints that encode their leaves as they finish them"). The serializer
/// seals each encoded page where it lies and the checkpoint writes its chunks from there, so a block is referenced by
/// its leaves until they are serialized, then by the checkpoint's chunk runs until they are written; after that it is
/// garbage (a leaf decoded again from its bytes keeps its block alive through the slices it holds). Blocks are not
/// reused: such a leaf is a node that readers of the published tree may meet until the checkpoint drops it, and a
/// value they read from it is a slice of the block.
/// <para>Owned by the thread that applies its edit (a checkpoint applies each collection's edit on one thread); the
/// serializer of the same tree writes the checksums into its pages later, on the thread that serializes it.</para>
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
