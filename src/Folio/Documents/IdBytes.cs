using System.Buffers;
using System.Runtime.CompilerServices;
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
    /// <summary>The UTF-8 bytes of the longest id <see cref="Matches"/> encodes on the stack.</summary>
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

    /// <summary><see cref="HashOf(string)"/> of the id.</summary>
    public int Hash { get; }

    public ReadOnlySpan<byte> Span => new(Buffer, Offset, Length);

    /// <summary>The id as a string (a new string each call).</summary>
    public override string ToString() => Encoding.UTF8.GetString(Span);

    /// <summary>An id's bytes in a buffer of their own (tests, and ids that come as strings).</summary>
    public static IdBytes From(string id)
    {
        byte[] bytes = Encoding.UTF8.GetBytes(id);
        return new IdBytes(bytes, 0, bytes.Length, HashOf(id));
    }

    /// <summary>The hash the in-memory layer files an id under: the string's own (Marvin, randomized per process,
    /// so ids chosen to collide in one process do not collide in another). A reader hashes the id it is given
    /// without encoding it; the committer hashes the id of the command it applies.</summary>
    public static int HashOf(string id) => id.GetHashCode();

    /// <summary><see cref="HashOf(string)"/> of an id given as its characters (the same value: both are the
    /// runtime's string hash of the same code units).</summary>
    public static int HashOf(ReadOnlySpan<char> id) => string.GetHashCode(id);

    /// <summary><see cref="HashOf(string)"/> of an id given as UTF-8 (tests and checks).</summary>
    public static int HashOf(ReadOnlySpan<byte> utf8) => Encoding.UTF8.GetString(utf8).GetHashCode();

    /// <summary>
    /// Whether <paramref name="utf8"/> (a stored id) are the bytes the store writes for <paramref name="id"/>: an ASCII
    /// id is compared without encoding; any other is encoded as the store encodes ids, so an id that is not valid
    /// UTF-16 (a lone surrogate, which the store refuses on write and which a replacing encoder would turn into the
    /// bytes of U+FFFD) matches nothing.
    /// </summary>
    [SkipLocalsInit]
    public static bool Matches(ReadOnlySpan<byte> utf8, string id)
    {
        if (Ascii.Equals(utf8, id))
        {
            return true;
        }

        // UTF-8 takes one to three bytes per UTF-16 code unit (four per surrogate pair): outside that, no match.
        if (utf8.Length < id.Length || utf8.Length > 3L * id.Length)
        {
            return false;
        }

        Span<byte> encoded = utf8.Length <= StackLimit ? stackalloc byte[StackLimit] : new byte[utf8.Length];
        return Utf8.FromUtf16(id, encoded, out _, out int written, replaceInvalidSequences: false)
            == OperationStatus.Done && encoded[..written].SequenceEqual(utf8);
    }
}
