using Folio.Journal;
using Folio.Storage;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// Segments are created as holes and zero-filled ahead of the writer: a record is written only into bytes a completed
/// sync zero-filled, a fill never writes over a record, and a journal takes on disk about what it holds.
/// </summary>
public sealed class JournalFillTests
{
    [Fact]
    public void A_new_journal_writes_a_megabyte_of_each_segment_file_not_its_full_size()
    {
        using var dir = new TempDirectory();
        var files = new FillCheckingFileSystem();
        using (var journal = WriteAheadJournal.Open(dir.Path, new JournalOptions { FileSystem = files }))
        {
            journal.Append("one entry"u8);
            journal.Sync();
            Assert.Equal(JournalOptions.DefaultSegmentSize, new FileInfo(Active(dir.Path)).Length);
        }

        // The active segment and the next one, prepared in the background: each a hole past its first piece.
        foreach (string path in Directory.GetFiles(dir.Path, "*.journal").Append(Prepared(dir.Path)))
        {
            Assert.InRange(files.WrittenExtent(path), 1, WriteAheadJournal.DefaultMinFillPiece);
        }

        Assert.Empty(files.Violations);
    }

    [Fact]
    public async Task Records_of_every_size_land_only_in_synced_zeros_and_fills_never_touch_a_record()
    {
        using var dir = new TempDirectory();
        var files = new FillCheckingFileSystem();
        JournalOptions Options() => new()
        {
            SegmentSize = 256 * 1024, MinFillPiece = 8 * 1024, MaxFillPiece = 32 * 1024, FileSystem = files,
        };

        var random = new Random(5);
        var written = new List<byte[]>();
        for (int round = 0; round < 3; round++)
        {
            using var journal = WriteAheadJournal.Open(dir.Path, Options());
            using var stop = new CancellationTokenSource();
            long seen = 0;
            // A reader tails the journal meanwhile and checks every entry it sees.
            Task reader = Task.Run(() =>
            {
                long next = 1;
                while (!stop.IsCancellationRequested || next <= journal.CommittedSequence)
                {
                    foreach ((long sequence, _, byte[] data) in journal.ReadAll(next))
                    {
                        lock (written)
                        {
                            Assert.Equal(written[(int)sequence - 1], data);
                        }

                        next = sequence + 1;
                    }

                    Volatile.Write(ref seen, next - 1);
                    Thread.Yield();
                }
            });

            for (int i = 0; i < 400; i++)
            {
                // Mostly small records, some larger than a fill piece, a few near the segment's size.
                int length = random.Next(10) switch
                {
                    < 7 => random.Next(1, 600),
                    < 9 => random.Next(8 * 1024, 48 * 1024),
                    _ => random.Next(100 * 1024, (int)journal.MaxRecordSize - 64),
                };
                byte[] entry = JournalTestExtensions.Payload(round, written.Count + 1, length);
                lock (written)
                {
                    written.Add(entry);
                }

                Assert.Equal(written.Count, journal.Append(entry));
                if (random.Next(3) == 0)
                {
                    journal.Sync();
                }
            }

            journal.Sync();
            stop.Cancel();
            await reader;
            Assert.Equal(written.Count, Volatile.Read(ref seen));
            Assert.True(journal.SegmentCount > 3);
        }

        using (var journal = WriteAheadJournal.Open(dir.Path, Options()))
        {
            var all = journal.ReadAll(1);
            Assert.Equal(written.Count, all.Count);
            for (int i = 0; i < all.Count; i++)
            {
                Assert.Equal(written[i], all[i].Data);
            }
        }

        Assert.True(files.ZeroWrites > 50, $"only {files.ZeroWrites} zero-fill writes");
        Assert.Empty(files.Violations);
    }

    private static string Active(string directory) => Directory.GetFiles(directory, "*.journal").Max()!;

    private static string Prepared(string directory) => Path.Combine(directory, "next-segment.tmp");

    /// <summary>
    /// The real file system, watching the journal's files byte by byte: a write of zeros is a fill, any other write a
    /// record (or a segment header). A record must land on zeros a completed sync made durable; a fill must not land
    /// on a record. Each breach is kept in <see cref="Violations"/>. A sync through any handle of a file makes its
    /// earlier fills durable, as an fdatasync of one descriptor flushes the whole file.
    /// </summary>
    private sealed class FillCheckingFileSystem : IFileSystem
    {
        private const byte Hole = 0;
        private const byte ZerosPending = 1;
        private const byte ZerosDurable = 2;
        private const byte Record = 3;

        private readonly PhysicalFileSystem _inner = PhysicalFileSystem.Instance;
        private readonly Lock _lock = new();
        private readonly Dictionary<string, byte[]> _states = new(StringComparer.Ordinal);
        private readonly Dictionary<string, long> _written = new(StringComparer.Ordinal);

        public List<string> Violations { get; } = [];

        public int ZeroWrites { get; private set; }

        /// <summary>The end of the furthest write to <paramref name="path"/>: past it the file is a hole.</summary>
        public long WrittenExtent(string path)
        {
            lock (_lock)
            {
                return _written.GetValueOrDefault(Path.GetFullPath(path));
            }
        }

        public IStorageFile OpenFile(string path, FileMode mode) => new CheckedFile(this, _inner.OpenFile(path, mode));

        public void DeleteFile(string path)
        {
            lock (_lock)
            {
                _inner.DeleteFile(path);
                _states.Remove(Path.GetFullPath(path));
                _written.Remove(Path.GetFullPath(path));
            }
        }

        public void MoveFile(string sourcePath, string destinationPath, bool overwrite)
        {
            lock (_lock)
            {
                _inner.MoveFile(sourcePath, destinationPath, overwrite);
                string from = Path.GetFullPath(sourcePath);
                string to = Path.GetFullPath(destinationPath);
                _states.Remove(to);
                _written.Remove(to);
                if (_states.Remove(from, out byte[]? state))
                {
                    _states[to] = state;
                }

                if (_written.Remove(from, out long written))
                {
                    _written[to] = written;
                }
            }
        }

        public bool FileExists(string path) => _inner.FileExists(path);

        public string[] GetFiles(string directory, string searchPattern) => _inner.GetFiles(directory, searchPattern);

        public void CreateDirectory(string path) => _inner.CreateDirectory(path);

        public void SyncDirectory(string path) => _inner.SyncDirectory(path);

        public IDisposable AcquireExclusiveLock(string lockFilePath) => _inner.AcquireExclusiveLock(lockFilePath);

        private static bool Watched(string path)
            => path.EndsWith(".journal", StringComparison.Ordinal) || Path.GetFileName(path) == "next-segment.tmp";

        private void OnWrite(string path, ReadOnlySpan<byte> source, long offset, IStorageFile inner)
        {
            lock (_lock)
            {
                if (Watched(path))
                {
                    if (!_states.TryGetValue(path, out byte[]? state) || state.Length < offset + source.Length)
                    {
                        // A file this test did not see lengthened (one the journal found on disk): its written
                        // bytes were checked when they were written, the rest reads as zeros a sync covered.
                        byte[] grown = new byte[Math.Max(inner.Length, offset + source.Length)];
                        state?.CopyTo(grown, 0);
                        if (state is null)
                        {
                            grown.AsSpan().Fill(ZerosDurable);
                        }

                        _states[path] = state = grown;
                    }

                    bool zeros = !source.ContainsAnyExcept((byte)0);
                    Span<byte> range = state.AsSpan((int)offset, source.Length);
                    if (zeros)
                    {
                        ZeroWrites++;
                        if (range.Contains(Record))
                        {
                            Violations.Add($"{Path.GetFileName(path)}: zeros written over a record at {offset}");
                        }

                        range.Fill(ZerosPending);
                    }
                    else
                    {
                        int notReady = range.IndexOfAnyExcept(ZerosDurable);
                        if (notReady >= 0)
                        {
                            Violations.Add($"{Path.GetFileName(path)}: a record at {offset} + {source.Length} " +
                                $"lands on byte {offset + notReady} in state {range[notReady]}");
                        }

                        range.Fill(Record);
                    }

                    _written[path] = Math.Max(_written.GetValueOrDefault(path), offset + source.Length);
                }

                inner.Write(source, offset);
            }
        }

        private void OnSync(string path, IStorageFile inner)
        {
            if (!Watched(path))
            {
                inner.Sync();
                return;
            }

            byte[]? before;
            lock (_lock)
            {
                before = _states.TryGetValue(path, out byte[]? state) ? (byte[])state.Clone() : null;
            }

            inner.Sync();
            lock (_lock)
            {
                // Fills issued before the sync began are durable now (those racing it stay pending).
                if (before is not null && _states.TryGetValue(path, out byte[]? state))
                {
                    for (int i = 0; i < Math.Min(before.Length, state.Length); i++)
                    {
                        if (before[i] == ZerosPending && state[i] == ZerosPending)
                        {
                            state[i] = ZerosDurable;
                        }
                    }
                }
            }
        }

        private void OnSetLength(string path, long length, IStorageFile inner)
        {
            lock (_lock)
            {
                inner.SetLength(length);
                if (Watched(path))
                {
                    byte[] state = new byte[length];
                    if (_states.TryGetValue(path, out byte[]? old))
                    {
                        old.AsSpan(0, (int)Math.Min(old.Length, length)).CopyTo(state);
                    }

                    _states[path] = state;
                }
            }
        }

        private sealed class CheckedFile(FillCheckingFileSystem owner, IStorageFile inner) : IStorageFile
        {
            private readonly string _path = System.IO.Path.GetFullPath(inner.Path);

            public string Path => inner.Path;

            public long Length => inner.Length;

            public int Read(Span<byte> destination, long offset) => inner.Read(destination, offset);

            public void Write(ReadOnlySpan<byte> source, long offset) => owner.OnWrite(_path, source, offset, inner);

            public void Sync() => owner.OnSync(_path, inner);

            public void SetLength(long length) => owner.OnSetLength(_path, length, inner);

            public void Truncate(long length) => inner.Truncate(length);

            public StorageMapping MapReadOnly(long length) => inner.MapReadOnly(length);

            public void Dispose() => inner.Dispose();
        }
    }
}
