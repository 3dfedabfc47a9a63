using System.Runtime.CompilerServices;

namespace Folio.Transactions;

/// <summary>
/// Reports to a logger or a metrics listener from a failure path, where an observer that throws must not stop the
/// path from answering its waiters: the observer's exception is dropped (the store is faulted already, and says why).
/// A logger or metrics listener that threw there once left waiters unanswered and, on the pool or the buffered-sync
/// timer, ended the process.
/// </summary>
internal static class ObserverGuard
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Run<T>(Action<T> report, T argument)
    {
        try
        {
            report(argument);
        }
#pragma warning disable CA1031 // an observer's failure must not escape a failure path
        catch (Exception)
#pragma warning restore CA1031
        {
        }
    }
}
