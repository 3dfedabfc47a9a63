using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Folio.Diagnostics;

/// <summary>
/// The logger Folio writes through: the application's logger, whose failures stay its own. A logging provider that
/// throws (a full log disk, a sink disposed at shutdown; <c>LoggerFactory</c> passes its providers' exceptions on)
/// loses that message, and the store goes on: a store that failed to log its open must still open, a committer that
/// failed to log a slow fsync must still acknowledge the commit.
/// </summary>
internal sealed class GuardedLogger(ILogger inner) : ILogger
{
    /// <summary>A guarded logger of <paramref name="factory"/> for <typeparamref name="T"/>, or a null logger when
    /// there is no factory (or it cannot make one).</summary>
    public static ILogger Create<T>(ILoggerFactory? factory)
    {
        if (factory is null)
        {
            return NullLogger<T>.Instance;
        }

        try
        {
            return new GuardedLogger(factory.CreateLogger<T>());
        }
#pragma warning disable CA1031 // a factory that cannot make a logger leaves the store without logs, not unopened
        catch (Exception)
#pragma warning restore CA1031
        {
            return NullLogger<T>.Instance;
        }
    }

    public IDisposable? BeginScope<TState>(TState state)
        where TState : notnull
    {
        try
        {
            return inner.BeginScope(state);
        }
#pragma warning disable CA1031 // see the class
        catch (Exception)
#pragma warning restore CA1031
        {
            return null;
        }
    }

    public bool IsEnabled(LogLevel logLevel)
    {
        try
        {
            return inner.IsEnabled(logLevel);
        }
#pragma warning disable CA1031 // see the class
        catch (Exception)
#pragma warning restore CA1031
        {
            return false;
        }
    }

    public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception,
        Func<TState, Exception?, string> formatter)
    {
        try
        {
            inner.Log(logLevel, eventId, state, exception, formatter);
        }
#pragma warning disable CA1031 // see the class
        catch (Exception)
#pragma warning restore CA1031
        {
        }
    }
}
