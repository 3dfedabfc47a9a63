namespace Folio.Pages;

/// <summary>
/// The free extents of the data file between its header slots and its end, in file order. New chunks take the first
/// extent that fits, else go at the end. Used by the checkpoint's thread only (under the checkpoint lock).
/// </summary>
internal sealed class ChunkSpace
{
    private readonly SortedList<long, long> _free = [];

    public ChunkSpace(long end) => End = Math.Max(end, DataFileHeader.DataStart);

    /// <summary>Where the file's used space ends: a chunk placed at the end starts here.</summary>
    public long End { get; private set; }

    /// <summary>Bytes free before <see cref="End"/>.</summary>
    public long FreeBytes
    {
        get
        {
            long total = 0;
            foreach (long length in _free.Values)
            {
                total += length;
            }

            return total;
        }
    }

    /// <summary>The free bytes before <see cref="End"/> that new chunks can be sure to use: each free extent counted
    /// in whole full chunks (<see cref="ChunkFormat.MaxPagesPerChunk"/> pages of 16 KiB), or the longest free extent
    /// when that is more (a checkpoint smaller than a full chunk is one chunk, which needs one extent).</summary>
    public long Usable
    {
        get
        {
            long largest = 0;
            foreach (long length in _free.Values)
            {
                largest = Math.Max(largest, length);
            }


            long piece = ChunkFormat.Align((ChunkFormat.MaxPagesPerChunk * (long)(PageFormat.TargetPageSize
                + ChunkFormat.TocEntrySize)) + ChunkFormat.HeaderSize);
            long total = 0;
            foreach (long length in _free.Values)
            {
                total += length / piece * piece;
            }

            return Math.Max(total, largest);
        }
    }

    /// <summary>Marks the extents not used by <paramref name="used"/> (offset, extent) as free (mount).</summary>
    public static ChunkSpace FromUsed(List<(long Offset, long Extent)> used)
    {
        used.Sort((a, b) => a.Offset.CompareTo(b.Offset));
        long at = DataFileHeader.DataStart;
        var space = new ChunkSpace(DataFileHeader.DataStart);
        foreach ((long offset, long extent) in used)
        {
            if (offset > at)
            {
                space._free.Add(at, offset - at);
            }

            at = Math.Max(at, offset + extent);
        }

        space.End = at;
        return space;
    }

    /// <summary>Takes an extent of <paramref name="extent"/> bytes (a multiple of the chunk alignment).</summary>
    public long Allocate(long extent)
    {
        for (int i = 0; i < _free.Count; i++)
        {
            long length = _free.Values[i];
            if (length >= extent)
            {
                long offset = _free.Keys[i];
                _free.RemoveAt(i);
                if (length > extent)
                {
                    _free.Add(offset + extent, length - extent);
                }

                return offset;
            }
        }

        long end = End;
        End += extent;
        return end;
    }

    /// <summary>Returns an extent, merging it with free neighbours; a free extent at the end shortens the used
    /// space.</summary>
    public void Free(long offset, long extent)
    {
        int index = 0;
        while (index < _free.Count && _free.Keys[index] < offset)
        {
            index++;
        }

        if (index > 0 && _free.Keys[index - 1] + _free.Values[index - 1] == offset)
        {
            index--;
            offset = _free.Keys[index];
            extent += _free.Values[index];
            _free.RemoveAt(index);
        }

        if (index < _free.Count && offset + extent == _free.Keys[index])
        {
            extent += _free.Values[index];
            _free.RemoveAt(index);
        }

        if (offset + extent == End)
        {
            End = offset;
        }
        else
        {
            _free.Add(offset, extent);
        }
    }
}
