using System.Buffers.Binary;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text;

namespace Folio.Transactions;

/// <summary>
/// The journal entry of a committed batch (docs/formats/journal.md, "Batch entry"). Little-endian:
/// <code>
///   u8 format (1) | u32 command count | per command:
///     u8 kind (1 put, 2 delete) | u16 collection length | collection UTF-8 | u16 id length | id UTF-8
///     | put only: u32 value length | value bytes
/// </code>
/// Encoding runs on the submitting thread, so the committer only copies bytes. The encoded entry is also where the
/// committed state keeps the batch's values and ids (<see cref="NextCommand"/>): the store owns those bytes, where the
/// caller's memory may be reused as soon as the commit completes.
/// </summary>
internal static class BatchEncoding
{
    public const byte Format = 1;
    public const int MaxNameBytes = ushort.MaxValue;

    /// <summary>The offset of the first command in an entry: after the format byte and the command count.</summary>
    public const int FirstCommand = 5;

    /// <summary>Encodes a batch into memory of exactly its size from <see cref="EntrySlabs"/>, which nothing else
    /// writes: the values the committed state keeps are slices of it.</summary>
    public static ReadOnlyMemory<byte> Encode(CommitBatch batch)
    {
        List<BatchCommand> commands = batch.Commands;
        long size = FirstCommand;
        for (int i = 0; i < commands.Count; i++)
        {
            BatchCommand command = commands[i];
            int collection = NameBytes(command.Key.Collection, "collection");
            int id = NameBytes(command.Key.Id, "id");
            size += 1 + 2 + collection + 2 + id + (command.Kind == ChangeKind.Put ? 4 + command.Value.Length : 0);
        }

        if (size > Array.MaxLength)
        {
            ThrowHelper.ThrowArgument(nameof(batch), $"The batch encodes to {size} bytes, more than a batch can hold.");
        }

        Memory<byte> memory = EntrySlabs.Allocate((int)size);
        Span<byte> span = memory.Span;
        span[0] = Format;
        BinaryPrimitives.WriteInt32LittleEndian(span[1..], commands.Count);
        int at = FirstCommand;
        for (int i = 0; i < commands.Count; i++)
        {
            BatchCommand command = commands[i];
            span[at++] = (byte)command.Kind;
            at += WriteName(span[at..], command.Key.Collection);
            at += WriteName(span[at..], command.Key.Id);
            if (command.Kind == ChangeKind.Put)
            {
                BinaryPrimitives.WriteInt32LittleEndian(span[at..], command.Value.Length);
                command.Value.Span.CopyTo(span[(at + 4)..]);
                at += 4 + command.Value.Length;
            }
        }

        Debug.Assert(at == memory.Length, "The sizes counted are the sizes written.");
        return memory;
    }

    /// <summary>
    /// Where the id and the value of the command at <paramref name="at"/> of an entry <see cref="Encode"/> wrote lie in
    /// the entry (the value empty for a delete); moves <paramref name="at"/> to the next command. Start at
    /// <see cref="FirstCommand"/>. The committed state keeps both as slices of the entry.
    /// </summary>
    public static void NextCommand(ReadOnlySpan<byte> entry, ref int at, out int idOffset, out int idLength,
        out int valueOffset, out int valueLength)
    {
        var kind = (ChangeKind)entry[at];
        at += 1;
        at += 2 + BinaryPrimitives.ReadUInt16LittleEndian(entry[at..]);
        idLength = BinaryPrimitives.ReadUInt16LittleEndian(entry[at..]);
        idOffset = at + 2;
        at = idOffset + idLength;
        if (kind != ChangeKind.Put)
        {
            valueOffset = at;
            valueLength = 0;
            return;
        }

        valueLength = BinaryPrimitives.ReadInt32LittleEndian(entry[at..]);
        valueOffset = at + 4;
        at = valueOffset + valueLength;
    }

    /// <summary>Decodes a batch entry read from the journal; throws <see cref="FormatException"/> on malformed
    /// bytes.</summary>
    public static List<BatchCommand> Decode(ReadOnlySpan<byte> entry)
    {
        var sink = new CopyingSink(new List<BatchCommand>());
        Decode(entry, ref sink);
        return sink.Commands;
    }

    /// <summary>
    /// Decodes a batch entry into <paramref name="sink"/>, command by command (a struct, so the decoder is specialized
    /// per sink); throws <see cref="FormatException"/> on malformed bytes.
    /// </summary>
    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // replay: a store opens once per process, so no tier-0 pass
    public static void Decode<TSink>(ReadOnlySpan<byte> entry, ref TSink sink)
        where TSink : struct, ICommandSink
    {
        if (entry.Length < FirstCommand || entry[0] != Format)
        {
            throw new FormatException("Not a batch entry of a known format.");
        }

        int count = BinaryPrimitives.ReadInt32LittleEndian(entry[1..]);
        if (count < 0 || count > entry.Length)
        {
            throw new FormatException("Batch entry has an invalid command count.");
        }

        sink.EnsureCapacity(count);
        int at = FirstCommand;
        for (int i = 0; i < count; i++)
        {
            var kind = (ChangeKind)Read(entry, ref at, 1)[0];
            string collection = sink.Collection(ReadNameBytes(entry, ref at));
            ReadOnlySpan<byte> id = ReadNameBytes(entry, ref at);
            int valueStart = at;
            int valueLength = 0;
            if (kind == ChangeKind.Put)
            {
                valueLength = BinaryPrimitives.ReadInt32LittleEndian(Read(entry, ref at, 4));
                valueStart = at;
                _ = Read(entry, ref at, valueLength);
            }
            else if (kind != ChangeKind.Delete)
            {
                throw new FormatException($"Unknown command kind {(byte)kind}.");
            }

            sink.Add(kind, collection, id, entry, valueStart, valueLength);
        }

        if (at != entry.Length)
        {
            throw new FormatException("Batch entry has trailing bytes.");
        }
    }

    /// <summary>
    /// Receives decoded commands. The id comes as its UTF-8 bytes, so a sink that does not need it (recovery's counting
    /// pass) does not decode it; the collection name is decoded by the sink (recovery caches the few there are).
    /// </summary>
    internal interface ICommandSink
    {
        void EnsureCapacity(int count);

        string Collection(ReadOnlySpan<byte> utf8);

        void Add(ChangeKind kind, string collection, ReadOnlySpan<byte> id, ReadOnlySpan<byte> entry, int valueStart,
            int valueLength);
    }

    /// <summary>Commands with their values copied into arrays of their own.</summary>
    private readonly struct CopyingSink(List<BatchCommand> commands) : ICommandSink
    {
        public List<BatchCommand> Commands { get; } = commands;

        public void EnsureCapacity(int count) => Commands.EnsureCapacity(count);

        public string Collection(ReadOnlySpan<byte> utf8) => Encoding.UTF8.GetString(utf8);

        public void Add(ChangeKind kind, string collection, ReadOnlySpan<byte> id, ReadOnlySpan<byte> entry,
            int valueStart, int valueLength)
        {
            ReadOnlyMemory<byte> value = kind == ChangeKind.Put
                ? entry.Slice(valueStart, valueLength).ToArray()
                : ReadOnlyMemory<byte>.Empty;
            Commands.Add(new BatchCommand(kind, new DocumentKey(collection, Encoding.UTF8.GetString(id)), value));
        }
    }

    private static int NameBytes(string name, string what)
    {
        int bytes = Encoding.UTF8.GetByteCount(name);
        if (bytes > MaxNameBytes)
        {
            ThrowHelper.ThrowArgument(what,
                $"A document {what} is limited to {MaxNameBytes} UTF-8 bytes; got {bytes}.");
        }

        return bytes;
    }

    private static int WriteName(Span<byte> destination, string name)
    {
        int written = Encoding.UTF8.GetBytes(name, destination[2..]);
        BinaryPrimitives.WriteUInt16LittleEndian(destination, (ushort)written);
        return 2 + written;
    }

    private static ReadOnlySpan<byte> ReadNameBytes(ReadOnlySpan<byte> entry, ref int at)
    {
        int length = BinaryPrimitives.ReadUInt16LittleEndian(Read(entry, ref at, 2));
        return Read(entry, ref at, length);
    }

    private static ReadOnlySpan<byte> Read(ReadOnlySpan<byte> entry, ref int at, int length)
    {
        if (length < 0 || length > entry.Length - at)
        {
            throw new FormatException("Batch entry is truncated.");
        }

        ReadOnlySpan<byte> slice = entry.Slice(at, length);
        at += length;
        return slice;
    }
}
