namespace Folio;

/// <summary>
/// Starts the store's dedicated background threads (checkpoints, the group sync, prefetch). A thread the process
/// cannot create (its threads, memory or file descriptors exhausted, as under a container's pids limit)
/// surfaces as <see cref="OutOfMemoryException"/> from <see cref="Thread.Start()"/>; each caller decides what that
/// means for it: an open fails with a message that says so, a thread that only speeds things up is done without.
/// </summary>
internal static class DedicatedThread
{
    private static Func<string, bool>? s_refuse;

    /// <summary>Tests that run alone: refuses to start the threads whose name it matches, as such a process would
    /// (for every store in the process).</summary>
    internal static Func<string, bool>? Refuse
    {
        get => Volatile.Read(ref s_refuse);
        set => Volatile.Write(ref s_refuse, value);
    }

    /// <summary>Starts <paramref name="body"/> on a new background thread called <paramref name="name"/>.</summary>
    /// <exception cref="OutOfMemoryException">The thread could not be created.</exception>
    public static Thread Start(ThreadStart body, string name, ThreadPriority priority = ThreadPriority.Normal)
    {
        var thread = new Thread(body) { IsBackground = true, Name = name, Priority = priority };
        if (Refuse is { } refuse && refuse(name))
        {
#pragma warning disable CA2201 // the test hook throws what Thread.Start throws for a thread it cannot create
            throw new OutOfMemoryException($"The thread '{name}' was refused (test).");
#pragma warning restore CA2201
        }

        thread.Start();
        return thread;
    }
}
