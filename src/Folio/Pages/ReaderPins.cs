using Folio.Storage;

namespace Folio.Pages;

/// <summary>
/// The writer's side of <see cref="ReaderPin"/>: the chunks other processes are reading, which the page store neither
/// frees nor reuses while their pins live.
/// <para>
/// Protocol. The page store's checkpoint reads the pins (<see cref="ReadLive"/>) before it frees any chunk, under
/// its checkpoint lock, and the open reads them before it marks free space. A pin is live while its reader holds it
/// open: the writer's probe, an exclusive lock (<see cref="IFileSystem.AcquireExclusiveLock"/>), fails against the
/// reader's shared one; a pin the probe can lock belongs to a reader that died and is deleted. Why a reader is safe
/// once its pin is visible and the header it pinned is still the newest after that: the writer marks a chunk dead
/// only when it publishes a checkpoint that no longer reaches it, and frees it at a later checkpoint's
/// <see cref="ReadLive"/>; both come after that checkpoint's header write, which comes after the reader's second
/// header read (which did not see it), which comes after the pin's rename. So the listing that could free a chunk of
/// the pinned checkpoint sees the pin. A writer that opens the store later sees it at its open, and keeps the pinned
/// chunks out of the free space although its newest checkpoint no longer lists them.
/// </para>
/// </summary>
internal static class ReaderPins
{
    /// <summary>A <c>.tmp</c> pin older than this is the leftover of a reader that died before renaming it.</summary>
    private static readonly TimeSpan s_abandoned = TimeSpan.FromMinutes(10);

    /// <summary>The pins' folder of the data file at <paramref name="dataFilePath"/>.</summary>
    public static string FolderOf(string dataFilePath) =>
        Path.Combine(Path.GetDirectoryName(Path.GetFullPath(dataFilePath))!, ReaderPin.FolderName);

    /// <summary>The chunks the live pins of <paramref name="folder"/> name (by id: offset and extent), deleting the
    /// pins of readers that died. Empty when there is no such folder.</summary>
    public static Dictionary<uint, (long Offset, long Extent)> ReadLive(IFileSystem fileSystem, string folder)
    {
        var pinned = new Dictionary<uint, (long Offset, long Extent)>();
        List<string>? pins = LivePins(fileSystem, folder, ReaderPin.Extension);
        if (pins is null)
        {
            return pinned; // no reader ever pinned this store: the usual case, without an exception
        }

        foreach (string pin in pins)
        {
            byte[]? bytes = TryReadAll(fileSystem, pin);
            if (bytes is null
                || !ReaderPin.TryDecode(bytes, out _, out List<(uint Id, long Offset, long Extent)> chunks))
            {
                continue; // gone meanwhile; a live pin is always whole (renamed once written)
            }

            foreach ((uint id, long offset, long extent) in chunks)
            {
                pinned[id] = (offset, extent);
            }
        }

        DeleteAbandoned(fileSystem, folder);
        return pinned;
    }

    /// <summary>The pins of <paramref name="folder"/> with <paramref name="extension"/> whose readers hold them,
    /// deleting those of readers that died unless <paramref name="deleteDead"/> is false (a description that writes
    /// nothing); null when there is no such folder.</summary>
    internal static List<string>? LivePins(IFileSystem fileSystem, string folder, string extension,
        bool deleteDead = true)
    {
        if (!fileSystem.DirectoryExists(folder))
        {
            return null;
        }

        string[] pins;
        try
        {
            pins = fileSystem.GetFiles(folder, "*" + extension);
        }
        catch (DirectoryNotFoundException)
        {
            return null;
        }

        var live = new List<string>(pins.Length);
        foreach (string pin in pins)
        {
            if (IsHeld(fileSystem, pin))
            {
                live.Add(pin);
            }
            else if (deleteDead)
            {
                TryDelete(fileSystem, pin);
            }
        }

        return live;
    }

    /// <summary>Whether a reader holds the pin: the writer's exclusive lock fails against the reader's shared
    /// one.</summary>
    private static bool IsHeld(IFileSystem fileSystem, string pin)
    {
        try
        {
            // Unlocked before the delete: Windows refuses to delete a file open without FileShare.Delete, and no one
            // else ever opens this name for writing.
            fileSystem.AcquireExclusiveLock(pin).Dispose();
            return false;
        }
        catch (IOException)
        {
            return true;
        }
        catch (UnauthorizedAccessException)
        {
            return true; // cannot tell: keep the reader's chunks
        }
    }

    internal static byte[]? TryReadAll(IFileSystem fileSystem, string pin)
    {
        try
        {
            using IStorageFile file = fileSystem.OpenFileForReading(pin);
            byte[] bytes = new byte[file.Length];
            int read = 0;
            while (read < bytes.Length)
            {
                int n = file.Read(bytes.AsSpan(read), read);
                if (n == 0)
                {
                    return null;
                }

                read += n;
            }

            return bytes;
        }
        catch (Exception e) when (e is FileNotFoundException or DirectoryNotFoundException)
        {
            return null;
        }
    }

    private static void DeleteAbandoned(IFileSystem fileSystem, string folder)
    {
        foreach (string temporary in fileSystem.GetFiles(folder, "*.tmp"))
        {
            if (DateTime.UtcNow - File.GetLastWriteTimeUtc(temporary) > s_abandoned
                && !IsHeld(fileSystem, temporary))
            {
                TryDelete(fileSystem, temporary);
            }
        }
    }

    private static void TryDelete(IFileSystem fileSystem, string path)
    {
        try
        {
            fileSystem.DeleteFile(path);
        }
        catch (IOException)
        {
            // The next checkpoint tries again.
        }
        catch (UnauthorizedAccessException)
        {
        }
    }
}
