namespace Folio.Storage;

/// <summary>
/// What a test disk needs to know about holes: per file (by full path), how many bytes from its start a file
/// lengthened with <see cref="IStorageFile.SetLength"/> has written; past them its length is a hole that takes no
/// space until written. Files never lengthened are taken to have written their whole length. One lock; compiled into
/// the tests and the crash host, not into the product.
/// </summary>
internal sealed class SparseFiles
{
    private readonly Lock _lock = new();
    private readonly Dictionary<string, long> _written = new(StringComparer.Ordinal);

    /// <summary>The bytes from the start of the file at <paramref name="path"/> that have blocks: what a sparse file
    /// wrote, else <paramref name="length"/>.</summary>
    public long Allocated(string path, long length)
    {
        lock (_lock)
        {
            return _written.TryGetValue(Path.GetFullPath(path), out long written) ? written : length;
        }
    }

    /// <summary>After a write that ended at <paramref name="end"/>.</summary>
    public void Wrote(string path, long end)
    {
        lock (_lock)
        {
            string key = Path.GetFullPath(path);
            if (_written.TryGetValue(key, out long written) && end > written)
            {
                _written[key] = end;
            }
        }
    }

    /// <summary>After the file, <paramref name="lengthBefore"/> bytes long, was given
    /// <paramref name="length"/>.</summary>
    public void LengthSet(string path, long lengthBefore, long length)
    {
        lock (_lock)
        {
            string key = Path.GetFullPath(path);
            long written = _written.TryGetValue(key, out long known) ? known : lengthBefore;
            _written[key] = Math.Min(written, length);
        }
    }

    /// <summary>After the file was cut to <paramref name="length"/>.</summary>
    public void Truncated(string path, long length)
    {
        lock (_lock)
        {
            string key = Path.GetFullPath(path);
            if (_written.TryGetValue(key, out long written))
            {
                _written[key] = Math.Min(written, length);
            }
        }
    }

    public void Deleted(string path)
    {
        lock (_lock)
        {
            _written.Remove(Path.GetFullPath(path));
        }
    }

    public void Moved(string sourcePath, string destinationPath)
    {
        lock (_lock)
        {
            string to = Path.GetFullPath(destinationPath);
            _written.Remove(to);
            if (_written.Remove(Path.GetFullPath(sourcePath), out long written))
            {
                _written[to] = written;
            }
        }
    }
}
