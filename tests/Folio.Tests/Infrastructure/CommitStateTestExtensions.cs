using Folio.Transactions;

namespace Folio.Tests.Infrastructure;

/// <summary>Applies a batch to a committed state as the committer does: with the batch's journal entry, whose values
/// the state keeps.</summary>
internal static class CommitStateTestExtensions
{
    public static void Apply(this ICommitState state, CommitBatch batch, long sequence, long timestampTicks) =>
        state.Apply(batch, BatchEncoding.Encode(batch), sequence, timestampTicks);
}
