namespace Folio.Pages;

/// <summary>
/// A saved node's keys in a form a binary search reads from one array: the prefix every key of the node shares,
/// and per key the four UTF-16 code units after it packed into 64 bits, in an order that agrees with ordinal order
/// (a shorter key packs zeros). A search compares the packed values and reads a key's string only when two pack the
/// same, so most of its steps touch one array instead of a string object each. Built once per saved (immutable)
/// node, on its first search, and published by whichever reader builds it first.
/// </summary>
internal sealed class SearchHints
{
    private SearchHints(string prefix, ulong[] values)
    {
        Prefix = prefix;
        Values = values;
    }

    /// <summary>The prefix every key shares.</summary>
    public string Prefix { get; }

    /// <summary>Per key, the packed code units after <see cref="Prefix"/>.</summary>
    public ulong[] Values { get; }

    public static SearchHints Build(ReadOnlySpan<string> keys)
    {
        string first = keys[0];
        string last = keys[^1];
        int shared = first.AsSpan().CommonPrefixLength(last);
        var values = new ulong[keys.Length];
        for (int i = 0; i < keys.Length; i++)
        {
            values[i] = Pack(keys[i], shared);
        }

        return new SearchHints(first[..shared], values);
    }

    /// <summary>The four code units of <paramref name="key"/> from <paramref name="start"/>, packed in order.</summary>
    public static ulong Pack(string key, int start)
    {
        ulong packed = 0;
        for (int i = 0; i < 4; i++)
        {
            int at = start + i;
            packed = (packed << 16) | (at < key.Length ? key[at] : 0u);
        }

        return packed;
    }
}
