using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// Cuts a checkpoint's changes into slices by id range (<see cref="CheckpointPass"/>), so that each slice rewrites at
/// most about <c>sliceBytes</c> of pages. Why: a checkpoint writes every leaf a change falls in, and overwrites spread
/// over a collection touch nearly every leaf, so a checkpoint written whole rewrites the whole tree while the tree it
/// replaces must stay until its header is durable: the data file then holds two trees. In slices, each freeing the
/// pages of the one before, it holds the old trees and one slice.
/// <para>
/// What a collection's changes would supersede is the caller's estimate (the leaves they fall in). The boundaries are
/// quantiles of a sample of the changed ids, so each slice of a collection takes about as many changes (and, for
/// changes spread evenly, as much of its tree). Collections small enough share a slice. Pure: the checkpoint's thread
/// calls it with changes it owns.
/// </para>
/// </summary>
internal static class CheckpointSlicer
{
    /// <summary>Ids sampled per collection to place its boundaries.</summary>
    internal const int SampleSize = 4096;

    /// <summary>One slice: its changes (objects of its own, never the caller's, which may let go of theirs once cut),
    /// and per collection the first id it leaves to later slices (null: none left), for every collection it or an
    /// earlier slice finished or cut (the pass's ahead marks once it is durable).</summary>
    internal sealed record Slice(List<CollectionChanges> Changes, Dictionary<string, string?> Ahead);

    /// <summary>
    /// The slices of <paramref name="changes"/>, in the order they are to be written (collections in ordinal order,
    /// each by ascending ids); null when one checkpoint is small enough (at most <paramref name="sliceBytes"/>).
    /// </summary>
    /// <param name="changes">Each collection's changes, ids in any order, each at most once.</param>
    /// <param name="supersededBytes">The bytes of the current trees' pages a collection's changes would supersede
    /// (<see cref="PageStore.EstimateSupersededBytes"/>).</param>
    /// <param name="sliceBytes">The most bytes of pages a slice should supersede.</param>
    public static List<Slice>? Cut(IReadOnlyList<CollectionChanges> changes,
        Func<CollectionChanges, long> supersededBytes, long sliceBytes)
    {
        if (sliceBytes <= 0 || changes.Count == 0)
        {
            return null;
        }

        var ordered = new List<(CollectionChanges Changes, long Bytes)>(changes.Count);
        long total = 0;
        foreach (CollectionChanges collection in changes)
        {
            long bytes = supersededBytes(collection);
            ordered.Add((collection, bytes));
            total += bytes;
        }

        if (total <= sliceBytes)
        {
            return null;
        }

        ordered.Sort((a, b) => string.CompareOrdinal(a.Changes.Name, b.Changes.Name));
        var slices = new List<Slice>();
        var ahead = new Dictionary<string, string?>(StringComparer.Ordinal);
        var pending = new List<CollectionChanges>();
        long pendingBytes = 0;
        foreach ((CollectionChanges collection, long bytes) in ordered)
        {
            int parts = (int)Math.Min(SampleSize, (bytes + sliceBytes - 1) / sliceBytes);
            string[] boundaries = parts > 1 ? Boundaries(collection.Changes, parts) : [];
            if (boundaries.Length == 0)
            {
                // Whole, sharing a slice with its neighbours while they fit.
                if (pendingBytes + bytes > sliceBytes)
                {
                    FlushPending();
                }

                // A slice's own object over the same list: the caller lets go of the changes it collected once they
                // are cut (CollectionChanges.Applied), and the slice must still hold them when it is written.
                pending.Add(new CollectionChanges(collection.Name, collection.Changes, collection.Hashes,
                    releaseWhenApplied: true));
                pendingBytes += bytes;
                ahead[collection.Name] = null;
                continue;
            }

            FlushPending();
            List<CollectionChanges> pieces = Split(collection, boundaries);
            for (int i = 0; i < pieces.Count; i++)
            {
                ahead[collection.Name] = i < boundaries.Length ? boundaries[i] : null;
                slices.Add(new Slice([pieces[i]], new Dictionary<string, string?>(ahead)));
            }
        }

        FlushPending();
        return slices.Count > 1 ? slices : null;

        // The collections gathered whole so far become a slice of their own.
        void FlushPending()
        {
            if (pending.Count > 0)
            {
                slices.Add(new Slice(pending, new Dictionary<string, string?>(ahead)));
                pending = [];
                pendingBytes = 0;
            }
        }
    }

    /// <summary>Up to <paramref name="parts"/> - 1 distinct ids cutting <paramref name="changes"/> into parts of
    /// about equal counts, ascending; ids longer than <see cref="CatalogEntry.MaxAheadIdLength"/> are left out (a
    /// catalog entry names the boundary).</summary>
    private static string[] Boundaries(List<TreeChange> changes, int parts)
    {
        int step = Math.Max(1, changes.Count / SampleSize);
        var sample = new List<string>(Math.Min(changes.Count, SampleSize + 1));
        for (int i = 0; i < changes.Count; i += step)
        {
            sample.Add(changes[i].Id);
        }

        sample.Sort(string.CompareOrdinal);
        var boundaries = new List<string>(parts);
        for (int p = 1; p < parts; p++)
        {
            string boundary = sample[(int)((long)sample.Count * p / parts)];
            if (boundary.Length <= CatalogEntry.MaxAheadIdLength
                && (boundaries.Count == 0 || string.CompareOrdinal(boundaries[^1], boundary) < 0)
                && string.CompareOrdinal(sample[0], boundary) < 0)
            {
                boundaries.Add(boundary);
            }
        }

        return [.. boundaries];
    }

    /// <summary>The changes of <paramref name="collection"/> split at <paramref name="boundaries"/> (ascending):
    /// part i holds the ids from boundary i - 1 (inclusive) to boundary i (exclusive), with their hashes.</summary>
    private static List<CollectionChanges> Split(CollectionChanges collection, string[] boundaries)
    {
        List<TreeChange> changes = collection.Changes;
        List<int>? hashes = collection.Hashes;
        var parts = new List<(List<TreeChange> Changes, List<int>? Hashes)>(boundaries.Length + 1);
        int capacity = (changes.Count / (boundaries.Length + 1)) + 16;
        for (int i = 0; i <= boundaries.Length; i++)
        {
            parts.Add((new List<TreeChange>(capacity), hashes is null ? null : new List<int>(capacity)));
        }

        for (int i = 0; i < changes.Count; i++)
        {
            TreeChange change = changes[i];
            int low = 0;
            int high = boundaries.Length; // the part: the number of boundaries at or below the id
            while (low < high)
            {
                int middle = (low + high) >>> 1;
                if (change.CompareTo(boundaries[middle]) >= 0)
                {
                    low = middle + 1;
                }
                else
                {
                    high = middle;
                }
            }

            parts[low].Changes.Add(change);
            parts[low].Hashes?.Add(hashes![i]);
        }

        var result = new List<CollectionChanges>(parts.Count);
        foreach ((List<TreeChange> part, List<int>? partHashes) in parts)
        {
            result.Add(new CollectionChanges(collection.Name, part, partHashes, releaseWhenApplied: true));
        }

        return result;
    }
}
