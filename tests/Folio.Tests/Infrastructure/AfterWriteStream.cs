namespace Folio.Tests.Infrastructure;

/// <summary>A write-only destination that writes into <c>inner</c> and then runs <c>afterWrite</c> with the bytes
/// written, before the write completes: a slow disk or network, or the caller's code running inside a backup's
/// write.</summary>
internal sealed class AfterWriteStream(Stream inner, Func<int, CancellationToken, Task> afterWrite) : Stream
{
    public override bool CanRead => false;

    public override bool CanSeek => false;

    public override bool CanWrite => true;

    public override long Length => inner.Length;

    public override long Position
    {
        get => inner.Position;
        set => throw new NotSupportedException();
    }

    public override void Flush() => inner.Flush();

    public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException();

    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

    public override void SetLength(long value) => throw new NotSupportedException();

    public override void Write(byte[] buffer, int offset, int count) =>
        WriteAsync(buffer.AsMemory(offset, count)).AsTask().GetAwaiter().GetResult();

    public override async ValueTask WriteAsync(ReadOnlyMemory<byte> buffer,
        CancellationToken cancellationToken = default)
    {
        await inner.WriteAsync(buffer, cancellationToken);
        await afterWrite(buffer.Length, cancellationToken);
    }
}
