using Folio.Pages;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Pages;

/// <summary>
/// Power cuts at every write and fsync of a run of checkpoints, each materialized several ways (unsynced writes lost,
/// kept or torn by sector): the data file always opens to a checkpoint that was durable, the last one that returned
/// or the one in flight if its header landed, and holds exactly its state.
/// </summary>
public sealed class PageStorePowerLossTests
{
    /// <summary>Two frames: the trees are many times larger than the cache, so every check reads through
    /// evictions.</summary>
    private const long TinyCache = 2 * PageCache.FrameSize;

    [Fact]
    public void A_power_cut_at_any_write_or_fsync_of_a_checkpoint_opens_to_a_durable_checkpoint()
    {
        const int Checkpoints = 4;
        int operations = 0;
        for (int cutAt = 1; ; cutAt++)
        {
            using var dir = new TempDirectory();
            string live = Path.Combine(dir.Path, "live");
            var powerLoss = new PowerLossFileSystem(live);
            var fileSystem = new CuttingFileSystem(powerLoss, cutAt);
            var model = new PageStoreModel();
            var states = new List<Dictionary<string, SortedDictionary<string, (long, byte[])>>> { model.CopyDurable() };
            int completed = 0;
            try
            {
                using var store = PageStore.Open(fileSystem, Path.Combine(live, "data.folio"), cacheBytes: TinyCache);
                for (int round = 0; round < Checkpoints; round++)
                {
                    PageStoreTests.Fill(model, collections: 2, documents: 400, round);
                    List<CollectionChanges> changes = model.Changes();
                    model.Checkpointed();
                    states.Add(model.CopyDurable());
                    store.Checkpoint(model.Sequence, changes);
                    completed++;
                }
            }
            catch (IOException) when (powerLoss.IsCut)
            {
            }

            if (!powerLoss.IsCut)
            {
                operations = fileSystem.Operations;
                Assert.True(operations >= 4 * Checkpoints, $"{operations} operations");
                return;
            }

            for (int trial = 0; trial < 4; trial++)
            {
                var random = new Random((cutAt * 7) + trial);
                string after = Path.Combine(dir.Path, $"after-{trial}");
                List<string> report = powerLoss.Materialize(after, random);
                using var reopened = PageStore.Open(PhysicalFileSystem.Instance, Path.Combine(after, "data.folio"),
                    cacheBytes: TinyCache);
                long generation = reopened.Current.Generation;
                Assert.True(generation == completed || generation == completed + 1,
                    $"cut at {cutAt}: generation {generation} after {completed} checkpoints; "
                    + string.Join("; ", report));
                PageStoreModel.AssertHolds(states[(int)generation], reopened.Current, reopened.Reader, random);
                PageStoreModel.DropCachedPages(reopened.Current);
                PageStoreModel.AssertHolds(states[(int)generation], reopened.Current, reopened.Reader, random);
            }

            Assert.True(cutAt < 200, "the run ends");
        }
    }

    /// <summary>Cuts the power of a <see cref="PowerLossFileSystem"/> just before its n-th file write or
    /// sync.</summary>
    private sealed class CuttingFileSystem(PowerLossFileSystem inner, int cutAt) : IFileSystem
    {
        public int Operations { get; private set; }

        public IStorageFile OpenFile(string path, FileMode mode) => new File(this, inner.OpenFile(path, mode));

        public void DeleteFile(string path) => inner.DeleteFile(path);

        public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
            => inner.MoveFile(sourcePath, destinationPath, overwrite);

        public bool FileExists(string path) => inner.FileExists(path);

        public string[] GetFiles(string directory, string searchPattern) => inner.GetFiles(directory, searchPattern);

        public void CreateDirectory(string path) => inner.CreateDirectory(path);

        public void SyncDirectory(string path)
        {
            Tick();
            inner.SyncDirectory(path);
        }

        public IDisposable AcquireExclusiveLock(string lockFilePath) => inner.AcquireExclusiveLock(lockFilePath);

        private void Tick()
        {
            if (++Operations == cutAt)
            {
                inner.Cut();
            }
        }

        private sealed class File(CuttingFileSystem owner, IStorageFile file) : IStorageFile
        {
            public string Path => file.Path;

            public long Length => file.Length;

            public int Read(Span<byte> destination, long offset) => file.Read(destination, offset);

            public void Write(ReadOnlySpan<byte> source, long offset)
            {
                owner.Tick();
                file.Write(source, offset);
            }

            public void Sync()
            {
                owner.Tick();
                file.Sync();
            }

            public void SetLength(long length)
            {
                owner.Tick();
                file.SetLength(length);
            }

            public StorageMapping MapReadOnly(long length) => file.MapReadOnly(length);

            public void Dispose() => file.Dispose();
        }
    }
}
