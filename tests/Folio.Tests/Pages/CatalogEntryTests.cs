using FsCheck;
using FsCheck.Xunit;
using Folio.Pages;

namespace Folio.Tests.Pages;

public sealed class CatalogEntryTests
{
    [Property(MaxTest = 300)]
    public void A_trees_entry_decodes_to_the_same_root_count_and_mark(PositiveInt chunk, NonNegativeInt page,
        NonNegativeInt count, bool ahead, NonNegativeInt aheadSequence, string? before)
    {
        var tree = new CollectionTree("docs", new PageReference(new PagePosition((uint)chunk.Get, (uint)page.Get)),
            count.Get);
        if (ahead)
        {
            tree = tree with
            {
                AheadSequence = aheadSequence.Get + 1L,
                AheadBefore = before is null ? null : before[..Math.Min(before.Length, CatalogEntry.MaxAheadIdLength)],
            };
        }

        byte[] entry = CatalogEntry.Encode(tree);
        CollectionTree? decoded = CatalogEntry.Decode("docs", entry);
        Assert.NotNull(decoded);
        Assert.Equal(tree.Root.Position, decoded.Root.Position);
        Assert.Equal(tree.Count, decoded.Count);
        Assert.Equal(tree.AheadSequence, decoded.AheadSequence);
        Assert.Equal(tree.AheadBefore, decoded.AheadBefore); // lone surrogates included: code units, not UTF-8
    }

    [Property(MaxTest = 300)]
    public void An_entry_cut_short_or_lengthened_decodes_to_nothing_rather_than_to_another_tree(PositiveInt chunk,
        NonNegativeInt cut, bool grow)
    {
        var tree = new CollectionTree("docs", new PageReference(new PagePosition((uint)chunk.Get, 7)), 42)
        {
            AheadSequence = 900,
            AheadBefore = "docs/0500",
        };
        byte[] entry = CatalogEntry.Encode(tree);
        byte[] damaged = grow
            ? [.. entry, 0] // one byte more: the id's length no longer matches
            : entry[..(cut.Get % entry.Length)];
        if (damaged.Length == 16)
        {
            return; // the plain entry of a tree not ahead: a valid length (the header's checksum guards the rest)
        }

        Assert.Null(CatalogEntry.Decode("docs", damaged));
    }

    [Fact]
    public void A_pass_entry_round_trips_and_a_damaged_one_is_told_apart()
    {
        Assert.Equal(123_456_789L, CatalogEntry.DecodePass(CatalogEntry.EncodePass(123_456_789L)));
        Assert.Equal(-1, CatalogEntry.DecodePass(new byte[7]));
        Assert.Equal(-1, CatalogEntry.DecodePass(new byte[9]));
        Assert.Null(CatalogEntry.Decode("docs", new byte[16])); // root 0: not a saved page
    }
}
