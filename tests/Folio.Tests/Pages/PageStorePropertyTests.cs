using FsCheck;
using FsCheck.Xunit;
using Folio.Documents;
using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// Random programs of puts (small, large and overflow values, single and in bulk), deletes, checkpoints (parallel or
/// not), reopens and dropped caches against a sorted-dictionary model: after every checkpoint and reopen the store
/// holds exactly the model's durable state, by point reads, scans both ways and bounded ranges, also when every page
/// is read back from disk.
/// </summary>
public sealed class PageStorePropertyTests
{
    [Property(MaxTest = 60, Arbitrary = [typeof(PageStorePropertyTests)])]
    public void The_page_store_agrees_with_a_sorted_dictionary(int[] program) => Run(program, sliced: false);

    /// <summary>
    /// The same with every checkpoint written in slices (<see cref="CheckpointSlicer"/>, <see cref="CheckpointPass"/>),
    /// some passes cut short after a slice as a failure would leave them: after each slice, and after a reopen of a
    /// cut pass, the trees hold the old durable state with the pass's changes applied to exactly the ids its marks say
    /// are ahead; the next checkpoint, written whole, settles them.
    /// </summary>
    [Property(MaxTest = 40, Arbitrary = [typeof(PageStorePropertyTests)])]
    public void The_page_store_agrees_with_a_sorted_dictionary_when_checkpoints_are_written_in_slices(int[] program) =>
        Run(program, sliced: true);

    /// <summary>Runs <paramref name="program"/>: op kinds 0-7 write, 8-10 checkpoint (13 too, cutting its pass short,
    /// when <paramref name="sliced"/>), 11 reopens, 12 drops the cached pages; checks the store against the model after
    /// each checkpoint, reopen and drop.</summary>
    private static void Run(int[] program, bool sliced)
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        var store = PageStore.Open(PhysicalFileSystem.Instance, path);
        var random = new Random(program.Length);
        Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>>? partial = null;
        long partialPass = 0;
        try
        {
            foreach (int op in program)
            {
                (int kind, int argument, string collection) = PageStoreModel.Decode(op, kindBits: 4);
                switch (kind)
                {
                    case <= 7:
                        int step = kind switch { <= 3 => 0, 4 => 1, 5 or 6 => 2, _ => 3 };
                        model.WriteStep(step, collection, Id, argument, Length(argument));
                        break;
                    case 13 when !sliced:
                        break;
                    case 8 or 9 or 10 or 13
                        when !sliced || partial is not null || model.Sequence == store.Current.Sequence:
                        // After a cut pass the next checkpoint is whole, as the store writes it.
                        store.Checkpoint(model.Sequence, model.Changes(), parallel: (op & 1) == 0);
                        model.Checkpointed();
                        partial = null;
                        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
                        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
                        Assert.False(store.Current.IsPartial);
                        break;
                    case 8 or 9 or 10 or 13:
                        partialPass = model.Sequence;
                        partial = WriteSlices(store, model, random, cut: kind == 13, argument);
                        break;
                    case 11:
                        store.Dispose();
                        store = PageStore.Open(PhysicalFileSystem.Instance, path);
                        PageStoreModel.AssertHolds(partial ?? model.Durable, store.Current, store.Reader, random);
                        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
                        Assert.Equal(partial is null ? 0 : partialPass, store.Current.PassSequence);
                        if (partial is null)
                        {
                            model.Pending.Clear();
                        }

                        break;
                    case 12:
                        PageStoreModel.DropCachedPages(store.Current);
                        PageStoreModel.AssertHolds(partial ?? model.Durable, store.Current, store.Reader, random);
                        break;
                    default:
                        break;
                }
            }

            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            PageStoreModel.DropCachedPages(store.Current);
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
            PageStoreModel.AssertLiveCountsMatchTheTrees(store);
        }
        finally
        {
            store.Dispose();
        }
    }

    /// <summary>Writes the model's pending changes as a pass of slices, checking the trees after each; with
    /// <paramref name="cut"/>, stops after a slice before the last and returns the state the trees then hold (the
    /// model stays at its durable state, its changes pending), else returns null with the model checkpointed.</summary>
    private static Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>>? WriteSlices(
        PageStore store, PageStoreModel model, Random random, bool cut, int argument)
    {
        List<CollectionChanges> changes = model.Changes();
        long total = changes.Sum(c => c.Changes.Count * 4096L);
        List<CheckpointSlicer.Slice>? slices = CheckpointSlicer.Cut(changes, c => c.Changes.Count * 4096L,
            Math.Max(1, total / (2 + (argument % 4))));
        if (slices is null)
        {
            store.Checkpoint(model.Sequence, changes);
            model.Checkpointed();
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
            return null;
        }

        long durable = store.Current.Sequence;
        int stopAfter = cut ? argument % (slices.Count - 1) : slices.Count - 1;
        Dictionary<string, SortedDictionary<string, (long Sequence, byte[] Bytes)>> expected = model.CopyDurable();
        for (int i = 0; i < slices.Count - 1; i++)
        {
            CheckpointSlicer.Slice slice = slices[i];
            var written = slice.Changes.Select(part => (part.Name,
                Ids: part.Changes.Select(c => c.Id).ToHashSet(StringComparer.Ordinal))).ToList();
            store.Checkpoint(durable, slice.Changes, pass: new CheckpointPass(model.Sequence, slice.Ahead));
            foreach ((string name, HashSet<string> ids) in written)
            {
                PageStoreModel.Apply(expected, name, model.Pending[name].Where(change => ids.Contains(change.Key)));
            }

            Assert.True(store.Current.IsPartial);
            Assert.Equal(model.Sequence, store.Current.PassSequence);
            Assert.Equal(durable, store.Current.Sequence);
            foreach ((string name, string? before) in slice.Ahead)
            {
                if (store.Current.Collections.TryGetValue(name, out CollectionTree? tree))
                {
                    Assert.Equal(model.Sequence, tree.AheadSequence);
                    Assert.Equal(before, tree.AheadBefore);
                }
            }

            PageStoreModel.AssertHolds(expected, store.Current, store.Reader, random);
            if (i == stopAfter)
            {
                return expected;
            }
        }

        store.Checkpoint(model.Sequence, slices[^1].Changes);
        model.Checkpointed();
        Assert.False(store.Current.IsPartial);
        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
        return null;
    }

    public static Arbitrary<int[]> Programs() => PageStoreModel.Programs(maxLength: 120);

    private static string Id(int n) => $"doc/{n % 700:D5}";

    private static int Length(int argument) => (argument % 11) switch
    {
        0 => 0,
        1 => 2048,
        2 => 2049,
        3 => 9000 + (argument % 50_000),
        _ => 20 + (argument % 400),
    };
}
