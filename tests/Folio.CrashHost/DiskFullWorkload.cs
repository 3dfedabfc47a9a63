using System.Globalization;
using System.Text;
using Folio.Storage;

namespace Folio.CrashHost;

/// <summary>
/// The full-disk crash workload: writers put documents of 200 to 4,000 bytes under new ids until the disk is full,
/// and keep trying while it is (a commit refused with <see cref="StoreFullException"/> prints <c>FULL id</c>); the
/// parent kills the process, frees space between runs and checks every acknowledged document (<c>ACK version id</c>).
/// The disk is a <see cref="CapacityLimitedFileSystem"/> over the store folder's parent, or, with capacity 0, the
/// real file system (a small one the tester mounted).
/// </summary>
public static class DiskFullWorkload
{
    public const string Collection = "full";

    /// <summary>Small segments and a low checkpoint threshold, so a small disk holds several of each.</summary>
    public static DocumentStoreOptions Options(long capacity, string folder)
    {
        var options = new DocumentStoreOptions
        {
            SegmentSize = 1 << 20,
            MinFillPiece = 16 * 1024,
            MaxFillPiece = 128 * 1024,
            MaxDocumentSize = 64 * 1024,
            MaxGroupBytes = 512 * 1024,
            CheckpointThreshold = 2 << 20,
            PagesPerChunk = 8,
        };
        if (capacity > 0)
        {
            options.FileSystem = new CapacityLimitedFileSystem(
                Path.GetDirectoryName(Path.GetFullPath(folder))!, capacity);
        }

        return options;
    }

    /// <summary>The document stored under <paramref name="id"/>: its size, 200 to 4,000 bytes, follows from the
    /// id.</summary>
    public static byte[] Document(string id)
    {
        int pad = 200 + (int)((uint)StableHash(id) % 3800);
        return Encoding.UTF8.GetBytes(
            string.Create(CultureInfo.InvariantCulture, $"{{\"id\":\"{id}\",\"pad\":\"{new string('x', pad)}\"}}"));
    }

    public static async Task<int> RunAsync(string folder, string tag, int writers, long capacity)
    {
        using var store = DocumentStore.Open(folder, Options(capacity, folder));
        var output = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false)) { AutoFlush = true };
        object gate = new();
        Console.Error.WriteLine($"READY {store.LastCommittedSequence}");
        var tasks = Enumerable.Range(0, writers).Select(w => Task.Run(async () =>
        {
            for (long i = 0; ; i++)
            {
                string id = string.Create(CultureInfo.InvariantCulture, $"{tag}-{w}-{i}");
                try
                {
                    long version = await store.PutAsync(Collection, id, Document(id));
                    lock (gate)
                    {
                        output.WriteLine($"ACK {version} {id}");
                    }
                }
                catch (StoreFullException)
                {
                    lock (gate)
                    {
                        output.WriteLine($"FULL {id}");
                    }

                    await Task.Delay(5);
                }
            }
        })).ToArray();
        await Task.WhenAll(tasks);
        return 0;
    }

    private static int StableHash(string text)
    {
        int hash = 17;
        foreach (char c in text)
        {
            hash = unchecked((hash * 31) + c);
        }

        return hash;
    }
}
