using System.Globalization;
using System.Text;

namespace Folio;

/// <summary>
/// Document id rules and generation. Ids are strings compared ordinally (case-sensitive); at most 2 KiB of UTF-8,
/// valid UTF-16 (no lone surrogate: it would be stored as U+FFFD and merge with another id) and no control characters.
/// Collection names follow the same rules. Generated ids are <c>{collection}/{n:D19}</c>, where n is the UTC time in
/// ticks, bumped so it always grows within the process and, from each store's open on, stays above the time of that
/// store's last commit (<see cref="GenerateAbove"/>): so ids sort by creation time and a clock stepped back past an
/// earlier run's ids (a restored virtual machine, a corrected clock) does not generate them again. An entity whose
/// <c>Id</c> is a <see cref="long"/> or <see cref="ulong"/> gets a number of microseconds since the Unix epoch, kept
/// likewise (<see cref="GenerateNumber"/>), one whose <c>Id</c> is a <see cref="Guid"/> a version 7 GUID (the
/// session's choice): ids its property can hold. A session saves a generated id only where no document exists, so
/// even a repeated one could not overwrite.
/// </summary>
internal static class DocumentIds
{
    public const int MaxIdBytes = 2048;
    private static long s_last;
    private static long s_lastMicroseconds;

    public static void Validate(string? id, string paramName = "id")
    {
        if (string.IsNullOrEmpty(id))
        {
            ThrowHelper.ThrowArgument(paramName, $"A document {What(paramName)} must not be null or empty.");
        }

        if (IsTooLong(id))
        {
            ThrowHelper.ThrowArgument(paramName,
                $"A document {What(paramName)} is limited to {MaxIdBytes} UTF-8 bytes.");
        }

        // Control characters are exactly U+0000-U+001F and U+007F-U+009F (char.IsControl); the range searches are
        // vectorized.
        int control = id.AsSpan().IndexOfAnyInRange('\u0000', '\u001f');
        if (control < 0)
        {
            control = id.AsSpan().IndexOfAnyInRange('\u007f', '\u009f');
        }

        if (control >= 0)
        {
            ThrowHelper.ThrowArgument(paramName,
                $"A document {What(paramName)} must not contain control characters (found U+{(int)id[control]:X4}).");
        }

        int surrogate = id.AsSpan().IndexOfAnyInRange('\uD800', '\uDFFF');
        if (surrogate >= 0)
        {
            ValidateSurrogates(id, surrogate, paramName);
        }
    }

    /// <summary>
    /// Throws unless every surrogate from <paramref name="start"/> on is half of a pair (high then low). UTF-8 cannot
    /// encode a lone surrogate: the encoder would write U+FFFD, so "a\uD800" and "a\uDBFF" would become one id on disk.
    /// </summary>
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    private static void ValidateSurrogates(string name, int start, string paramName)
    {
        for (int i = start; i < name.Length; i++)
        {
            char c = name[i];
            if (!char.IsSurrogate(c))
            {
                continue;
            }

            if (char.IsHighSurrogate(c) && i + 1 < name.Length && char.IsLowSurrogate(name[i + 1]))
            {
                i++;
                continue;
            }

            ThrowHelper.ThrowArgument(paramName,
                $"A document {What(paramName)} must be valid UTF-16: it has a " +
                $"lone surrogate U+{(int)c:X4} at index {i}.");
        }
    }

    /// <summary>Whether <paramref name="id"/> is over <see cref="MaxIdBytes"/> UTF-8 bytes. A UTF-16 char is at most 3
    /// UTF-8 bytes: short ids need no count.</summary>
    public static bool IsTooLong(string id)
        => id.Length > MaxIdBytes / 3 && Encoding.UTF8.GetByteCount(id) > MaxIdBytes;

    /// <summary>What the checked string is, for messages: a collection name or an id.</summary>
    private static string What(string paramName) => paramName == "collection" ? "collection name" : "id";

    public static void ValidateCollection(string? collection)
    {
        Validate(collection, nameof(collection));
    }

    /// <summary>Makes every id generated from now on in this process greater than <paramref name="ticks"/> (a store's
    /// last commit time, at its open).</summary>
    public static void GenerateAbove(long ticks)
    {
        AtomicMaximum.TryRaise(ref s_last, ticks);
        AtomicMaximum.TryRaise(ref s_lastMicroseconds, ToUnixMicroseconds(ticks));
    }

    /// <summary>A generated id for an entity of <paramref name="collection"/> whose <c>Id</c> is a string (or that
    /// has none): <c>{collection}/{n:D19}</c>.</summary>
    public static string Generate(string collection)
        => string.Create(CultureInfo.InvariantCulture,
            $"{collection}/{AtomicMaximum.Advance(ref s_last, DateTime.UtcNow.Ticks):D19}");

    /// <summary>
    /// A generated id for an entity whose <c>Id</c> is a <see cref="long"/> or <see cref="ulong"/>: the text of the
    /// number the property then holds, microseconds since the Unix epoch, bumped as <see cref="Generate"/>'s n is. Not
    /// the ticks: those are above 2^53 (about 6.4e17), and a JSON number above 2^53 loses digits in JavaScript, so a
    /// web client would send back another id; microseconds stay below 2^53 until the year 2255.
    /// </summary>
    public static string GenerateNumber()
        => AtomicMaximum.Advance(ref s_lastMicroseconds, ToUnixMicroseconds(DateTime.UtcNow.Ticks))
            .ToString(CultureInfo.InvariantCulture);

    private static long ToUnixMicroseconds(long ticks) => (ticks - DateTime.UnixEpoch.Ticks) / 10;
}
