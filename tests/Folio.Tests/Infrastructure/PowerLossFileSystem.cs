using Folio.Storage;

namespace Folio.Tests.Infrastructure;

/// <summary>
/// A file system that can lose power. Files live on the real disk (so memory mappings and reads see every write, as
/// they see the page cache), while this class keeps, per file (inode), the image a completed fsync made durable and
/// every write since, and per folder the entries (create, rename, delete) made since the folder's last fsync.
/// <see cref="Cut"/> freezes it (every later write, sync or folder change throws, as a dead machine does nothing more)
/// and <see cref="Materialize"/> writes what a disk could hold after the cut into a new folder: the durable images, and
/// of each file's unsynced writes, chosen file by file, none, all, or a random subset of their 512-byte sectors (a
/// torn write), under a random prefix of each folder's unsynced entry changes. Reusable by any component that does
/// its I/O through <see cref="IFileSystem"/>.
/// <para>
/// Model. A sync of a file makes durable the writes issued before it began (writes that race a sync in flight may or
/// may not be covered, and are kept pending, the conservative choice); a file's data is durable independently of its
/// name; a name is durable only once its folder is synced. Folders themselves are assumed durable once created.
/// Owners: every mutation of the model takes <see cref="_lock"/>; the real files are written outside it.
/// </para>
/// </summary>
internal sealed class PowerLossFileSystem : IFileSystem
{
    public const int SectorSize = 512;

    private readonly Lock _lock = new();
    private readonly string _root;
    // full path -> inode, as the folder is now
    private readonly Dictionary<string, Inode> _live = new(StringComparer.Ordinal);
    // full path -> inode, as synced folders say
    private readonly Dictionary<string, Inode> _durable = new(StringComparer.Ordinal);
    private readonly Dictionary<string, List<EntryChange>> _unsyncedEntries = new(StringComparer.Ordinal); // by folder
    private readonly HashSet<string> _directories = new(StringComparer.Ordinal);
    private bool _cut;

    /// <summary>Takes over <paramref name="root"/>: every file already under it is durable, name and content.</summary>
    public PowerLossFileSystem(string root)
    {
        _root = Path.GetFullPath(root);
        Directory.CreateDirectory(_root);
        _directories.Add(_root);
        foreach (string directory in Directory.GetDirectories(_root, "*", SearchOption.AllDirectories))
        {
            _directories.Add(directory);
        }

        foreach (string file in Directory.GetFiles(_root, "*", SearchOption.AllDirectories))
        {
            var inode = new Inode(File.ReadAllBytes(file));
            _live[file] = inode;
            _durable[file] = inode;
        }
    }

    /// <summary>Syncs of files so far (tests check that the workload exercised them).</summary>
    public int Syncs { get; private set; }

    /// <summary>Whether the power was cut.</summary>
    public bool IsCut
    {
        get
        {
            lock (_lock)
            {
                return _cut;
            }
        }
    }

    /// <summary>Cuts the power: from now on every write, sync and folder change throws
    /// <see cref="IOException"/>.</summary>
    public void Cut()
    {
        lock (_lock)
        {
            _cut = true;
        }
    }

    /// <summary>
    /// Writes into <paramref name="destination"/> (a new folder) what the disk could hold after the cut, chosen with
    /// <paramref name="random"/>. Returns a line per file saying what was kept (for a failure's message).
    /// </summary>
    public List<string> Materialize(string destination, Random random)
    {
        var report = new List<string>();
        lock (_lock)
        {
            if (!_cut)
            {
                throw new InvalidOperationException("Cut the power first.");
            }

            // Names: the durable ones, then a random prefix of each folder's unsynced changes (a journaling file
            // system commits metadata in order).
            var names = new Dictionary<string, Inode>(_durable, StringComparer.Ordinal);
            foreach ((string folder, List<EntryChange> changes) in _unsyncedEntries)
            {
                int kept = random.Next(changes.Count + 1);
                report.Add($"{Relative(folder)}: {kept} of {changes.Count} unsynced entry changes kept");
                for (int i = 0; i < kept; i++)
                {
                    changes[i].ApplyTo(names);
                }
            }

            foreach (string directory in _directories)
            {
                Directory.CreateDirectory(Path.Combine(destination, Relative(directory)));
            }

            // Contents: each inode once, whatever names it has.
            var contents = new Dictionary<Inode, byte[]>();
            foreach ((string path, Inode inode) in names)
            {
                if (!contents.TryGetValue(inode, out byte[]? bytes))
                {
                    bytes = inode.AfterCut(random, out string what);
                    contents[inode] = bytes;
                    report.Add($"{Relative(path)}: {what}");
                }

                File.WriteAllBytes(Path.Combine(destination, Relative(path)), bytes);
            }
        }

        return report;
    }

    public IStorageFile OpenFile(string path, FileMode mode)
    {
        path = Path.GetFullPath(path);
        Inode inode;
        lock (_lock)
        {
            if (mode == FileMode.Open)
            {
                if (!_live.TryGetValue(path, out inode!))
                {
                    throw new FileNotFoundException($"Could not find file '{path}'.", path);
                }
            }
            else if (mode == FileMode.CreateNew)
            {
                ThrowIfCut();
                if (_live.ContainsKey(path))
                {
                    throw new IOException($"The file '{path}' already exists.");
                }

                inode = new Inode([]);
                _live[path] = inode;
                Change(path, new EntryChange(EntryKind.Create, path, null, inode));
                File.WriteAllBytes(path, []);
            }
            else
            {
                throw new NotSupportedException(
                    $"The power-loss file system supports FileMode.Open and CreateNew, not {mode}.");
            }
        }

        return new SimulatedFile(this, path, inode);
    }

    public void DeleteFile(string path)
    {
        path = Path.GetFullPath(path);
        lock (_lock)
        {
            if (!_live.Remove(path))
            {
                return; // as File.Delete: a missing file is not an error
            }

            ThrowIfCut();
            Change(path, new EntryChange(EntryKind.Delete, path, null, null));
            File.Delete(path);
        }
    }

    public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
    {
        sourcePath = Path.GetFullPath(sourcePath);
        destinationPath = Path.GetFullPath(destinationPath);
        lock (_lock)
        {
            ThrowIfCut();
            if (!_live.TryGetValue(sourcePath, out Inode? inode))
            {
                throw new FileNotFoundException($"Could not find file '{sourcePath}'.", sourcePath);
            }

            if (!overwrite && _live.ContainsKey(destinationPath))
            {
                throw new IOException($"The file '{destinationPath}' already exists.");
            }

            File.Move(sourcePath, destinationPath, overwrite);
            _live.Remove(sourcePath);
            _live[destinationPath] = inode;
            Change(sourcePath, new EntryChange(EntryKind.Rename, sourcePath, destinationPath, inode));
        }
    }

    public bool FileExists(string path)
    {
        lock (_lock)
        {
            return _live.ContainsKey(Path.GetFullPath(path));
        }
    }

    public string[] GetFiles(string directory, string searchPattern) => Directory.GetFiles(directory, searchPattern);

    public void CreateDirectory(string path)
    {
        path = Path.GetFullPath(path);
        lock (_lock)
        {
            Directory.CreateDirectory(path);
            _directories.Add(path);
        }
    }

    public void SyncDirectory(string path)
    {
        path = Path.GetFullPath(path);
        lock (_lock)
        {
            ThrowIfCut();
            if (_unsyncedEntries.Remove(path, out List<EntryChange>? changes))
            {
                foreach (EntryChange change in changes)
                {
                    change.ApplyTo(_durable);
                }
            }
        }
    }

    public IDisposable AcquireExclusiveLock(string lockFilePath)
        => PhysicalFileSystem.Instance.AcquireExclusiveLock(lockFilePath);

    private void Change(string path, EntryChange change)
    {
        string folder = Path.GetDirectoryName(path)!;
        if (!_unsyncedEntries.TryGetValue(folder, out List<EntryChange>? changes))
        {
            _unsyncedEntries[folder] = changes = [];
        }

        changes.Add(change);
    }

    private void ThrowIfCut()
    {
        if (_cut)
        {
            throw new IOException("The power is off (simulated power cut).");
        }
    }

    private string Relative(string path) => Path.GetRelativePath(_root, path);

    private enum EntryKind
    {
        Create,
        Rename,
        Delete,
    }

    private sealed record EntryChange(EntryKind Kind, string Path, string? Destination, Inode? Inode)
    {
        public void ApplyTo(Dictionary<string, Inode> names)
        {
            switch (Kind)
            {
                case EntryKind.Create:
                    names[Path] = Inode!;
                    break;
                case EntryKind.Delete:
                    names.Remove(Path);
                    break;
                default:
                    if (names.Remove(Path, out Inode? inode))
                    {
                        names[Destination!] = inode;
                    }

                    break;
            }
        }
    }

    /// <summary>One file's durable image and its writes since (under the file system's lock).</summary>
    private sealed class Inode(byte[] durable)
    {
        private byte[] _durable = durable;
        private readonly List<(long Id, long Offset, byte[] Bytes)> _pending = [];
        private long _lastWrite;

        /// <summary>The id of the newest write so far (a sync covers the writes up to the id it saw when it
        /// began).</summary>
        public long LastWrite => _lastWrite;

        public void Write(long offset, ReadOnlySpan<byte> bytes)
            => _pending.Add((++_lastWrite, offset, bytes.ToArray()));

        /// <summary>Makes the pending writes up to id <paramref name="upTo"/> durable, in the order they were
        /// issued.</summary>
        public void Sync(long upTo)
        {
            int count = 0;
            while (count < _pending.Count && _pending[count].Id <= upTo)
            {
                (_, long offset, byte[] bytes) = _pending[count];
                _durable = Apply(_durable, offset, bytes, 0, bytes.Length);
                count++;
            }

            _pending.RemoveRange(0, count);
        }

        /// <summary>What the disk holds after a cut: the durable image plus none, all or a torn subset of the
        /// rest.</summary>
        public byte[] AfterCut(Random random, out string what)
        {
            byte[] image = (byte[])_durable.Clone();
            if (_pending.Count == 0)
            {
                what = $"{image.Length} bytes, nothing unsynced";
                return image;
            }

            int mode = random.Next(3);
            long sectorsKept = 0;
            long sectors = 0;
            foreach ((_, long offset, byte[] bytes) in _pending)
            {
                if (mode == 1)
                {
                    image = Apply(image, offset, bytes, 0, bytes.Length);
                    continue;
                }

                if (mode == 2)
                {
                    // Torn: each 512-byte sector the write touches reaches the disk or not.
                    long first = offset / SectorSize;
                    long last = (offset + bytes.Length - 1) / SectorSize;
                    for (long sector = first; sector <= last; sector++)
                    {
                        sectors++;
                        if (random.Next(2) == 0)
                        {
                            continue;
                        }

                        sectorsKept++;
                        long from = Math.Max(offset, sector * SectorSize);
                        long to = Math.Min(offset + bytes.Length, (sector + 1) * SectorSize);
                        image = Apply(image, from, bytes, (int)(from - offset), (int)(to - from));
                    }
                }
            }

            what = mode switch
            {
                0 => $"{_pending.Count} unsynced writes dropped",
                1 => $"{_pending.Count} unsynced writes kept",
                _ => $"{_pending.Count} unsynced writes torn: {sectorsKept} of {sectors} sectors kept",
            };
            return image;
        }

        private static byte[] Apply(byte[] image, long offset, byte[] source, int start, int length)
        {
            if (offset + length > image.Length)
            {
                Array.Resize(ref image, (int)(offset + length));
            }

            Array.Copy(source, start, image, offset, length);
            return image;
        }
    }

    /// <summary>A handle: real reads and mappings, modelled writes and syncs.</summary>
    private sealed class SimulatedFile(PowerLossFileSystem owner, string path, Inode inode) : IStorageFile
    {
        private readonly PhysicalStorageFile _real = new(path, FileMode.Open);

        public string Path { get; } = path;

        public long Length => _real.Length;

        public int Read(Span<byte> destination, long offset) => _real.Read(destination, offset);

        public void Write(ReadOnlySpan<byte> source, long offset)
        {
            lock (owner._lock)
            {
                owner.ThrowIfCut();
                inode.Write(offset, source);
                _real.Write(source, offset);
            }
        }

        public void Sync()
        {
            long covered;
            lock (owner._lock)
            {
                owner.ThrowIfCut();
                covered = inode.LastWrite;
            }

            // The flush takes a while: writes issued meanwhile stay pending (see the model).
            Thread.Yield();
            lock (owner._lock)
            {
                owner.ThrowIfCut();
                inode.Sync(covered);
                owner.Syncs++;
            }
        }

        /// <summary>A longer length is modelled as a write of zeros from the file's end (what a hole reads as), a
        /// shorter one is not supported: nothing here cuts a file that is modelled.</summary>
        public void SetLength(long length)
        {
            lock (owner._lock)
            {
                owner.ThrowIfCut();
                long current = _real.Length;
                if (length < current)
                {
                    throw new NotSupportedException("The power-loss file system does not model cutting a file.");
                }

                if (length > current)
                {
                    inode.Write(current, new byte[length - current]);
                    _real.SetLength(length);
                }
            }
        }

        public StorageMapping MapReadOnly(long length) => _real.MapReadOnly(length);

        public void Dispose() => _real.Dispose();
    }
}
