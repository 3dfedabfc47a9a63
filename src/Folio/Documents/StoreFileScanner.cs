using System.Runtime.CompilerServices;
using Folio.Pages;

namespace Folio.Documents;

/// <summary>
/// Streams every document of a store from its files, without opening it (<see cref="DocumentStore.ScanFilesAsync"/>):
/// no lock on the store is taken and none of its files is written, so it works while another process has the store
/// open and keeps committing, however long the stream takes.
/// <para>
/// What it reads, in order: the data file's newest checkpoint at sequence C (<see cref="PageStore.OpenForReading"/>),
/// which it pins against the writer (<see cref="ReaderPin"/>: the writer then neither frees nor reuses the chunks of
/// that checkpoint until the stream ends, even across its own restarts); then every complete, durable commit the
/// journal after C holds, keeping each document's last change in memory (what the store itself keeps in memory
/// since its last checkpoint). The stream merges each collection's tree with those changes in id order: the store
/// as of the last commit read.
/// </para>
/// <para>
/// Racing the writer before the stream starts: a pin counts only if the checkpoint it names was still the newest
/// after the pin became visible (<see cref="PinnedCheckpoint"/>), and the journal after C may be purged once a newer
/// checkpoint is durable; either way the scan starts over from the new header, a few times at most, before it
/// yields anything. Once it yields, nothing it reads can be reused under it.
/// </para>
/// </summary>
internal static class StoreFileScanner
{
    /// <summary>Starts before the last failure is reported.</summary>
    private const int Attempts = 16;

    /// <summary>The documents; with <paramref name="onDamage"/>, a page of the checkpoint that fails its checks is
    /// reported to it and skipped (<see cref="BTree.RangeSkippingDamage"/>), and so is a value whose own pages do,
    /// instead of ending the stream.</summary>
    public static async IAsyncEnumerable<StoredDocument> ScanAsync(string folder, Action<DamagedRange>? onDamage,
        [EnumeratorCancellation] CancellationToken cancellationToken)
    {
        (string path, _) = StoreFileInfoReader.StoreFolders(folder); // the folder checked by ScanFilesAsync
        using Snapshot snapshot = await OpenAsync(path, onDamage is not null, cancellationToken).ConfigureAwait(false);
        foreach (DamagedRange lost in snapshot.LostCommits)
        {
            onDamage!(lost);
        }

        foreach (StoredDocument document in snapshot.Documents(onDamage))
        {
            cancellationToken.ThrowIfCancellationRequested();
            yield return document;
        }
    }

    /// <summary>
    /// Pins the newest checkpoint and reads the journal after it. Past damage when <paramref name="pastDamage"/>: each
    /// damaged range of commits is kept for <see cref="Snapshot.LostCommits"/> (kept, not reported at once, because an
    /// attempt that meets a purge starts over); a newest checkpoint that cannot be mounted (its chunk table or catalog
    /// is damaged) gives way to the one before it, and when that cannot be mounted either, to none: the journal alone,
    /// from its first commit; and a journal purged past the mounted checkpoint (or past commit 1, without one) while
    /// that checkpoint stays the newest mountable one (a newer checkpoint's header is damaged, or the newest could not
    /// be mounted) loses the commits no file holds any more, which are kept as a range too.
    /// </summary>
    private static async Task<Snapshot> OpenAsync(string path, bool pastDamage, CancellationToken cancellationToken)
    {
        for (int attempt = 1; ; attempt++)
        {
            cancellationToken.ThrowIfCancellationRequested();
            (PinnedCheckpoint checkpoint, StoreCorruptedException? newestDamage) = OpenCheckpoint(path, pastDamage);
            try
            {
                var lost = new List<DamagedRange>();
                Dictionary<string, List<DocumentChange>> changes;
                try
                {
                    changes = await ReadChangesAsync(path, checkpoint.Sequence, pastDamage ? lost : null,
                        cancellationToken).ConfigureAwait(false);
                }
                catch (JournalPositionPurgedException purged) when (pastDamage
                    && (newestDamage is not null || !StoreFileInfoReader.HeaderMoved(path, checkpoint.Pages)))
                {
                    // No newer checkpoint to start over from: the commits between this one and the journal's oldest
                    // are in no file any more.
                    long from = checkpoint.Sequence + 1;
                    long to = purged.FirstAvailableSequence - 1;
                    lost.Clear(); // the read starts over after them, and finds again any damage it found past them
                    lost.Add(new DamagedRange(null, null, null, newestDamage ?? new StoreCorruptedException(
                        Path.Combine(path, DocumentStore.DataFileName), 0,
                        $"no readable checkpoint holds commits {from} to {to}, and the journal purged them after a "
                        + "newer checkpoint, whose header is damaged")) { FromSequence = from, ToSequence = to });
                    changes = await ReadChangesAsync(path, to, lost, cancellationToken).ConfigureAwait(false);
                }

                return new Snapshot(checkpoint, changes, lost);
            }
            catch (JournalPositionPurgedException) when (attempt < Attempts)
            {
                // The journal after the checkpoint was purged after a newer one: start over from the newest.
                checkpoint.Dispose();
            }
            catch
            {
                checkpoint.Dispose();
                throw;
            }
        }
    }

    /// <summary>The newest checkpoint, pinned; past damage, when it cannot be mounted, the one before it, or when
    /// neither can be, none (<see cref="PinnedCheckpoint.Unreadable"/>: the journal is then all there is), with the
    /// damage that stopped the newest.</summary>
    private static (PinnedCheckpoint Checkpoint, StoreCorruptedException? NewestDamage) OpenCheckpoint(string path,
        bool pastDamage)
    {
        try
        {
            return (PinnedCheckpoint.Open(path), null);
        }
        catch (StoreCorruptedException damage) when (pastDamage)
        {
            PinnedCheckpoint? previous;
            try
            {
                previous = PinnedCheckpoint.OpenPrevious(path);
            }
            catch (StoreCorruptedException)
            {
                previous = null; // damaged too: the newest's damage is the one to report
            }

            // Neither readable (or the file holds no other): the journal alone, whose purged commits are then lost.
            return (previous ?? PinnedCheckpoint.Unreadable(), damage);
        }
    }

    /// <summary>Each document's last change after <paramref name="after"/>, by collection, sorted by id; with
    /// <paramref name="lost"/>, read past journal damage, each range of commits it took added there.</summary>
    private static async Task<Dictionary<string, List<DocumentChange>>> ReadChangesAsync(string path, long after,
        List<DamagedRange>? lost, CancellationToken cancellationToken)
    {
        var last = new Dictionary<(string Collection, string Id), DocumentChange>();
        IAsyncEnumerable<DocumentChange> read = lost is null
            ? DocumentChanges.ReadFilesAsync(path, after + 1, follow: false, cancellationToken)
            : DocumentChanges.ReadFilesPastDamageAsync(path, after + 1, (from, to, damage) => lost.Add(
                new DamagedRange(null, null, null, damage) { FromSequence = from, ToSequence = to }),
                cancellationToken);
        await foreach (DocumentChange change in read.ConfigureAwait(false))
        {
            last[(change.Collection, change.Id)] = change;
        }

        var byCollection = new Dictionary<string, List<DocumentChange>>(StringComparer.Ordinal);
        foreach (((string collection, _), DocumentChange change) in last)
        {
            if (!byCollection.TryGetValue(collection, out List<DocumentChange>? list))
            {
                byCollection[collection] = list = [];
            }

            list.Add(change);
        }

        foreach (List<DocumentChange> list in byCollection.Values)
        {
            list.Sort(static (a, b) => string.CompareOrdinal(a.Id, b.Id));
        }

        return byCollection;
    }

    /// <summary>The pinned checkpoint and the changes after it: the documents of one commit.</summary>
    private sealed class Snapshot(PinnedCheckpoint checkpoint, Dictionary<string, List<DocumentChange>> changes,
        List<DamagedRange> lostCommits) : IDisposable
    {
        private readonly PageStore? _pages = checkpoint.Pages;

        /// <summary>The ranges of commits after the checkpoint that journal damage took (salvage only).</summary>
        public List<DamagedRange> LostCommits => lostCommits;

        public IEnumerable<StoredDocument> Documents(Action<DamagedRange>? onDamage)
        {
            var names = new SortedSet<string>(changes.Keys, StringComparer.Ordinal);
            if (_pages is not null)
            {
                names.UnionWith(_pages.Current.Collections.Keys);
            }

            foreach (string name in names)
            {
                PageReference? root = _pages is not null && _pages.Current.Collections.TryGetValue(name,
                    out CollectionTree? tree) ? tree.Root : null;
                List<DocumentChange> changed = changes.GetValueOrDefault(name) ?? [];
                foreach (StoredDocument document in Merge(name, root, changed, onDamage))
                {
                    yield return document;
                }
            }
        }

        /// <summary>The tree's documents with the changes after it applied, in id order.</summary>
        private IEnumerable<StoredDocument> Merge(string collection, PageReference? root, List<DocumentChange> changed,
            Action<DamagedRange>? onDamage)
        {
            int next = 0;
            if (root is not null)
            {
                IPageReader reader = _pages!.Reader;
                IEnumerable<KeyValuePair<string, StoredValue>> entries = onDamage is null
                    ? BTree.Range(root, null, null, false, reader)
                    : BTree.RangeSkippingDamage(root, reader,
                        (from, to, damage) => onDamage(new DamagedRange(collection, from, to, damage)));
                foreach (KeyValuePair<string, StoredValue> entry in entries)
                {
                    int order = -1;
                    while (next < changed.Count && (order = string.CompareOrdinal(changed[next].Id, entry.Key)) < 0)
                    {
                        if (FromChange(changed[next++]) is { } added)
                        {
                            yield return added;
                        }
                    }

                    if (order == 0)
                    {
                        // Changed since the checkpoint: the change wins (a delete drops the document).
                        if (FromChange(changed[next++]) is { } updated)
                        {
                            yield return updated;
                        }

                        continue;
                    }

                    StoredValue value = entry.Value;
                    ReadOnlyMemory<byte> json;
                    try
                    {
                        json = value.Read(reader);
                    }
                    catch (StoreCorruptedException damage) when (onDamage is not null)
                    {
                        onDamage(new DamagedRange(collection, entry.Key, entry.Key + "\0", damage));
                        continue;
                    }

                    yield return new StoredDocument(collection, entry.Key, json, value.Sequence,
                        new DateTimeOffset(value.TimestampTicks, TimeSpan.Zero));
                }
            }

            while (next < changed.Count)
            {
                if (FromChange(changed[next++]) is { } added)
                {
                    yield return added;
                }
            }
        }

        private static StoredDocument? FromChange(DocumentChange change) => change.Kind == ChangeKind.Put
            ? new StoredDocument(change.Collection, change.Id, change.Json, change.Sequence, change.Timestamp)
            : null;

        public void Dispose() => checkpoint.Dispose();
    }
}
