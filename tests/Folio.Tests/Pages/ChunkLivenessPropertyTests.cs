using FsCheck;
using FsCheck.Xunit;
using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// The page store's space accounting against the trees themselves: random programs of puts (overflow values too),
/// deletes, checkpoints, compactions (sparse chunks, rate-limited, within free space, tail moves), pinned checkpoints
/// and reopens. After every checkpoint each live chunk's live-page count equals the pages the current roots (the
/// catalog's included) reach in it, no dead chunk is reached, and every pinned checkpoint still reads its own state
/// from disk however many chunks were freed and reused since: a count too low would free a chunk that holds live
/// pages, one too high would leak it.
/// </summary>
public sealed class ChunkLivenessPropertyTests
{
    private const int MaxPinned = 3;

    [Property(MaxTest = 100, Arbitrary = [typeof(ChunkLivenessPropertyTests)])]
    public void Live_page_counts_match_what_the_roots_reach_through_compactions_and_pins(int[] program)
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        var pinned = new List<Pinned>();
        long durable = 0;
        PageStore store = Open(path);
        try
        {
            foreach (int op in program)
            {
                (int kind, int argument, string collection) = PageStoreModel.Decode(op, kindBits: 5);
                switch (kind)
                {
                    case <= 10:
                        int step = kind switch { <= 5 => 0, 6 or 7 => 1, 8 or 9 => 2, _ => 3 };
                        model.WriteStep(step, collection, Id, argument, Length(argument));
                        break;
                    case <= 15:
                        // 14 and 15: a checkpoint of commits that also compacts (background compaction when one is
                        // due).
                        store.Checkpoint(model.Sequence, model.Changes(), parallel: (op & 1) == 0,
                            compaction: kind >= 14 ? Compaction(argument) : null);
                        model.Checkpointed();
                        durable = model.Sequence;
                        AssertAccounting(store, model);
                        break;
                    case 16 or 17:
                        // A compaction pass of no commits: the pending changes stay pending.
                        store.Checkpoint(durable, [], compaction: Compaction(argument));
                        AssertAccounting(store, model);
                        break;
                    case 18:
                        store.Checkpoint(durable, [], compaction: new CompactionRequest(0, 0, MoveTail: true));
                        AssertAccounting(store, model);
                        break;
                    case 19 or 20 when pinned.Count < MaxPinned:
                        pinned.Add(new Pinned(store.Pin(), model.CopyDurable()));
                        break;
                    case 21 or 22 when pinned.Count > 0:
                        AssertPinnedHold(store, pinned[0]);
                        PageStore.Unpin(pinned[0].Checkpoint);
                        pinned.RemoveAt(0);
                        break;
                    case 23:
                        UnpinAll(store, pinned);
                        store.Dispose();
                        model.Pending.Clear();
                        store = Open(path);
                        AssertAccounting(store, model);
                        break;
                    default:
                        break;
                }
            }

            store.Checkpoint(model.Sequence, model.Changes(), compaction: new CompactionRequest(0.99, long.MaxValue));
            model.Checkpointed();
            AssertAccounting(store, model);
            UnpinAll(store, pinned);
            store.Checkpoint(model.Sequence, []); // frees what the pins held
            AssertAccounting(store, model);
        }
        finally
        {
            foreach (Pinned pin in pinned)
            {
                PageStore.Unpin(pin.Checkpoint);
            }

            store.Dispose();
        }
    }

    public static Arbitrary<int[]> Programs() => PageStoreModel.Programs(maxLength: 150);

    /// <summary>A small cache and chunks of at most 8 pages, so checkpoints spread over many chunks and pinned
    /// checkpoints' pages are read back from disk.</summary>
    private static PageStore Open(string path)
    {
        PageStore store = PageStore.Open(PhysicalFileSystem.Instance, path, cacheBytes: 256 * 1024);
        store.PagesPerChunk = 8;
        return store;
    }

    private static CompactionRequest Compaction(int argument) => new(
        FillBelow: (argument % 3) switch { 0 => 0.3, 1 => 0.7, _ => 0.99 },
        MaxBytes: (argument / 3 % 2) == 0 ? 0 : long.MaxValue,
        WithinFreeSpace: (argument / 6 % 2) == 0);

    private static void AssertPinnedHold(PageStore store, Pinned pin)
    {
        PageStoreModel.DropCachedPages(pin.Checkpoint);
        PageStoreModel.AssertHolds(pin.State, pin.Checkpoint, store.Reader);
    }

    private static void UnpinAll(PageStore store, List<Pinned> pinned)
    {
        foreach (Pinned pin in pinned)
        {
            AssertPinnedHold(store, pin);
            PageStore.Unpin(pin.Checkpoint);
        }

        pinned.Clear();
    }

    /// <summary>The live counts are exact, dead chunks unreached, and the current checkpoint holds the model.</summary>
    private static void AssertAccounting(PageStore store, PageStoreModel model)
    {
        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader);
    }

    private static string Id(int n) => $"doc/{n % 900:D5}";

    /// <summary>A pinned checkpoint and the model's durable state when it was pinned.</summary>
    private sealed record Pinned(PageCheckpoint Checkpoint,
        Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> State);

    private static int Length(int argument) => (argument % 9) switch
    {
        0 => 3000,
        1 => 9000 + (argument % 30_000),
        _ => 20 + (argument % 300),
    };
}
