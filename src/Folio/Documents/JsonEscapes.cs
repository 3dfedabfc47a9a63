namespace Folio.Documents;

/// <summary>
/// Reads the <c>\uXXXX</c> escapes of a JSON string or property name as <see cref="System.Text.Json.Utf8JsonReader"/>
/// hands it over (<c>ValueSpan</c> of a token whose <c>ValueIsEscaped</c>: the bytes between the quotes, escapes not
/// yet decoded, grammar already checked). JSON's grammar lets an escape name a surrogate code unit on its own
/// (RFC 8259, section 8.2), but such a string is not Unicode text: System.Text.Json refuses to read it as a
/// <see cref="string"/>, so a document holding one would fail every typed load and every query over its collection.
/// </summary>
internal static class JsonEscapes
{
    /// <summary>
    /// The offset in <paramref name="escaped"/> of the first <c>\u</c> escape of a surrogate that is not one half of
    /// a pair (a high surrogate escape followed at once by a low surrogate escape), or -1 when there is none.
    /// </summary>
    public static int FindLoneSurrogate(ReadOnlySpan<byte> escaped)
    {
        int pendingHigh = -1; // offset of a high surrogate escape waiting for its low half
        int i = 0;
        while (i < escaped.Length)
        {
            if (escaped[i] != (byte)'\\')
            {
                if (pendingHigh >= 0)
                {
                    return pendingHigh;
                }

                int next = escaped[i..].IndexOf((byte)'\\'); // text up to the next escape holds no surrogate
                if (next < 0)
                {
                    return -1;
                }

                i += next;
                continue;
            }

            if (escaped[i + 1] != (byte)'u')
            {
                if (pendingHigh >= 0)
                {
                    return pendingHigh;
                }

                i += 2; // a two-character escape such as \n or \"
                continue;
            }

            int unit = HexValue(escaped.Slice(i + 2, 4));
            if (unit is >= 0xD800 and <= 0xDBFF)
            {
                if (pendingHigh >= 0)
                {
                    return pendingHigh;
                }

                pendingHigh = i;
            }
            else if (unit is >= 0xDC00 and <= 0xDFFF)
            {
                if (pendingHigh < 0)
                {
                    return i;
                }

                pendingHigh = -1;
            }
            else if (pendingHigh >= 0)
            {
                return pendingHigh;
            }

            i += 6;
        }

        return pendingHigh;
    }

    /// <summary>The value of four hexadecimal digits (the reader checked they are).</summary>
    private static int HexValue(ReadOnlySpan<byte> digits)
    {
        int value = 0;
        foreach (byte digit in digits)
        {
            value = (value << 4) | (digit <= '9' ? digit - '0' : (digit | 0x20) - 'a' + 10);
        }

        return value;
    }
}
