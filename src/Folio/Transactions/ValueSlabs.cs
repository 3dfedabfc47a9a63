namespace Folio.Transactions;

/// <summary>
/// Copies document values (UTF-8 JSON) out of journal entries into shared slabs instead of one array each. Recovery
/// replay uses it: a slab holds hundreds to thousands of ~200-byte documents, so the GC traces one object where it
/// would trace thousands, and large slabs are large objects, which the GC does not copy when it promotes them
/// (replay allocates every document it keeps; see docs/benchmarks.md, "Recovery replay"). Slab sizes: see the
/// constructor.
/// <para>
/// Memory. A slab stays alive while any value in it is referenced. The slabs count the bytes still live in each one
/// (<see cref="Release"/> when the index drops a value); at the end of the replay the index copies the survivors of a
/// slab that is less than half live (<see cref="IsSparse"/>) into fresh slabs, so a journal full of overwrites keeps
/// at most about twice its live documents' bytes, not every version it ever held. Values over
/// <see cref="MaxSlabbedValue"/> bytes get their own array (no slab tail is wasted on them).
/// </para>
/// <para>Single-threaded: the replaying thread only, before any reader exists.</para>
/// </summary>
internal sealed class ValueSlabs
{
    /// <summary>The size of the first slab.</summary>
    public const int FirstSlabSize = 64 * 1024;

    /// <summary>The size of a slab once slabs have doubled up to it (a large object: above 85,000 bytes).</summary>
    public const int MaxSlabSize = 1024 * 1024;

    /// <summary>The largest slab sized from the expected bytes (see the constructor).</summary>
    public const int MaxSizedSlab = 64 * 1024 * 1024;

    /// <summary>The largest value copied into a slab; larger values get an array of their own.</summary>
    public const int MaxSlabbedValue = 4 * 1024;

    // Live bytes per slab (by reference). Only slabs appear here; a value with its own array is not tracked.
    private readonly Dictionary<byte[], int> _live = new(ReferenceEqualityComparer.Instance);
    private readonly bool _trackLive;
    private byte[]? _current;
    private int _used;
    private int _nextSize = FirstSlabSize;
    private long _expected;

    /// <summary>Creates the slabs.</summary>
    /// <param name="expectedBytes">
    /// The bytes of slabbed values (at most <see cref="MaxSlabbedValue"/> each) that will be copied, when known (the
    /// replay's sizing pass counts them); 0 when unknown. When known, slabs are sized to what is left, up to
    /// <see cref="MaxSizedSlab"/>: one or a few large arrays allocated at the start of the replay, while the heap is
    /// still small, so the collection their size triggers has little to trace (slabs grown along the way trigger it
    /// halfway, with the replayed documents to trace, on a core the replay needs). Otherwise they double from
    /// <see cref="FirstSlabSize"/> to <see cref="MaxSlabSize"/>.
    /// </param>
    /// <param name="trackLive">Whether to count live bytes per slab (for <see cref="Release"/> and <see cref="IsSparse"/>).</param>
    public ValueSlabs(long expectedBytes = 0, bool trackLive = true)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(expectedBytes);
        _expected = expectedBytes;
        _trackLive = trackLive;
    }

    /// <summary>Whether any slab is less than half live (so <see cref="IsSparse"/> can be true for some value).</summary>
    public bool AnySparse
    {
        get
        {
            foreach (KeyValuePair<byte[], int> slab in _live)
            {
                if (IsSparseSlab(slab.Key, slab.Value))
                {
                    return true;
                }
            }

            return false;
        }
    }

    /// <summary>Copies <paramref name="value"/> into a slab (or its own array when large) and returns the copy.</summary>
    public ReadOnlyMemory<byte> Copy(ReadOnlySpan<byte> value)
    {
        if (value.IsEmpty)
        {
            return ReadOnlyMemory<byte>.Empty;
        }

        if (value.Length > MaxSlabbedValue)
        {
            return value.ToArray();
        }

        if (_current is null || _current.Length - _used < value.Length)
        {
            if (_expected >= value.Length)
            {
                _current = GC.AllocateUninitializedArray<byte>((int)Math.Clamp(_expected, FirstSlabSize, MaxSizedSlab));
            }
            else
            {
                _current = GC.AllocateUninitializedArray<byte>(_nextSize);
                _nextSize = Math.Min(_nextSize * 2, MaxSlabSize);
            }

            _used = 0;
            if (_trackLive)
            {
                _live.Add(_current, 0);
            }
        }

        value.CopyTo(_current.AsSpan(_used));
        var copy = new ReadOnlyMemory<byte>(_current, _used, value.Length);
        _used += value.Length;
        _expected = Math.Max(0, _expected - value.Length);
        if (_trackLive)
        {
            _live[_current] += value.Length;
        }

        return copy;
    }

    /// <summary>Records that <paramref name="value"/> (a copy made here, or any other memory) is no longer referenced.</summary>
    public void Release(ReadOnlyMemory<byte> value)
    {
        if (_trackLive && SlabOf(value) is { } slab)
        {
            _live[slab] -= value.Length;
        }
    }

    /// <summary>Whether <paramref name="value"/> lives in a slab that is less than half live: copy it out to let the slab go.</summary>
    public bool IsSparse(ReadOnlyMemory<byte> value) =>
        SlabOf(value) is { } slab && IsSparseSlab(slab, _live[slab]);

    private byte[]? SlabOf(ReadOnlyMemory<byte> value) =>
        System.Runtime.InteropServices.MemoryMarshal.TryGetArray(value, out ArraySegment<byte> segment)
            && segment.Array is { } array && _live.ContainsKey(array)
            ? array
            : null;

    private bool IsSparseSlab(byte[] slab, int live) => live * 2L < (ReferenceEquals(slab, _current) ? _used : slab.Length);
}
