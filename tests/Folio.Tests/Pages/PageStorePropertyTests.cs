using FsCheck;
using FsCheck.Xunit;
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
    public void The_page_store_agrees_with_a_sorted_dictionary(int[] program)
    {
        using var dir = new TempDirectory();
        string path = Path.Combine(dir.Path, "data.folio");
        var model = new PageStoreModel();
        var store = PageStore.Open(PhysicalFileSystem.Instance, path);
        var random = new Random(program.Length);
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
                    case 8 or 9 or 10:
                        store.Checkpoint(model.Sequence, model.Changes(), parallel: (op & 1) == 0);
                        model.Checkpointed();
                        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
                        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
                        break;
                    case 11:
                        store.Dispose();
                        model.Pending.Clear();
                        store = PageStore.Open(PhysicalFileSystem.Instance, path);
                        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
                        PageStoreModel.AssertLiveCountsMatchTheTrees(store);
                        break;
                    case 12:
                        PageStoreModel.DropCachedPages(store.Current);
                        PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
                        break;
                    default:
                        break;
                }
            }

            store.Checkpoint(model.Sequence, model.Changes());
            model.Checkpointed();
            PageStoreModel.DropCachedPages(store.Current);
            PageStoreModel.AssertHolds(model.Durable, store.Current, store.Reader, random);
        }
        finally
        {
            store.Dispose();
        }
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
