using System.Text;
using System.Text.Json;
using FsCheck.Xunit;
using Folio.Documents;

namespace Folio.Tests.Documents;

/// <summary>
/// <see cref="JsonEscapes.FindLoneSurrogate"/> against a model: a string of code units, each written as itself or as
/// an escape chosen by the test, has a lone surrogate exactly when its code units do not pair up, whatever is escaped,
/// and the first one found is the first unpaired code unit.
/// </summary>
public sealed class JsonEscapesTests
{
    /// <summary>Code units the strings are built from: surrogates of both halves, characters JSON must escape, a
    /// backslash and a 'u' (so "\\u" written out is not taken for an escape), and plain text.</summary>
    private static readonly char[] s_units =
        ['\uD800', '\uDBFF', '\uD83D', '\uDC00', '\uDFFF', '\uDE00', 'a', 'u', '\\', '"', '\n', '\u00e9', '0', 'D'];

    [Property(MaxTest = 2000)]
    public void A_lone_surrogate_is_found_exactly_when_the_code_units_do_not_pair_up(int[] program)
    {
        var units = new StringBuilder();
        var escaped = new StringBuilder();
        var offsets = new List<int>(); // the offset in the escaped text of each code unit
        foreach (int op in program)
        {
            char unit = s_units[(op & int.MaxValue) % s_units.Length];
            bool escape = char.IsSurrogate(unit) || (op & (1 << 30)) != 0 || unit is '\\' or '"' or '\n';
            offsets.Add(Encoding.UTF8.GetByteCount(escaped.ToString()));
            units.Append(unit);
            escaped.Append(escape ? unit switch
            {
                '\\' when (op & (1 << 29)) != 0 => "\\\\",
                '"' when (op & (1 << 29)) != 0 => "\\\"",
                '\n' when (op & (1 << 29)) != 0 => "\\n",
                _ => (op & (1 << 28)) != 0 ? $"\\u{(int)unit:X4}" : $"\\u{(int)unit:x4}",
            } : unit.ToString());
        }

        int expected = FirstUnpaired(units.ToString());
        byte[] json = Encoding.UTF8.GetBytes($"[\"{escaped}\"]");
        var reader = new Utf8JsonReader(json);
        reader.Read();
        reader.Read();
        int found = JsonEscapes.FindLoneSurrogate(reader.ValueSpan);

        Assert.Equal(expected < 0 ? -1 : offsets[expected], found);
        if (expected < 0)
        {
            Assert.Equal(units.ToString(), reader.GetString());
        }
        else
        {
            Assert.ThrowsAny<InvalidOperationException>(() => new Utf8JsonReader(json) is var r && r.Read()
                && r.Read() && r.GetString() is not null);
        }
    }

    /// <summary>The index of the first code unit that is half of a surrogate pair without its other half, or
    /// -1.</summary>
    private static int FirstUnpaired(string units)
    {
        for (int i = 0; i < units.Length; i++)
        {
            if (char.IsHighSurrogate(units[i]) && i + 1 < units.Length && char.IsLowSurrogate(units[i + 1]))
            {
                i++;
            }
            else if (char.IsSurrogate(units[i]))
            {
                return i;
            }
        }

        return -1;
    }
}
