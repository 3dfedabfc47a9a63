namespace Folio;

/// <summary>
/// A 64-bit value that only ever grows, raised by several threads at once: a compare-exchange loop, so the largest
/// value wins whatever the order of the raises (full fence on success; readers use
/// <see cref="Volatile.Read(ref readonly long)"/>).
/// </summary>
internal static class AtomicMaximum
{
    /// <summary>Raises <paramref name="location"/> to <paramref name="value"/> unless it is already at least
    /// that.</summary>
    /// <returns>Whether this call raised it.</returns>
    public static bool TryRaise(ref long location, long value)
    {
        long current = Volatile.Read(ref location);
        while (value > current)
        {
            long seen = Interlocked.CompareExchange(ref location, value, current);
            if (seen == current)
            {
                return true;
            }

            current = seen;
        }

        return false;
    }

    /// <summary>Raises <paramref name="location"/> to <paramref name="atLeast"/>, or to one above its value when it
    /// is already there or past it, and returns the value it set: each call gets a value no other call gets, above
    /// every earlier one.</summary>
    public static long Advance(ref long location, long atLeast)
    {
        long current = Volatile.Read(ref location);
        while (true)
        {
            long next = Math.Max(atLeast, current + 1);
            long seen = Interlocked.CompareExchange(ref location, next, current);
            if (seen == current)
            {
                return next;
            }

            current = seen;
        }
    }
}
