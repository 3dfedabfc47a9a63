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
}
