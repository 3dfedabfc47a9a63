using System.Runtime.CompilerServices;
using Folio.Storage;

namespace Folio.Documents;

/// <summary>
/// Copies document values (UTF-8 JSON) into shared slabs instead of one array each. Recovery replay uses it at the
/// end of the replay, for the values still live: a slab holds thousands of ~200-byte documents, so the GC traces one
/// object where it would trace thousands, and slabs larger than 85,000 bytes are large objects, which the GC does not
/// copy when it promotes them (see docs/measurements.md, "Recovery replay").
/// <para>
/// Sizes. Slabs are sized to the bytes still to be copied (<c>expectedBytes</c>, counted before copying), between
/// <see cref="MinSlabSize"/> and <see cref="MaxSizedSlab"/>, so the last one holds exactly what is left. The largest
/// is 1 MiB, so that a document a caller keeps (<see cref="StoredDocument.Json"/> is a slice of its slab) keeps at
/// most a megabyte alive, and a thousand slabs a gigabyte of live documents. Values over
/// <see cref="MaxSlabbedValue"/> bytes get an array of their own, so that a large document overwritten later does not
/// keep a slab's worth of neighbours alive, nor they it.
/// </para>
/// <para>Single-threaded.</para>
/// </summary>
internal sealed class ValueSlabs
{
    /// <summary>The smallest slab.</summary>
    public const int MinSlabSize = 64 * 1024;

    /// <summary>The largest slab: 1 MiB.</summary>
    public const int MaxSizedSlab = 1024 * 1024;

    /// <summary>The largest value copied into a slab; larger values get an array of their own.</summary>
    public const int MaxSlabbedValue = 4 * 1024;

    private byte[]? _current;
    private int _used;
    private long _expected;

    /// <summary>Creates the slabs.</summary>
    /// <param name="expectedBytes">The bytes of slabbed values (at most <see cref="MaxSlabbedValue"/> each) that will
    /// be copied.</param>
    public ValueSlabs(long expectedBytes)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(expectedBytes);
        _expected = expectedBytes;
    }

    /// <summary>Copies <paramref name="value"/> into a slab (or its own array when large) and returns the
    /// copy.</summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // replay: a store opens once per process, so no tier-0 pass
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
            _current = GC.AllocateUninitializedArray<byte>(
                (int)Math.Clamp(Math.Max(_expected, value.Length), MinSlabSize, MaxSizedSlab));
            NativeMethods.PopulateForWrite(_current); // fresh pages, filled next: one system call, not a fault per page
            _used = 0;
        }

        value.CopyTo(_current.AsSpan(_used));
        var copy = new ReadOnlyMemory<byte>(_current, _used, value.Length);
        _used += value.Length;
        _expected = Math.Max(0, _expected - value.Length);
        return copy;
    }
}
