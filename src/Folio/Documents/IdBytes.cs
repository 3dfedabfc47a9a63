using System.Buffers;
using System.Text;
using System.Text.Unicode;

namespace Folio.Documents;

/// <summary>
/// A document id as UTF-8 bytes inside a buffer the store keeps (usually the encoded journal entry that wrote the id),
/// with its hash: how the in-memory layer holds an id without an object of its own. A commit keeps its entry until
/// the checkpoint after it; ids kept this way cost the collector nothing to trace or copy, where one string per
/// commit was one more object each collection had to move (docs/measurements.md, 2026-11-28). Immutable; the bytes
/// it points at are never written again.
/// </summary>
internal readonly struct IdBytes
{
    /// <summary>The UTF-8 bytes of the longest id an id lookup encodes on the stack (longer ones rent).</summary>
    private const int StackLimit = 512;

    public IdBytes(byte[] buffer, int offset, int length, int hash)
    {
        Buffer = buffer;
        Offset = offset;
        Length = length;
        Hash = hash;
    }

    /// <summary>The buffer holding the id.</summary>
    public byte[] Buffer { get; }

    /// <summary>Where the id's bytes start in <see cref="Buffer"/>.</summary>
    public int Offset { get; }

    /// <summary>The id's length in UTF-8 bytes.</summary>
    public int Length { get; }

    /// <summary><see cref="HashOf"/> the bytes.</summary>
    public int Hash { get; }

    public ReadOnlySpan<byte> Span => new(Buffer, Offset, Length);

    /// <summary>The id as a string (a new string each call).</summary>
    public override string ToString() => Encoding.UTF8.GetString(Span);

    /// <summary>An id's bytes in a buffer of their own (tests, and ids that come as strings).</summary>
    public static IdBytes From(string id)
    {
        byte[] bytes = Encoding.UTF8.GetBytes(id);
        return new IdBytes(bytes, 0, bytes.Length, HashOf(bytes));
    }

    /// <summary>The hash the in-memory layer files an id under: randomized per process (HashCode's seed), so ids
    /// chosen to collide in one process do not collide in another.</summary>
    public static int HashOf(ReadOnlySpan<byte> utf8)
    {
        var hash = new HashCode();
        hash.AddBytes(utf8);
        return hash.ToHashCode();
    }

    /// <summary>
    /// Encodes <paramref name="id"/> as the store would have encoded it when writing it, for a lookup. False when no
    /// stored id can have these bytes: the id is not valid UTF-16 (a lone surrogate, which the store refuses on write
    /// and which a replacing encoder would turn into U+FFFD, the bytes of another id), or it is longer than
    /// <see cref="DocumentIds.MaxIdBytes"/>.
    /// </summary>
    /// <param name="id">The id a reader asks for.</param>
    /// <param name="scratch">At least <see cref="StackLimit"/> bytes; longer ids rent a buffer of their own,
    /// returned through <paramref name="rented"/>.</param>
    /// <param name="bytes">The encoded id, in <paramref name="scratch"/> or <paramref name="rented"/>.</param>
    /// <param name="rented">A pooled buffer holding <paramref name="bytes"/> that the caller returns to
    /// <see cref="ArrayPool{T}.Shared"/> when done, or null (always null when this returns false).</param>
    public static bool TryEncode(string id, Span<byte> scratch, out ReadOnlySpan<byte> bytes, out byte[]? rented)
    {
        rented = null;
        bytes = default;
        Span<byte> destination = scratch;
        if ((long)id.Length * 3 > scratch.Length)
        {
            if ((long)id.Length > DocumentIds.MaxIdBytes)
            {
                return false; // every char is at least one byte
            }

            rented = ArrayPool<byte>.Shared.Rent(id.Length * 3);
            destination = rented;
        }

        if (Utf8.FromUtf16(id, destination, out _, out int written, replaceInvalidSequences: false)
            != OperationStatus.Done || written > DocumentIds.MaxIdBytes)
        {
            if (rented is not null)
            {
                ArrayPool<byte>.Shared.Return(rented);
                rented = null;
            }

            return false;
        }

        bytes = destination[..written];
        return true;
    }

    /// <summary>Scratch space <see cref="TryEncode"/> needs.</summary>
    public const int ScratchBytes = StackLimit;
}
