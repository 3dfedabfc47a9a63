namespace Folio.Tests.Infrastructure;

/// <summary>How long a test waits for something that should happen promptly before it calls it a hang.</summary>
internal static class TestDeadline
{
    /// <summary>
    /// 30 seconds. Only a hang takes this long; a loaded CI runner can take over 10 s to reach a held fsync (its disk
    /// busy with every concurrently running test's segment zero-fill), and such a wait must not fail a test that is
    /// correct.
    /// </summary>
    public static readonly TimeSpan Hang = TimeSpan.FromSeconds(30);
}
