using FsCheck;
using FsCheck.Fluent;
using FsCheck.Xunit;
using Folio.Pages;

namespace Folio.Tests.Pages;

/// <summary>
/// A saved node searches through its packed hints; the answers must be those of a plain ordinal binary search, for
/// keys inside and outside the node's shared prefix, shorter and longer than it, equal up to the packed code units,
/// and with code units of every range (surrogates and U+FFFF included).
/// </summary>
public sealed class SearchHintsTests
{
    private static readonly char[] s_alphabet = ['a', 'b', '/', '0', '9', '\u00e9', '\ud83d', '\ude00', '\uffff', 'z'];

    [Property(MaxTest = 300, Arbitrary = [typeof(SearchHintsTests)])]
    public void Searching_with_hints_agrees_with_an_ordinal_binary_search(int seed)
    {
        var random = new Random(seed);
        string prefix = Word(random, random.Next(0, 6));
        var set = new SortedSet<string>(StringComparer.Ordinal);
        int count = random.Next(8, 140);
        while (set.Count < count)
        {
            set.Add(prefix + Word(random, random.Next(0, 7)));
        }

        string[] keys = [.. set];
        var values = new StoredValue[keys.Length];
        TreeNode leaf = TreeNode.SavedLeaf(new PagePosition(1, 1), keys, values, 0);
        PageReference[] children = [.. Enumerable.Range(0, keys.Length + 1)
            .Select(i => new PageReference(new PagePosition(1, (uint)(i + 2))))];
        TreeNode branch = TreeNode.SavedBranch(new PagePosition(1, 2), keys, children, 0);
        for (int i = 0; i < 200; i++)
        {
            string probe = random.Next(4) switch
            {
                0 => keys[random.Next(keys.Length)],
                1 => keys[random.Next(keys.Length)] + Word(random, 1),
                2 => prefix[..random.Next(prefix.Length + 1)] + Word(random, random.Next(0, 3)),
                _ => Word(random, random.Next(0, 9)),
            };
            int expected = Array.BinarySearch(keys, probe, StringComparer.Ordinal);
            Assert.Equal(expected, leaf.Search(probe));
            int separatorsAtOrBelow = keys.Count(k => string.CompareOrdinal(k, probe) <= 0);
            Assert.Equal(separatorsAtOrBelow, branch.ChildIndex(probe));
        }
    }

    public static Arbitrary<int> Seeds() => Gen.Choose(0, int.MaxValue).ToArbitrary();

    private static string Word(Random random, int length)
    {
        var chars = new char[length];
        for (int i = 0; i < length; i++)
        {
            chars[i] = s_alphabet[random.Next(s_alphabet.Length)];
        }

        return new string(chars);
    }
}
