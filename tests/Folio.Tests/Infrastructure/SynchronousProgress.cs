namespace Folio.Tests.Infrastructure;

/// <summary>Reports on the reporting thread (<see cref="Progress{T}"/> posts to the thread pool, so the last
/// report could arrive after the call returned).</summary>
internal sealed class SynchronousProgress<T>(Action<T> report) : IProgress<T>
{
    public void Report(T value)
    {
        lock (this)
        {
            report(value);
        }
    }
}
