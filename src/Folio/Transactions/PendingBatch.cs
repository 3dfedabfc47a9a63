using System.Buffers;

namespace Folio.Transactions;

/// <summary>
/// A submitted batch waiting for its group. <see cref="_state"/> moves once, by CAS, from Waiting to either Taken
/// (the committer put it in a group; it will complete with the group's outcome, whatever the caller's token does)
/// or Cancelled (the caller's token fired first; the committer skips it).
/// </summary>
internal sealed class PendingBatch : TaskCompletionSource<CommitResult>
{
    private const int Waiting = 0;
    private const int Taken = 1;
    private const int Cancelled = 2;

    private int _state;
    private byte[]? _encoded;

    public PendingBatch(CommitBatch batch, byte[] encoded, int length, bool durable)
        : base(TaskCreationOptions.RunContinuationsAsynchronously)
    {
        Batch = batch;
        _encoded = encoded;
        Length = length;
        Durable = durable;
        CommandCount = batch.Commands.Count;
    }

    public CommitBatch Batch { get; }

    public int Length { get; }

    public int CommandCount { get; }

    public bool Durable { get; }

    public CancellationTokenRegistration Registration { get; set; }

    public ReadOnlyMemory<byte> Encoded => _encoded.AsMemory(0, Length);

    /// <summary>The committer takes the batch into a group unless it was cancelled.</summary>
    public bool TryTake() => Interlocked.CompareExchange(ref _state, Taken, Waiting) == Waiting;

    /// <summary>The caller's token fired: cancel unless already taken.</summary>
    public bool TryCancel() => Interlocked.CompareExchange(ref _state, Cancelled, Waiting) == Waiting;

    /// <summary>Returns the encoded bytes to the pool. Called once, when the batch is done with.</summary>
    public void ReturnBuffer()
    {
        byte[]? encoded = Interlocked.Exchange(ref _encoded, null);
        if (encoded is not null)
        {
            ArrayPool<byte>.Shared.Return(encoded);
        }
    }
}
