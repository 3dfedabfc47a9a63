namespace Folio.Transactions;

/// <summary>
/// Memory for encoded batch entries, cut from per-thread slabs. The committed state keeps a batch's values as slices
/// of its entry until a checkpoint takes them, so every entry outlives a collection or two: thousands of small entries
/// in one slab are one object for the collector to trace, where one array each were thousands. Slabs, and entries too
/// large for one, are allocated on the pinned object heap: the collector never copies them, where arrays on the
/// small object heap that outlive collections are copied at each promotion (gen0 to gen1, gen1 to gen2), and an
/// entry lives until the checkpoint after it, which is hundreds of milliseconds under load (docs/measurements.md,
/// "What the collector keeps: entry slabs and the pending queue"). They hold bytes only, so they give the collector
/// nothing to trace either; a dead slab's space is reclaimed by the next gen2 collection, as a large object's is.
/// <para>
/// Owners. Each thread cuts from its own slab ([ThreadStatic]), front to back, and never writes a region it has
/// handed out; a region is published to the committer with its batch (through the pending queue's interlocked
/// operations). A slab lives as long as any value cut from it is referenced: at most one slab per thread is partly
/// unused, and a value kept long after its neighbours keeps their bytes with it.
/// </para>
/// </summary>
internal static class EntrySlabs
{
    /// <summary>The size of a slab: 16 KiB, about 60 single-document entries of 250 bytes. Small, so that a value a
    /// caller keeps (<see cref="StoredDocument.Json"/>) keeps little else alive.</summary>
    public const int SlabSize = 16 * 1024;

    /// <summary>The largest entry cut from a slab, an eighth of it, so a slab's unused tail is small; a larger entry
    /// gets an array of its own.</summary>
    public const int MaxSlabbedEntry = SlabSize / 8;

    [ThreadStatic]
    private static byte[]? t_slab;

    [ThreadStatic]
    private static int t_used;

    /// <summary>Returns <paramref name="length"/> bytes nothing else writes.</summary>
    public static Memory<byte> Allocate(int length)
    {
        if (length > MaxSlabbedEntry)
        {
            return GC.AllocateUninitializedArray<byte>(length, pinned: true);
        }

        byte[]? slab = t_slab;
        int used = t_used;
        if (slab is null || slab.Length - used < length)
        {
            slab = GC.AllocateUninitializedArray<byte>(SlabSize, pinned: true);
            t_slab = slab;
            used = 0;
        }

        t_used = used + length;
        return slab.AsMemory(used, length);
    }
}
