using System.Buffers.Binary;
using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using System.Text;

namespace Folio.Documents;

/// <summary>
/// A checkpointed version whose value's pages (a large document's overflow pages) failed their checks, as a write over
/// the document found it: the write replaces the value whole, so it goes on, and the version it replaced stays in the
/// document's chain for snapshots older than the write, holding the failure in place of the value; a read of it
/// throws that failure again, as a read of the tree would have.
/// <para>
/// Layout of the value bytes: the failure's offset (8 bytes, little-endian), the length in bytes of its file path
/// (4 bytes, little-endian), the path and the message, both UTF-8.
/// </para>
/// </summary>
internal static class UnreadableVersion
{
    /// <summary>The version at <paramref name="sequence"/> whose value <paramref name="damage"/> kept from being
    /// read.</summary>
    public static DocumentVersion Of(long sequence, long timestampTicks, StoreCorruptedException damage)
    {
        int pathBytes = Encoding.UTF8.GetByteCount(damage.FilePath);
        byte[] value = new byte[12 + pathBytes + Encoding.UTF8.GetByteCount(damage.Message)];
        BinaryPrimitives.WriteInt64LittleEndian(value, damage.Offset);
        BinaryPrimitives.WriteInt32LittleEndian(value.AsSpan(8), pathBytes);
        Encoding.UTF8.GetBytes(damage.FilePath, value.AsSpan(12));
        Encoding.UTF8.GetBytes(damage.Message, value.AsSpan(12 + pathBytes));
        return new DocumentVersion(sequence, timestampTicks, value, isDeleted: false, isUnreadable: true);
    }

    /// <summary>Throws the failure <paramref name="value"/> holds.</summary>
    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Throw(ReadOnlySpan<byte> value)
    {
        long offset = BinaryPrimitives.ReadInt64LittleEndian(value);
        int pathBytes = BinaryPrimitives.ReadInt32LittleEndian(value[8..]);
        string path = Encoding.UTF8.GetString(value.Slice(12, pathBytes));
        string message = Encoding.UTF8.GetString(value[(12 + pathBytes)..]);
        throw new StoreCorruptedException(message, path, offset);
    }
}
