using System.Collections.Concurrent;
using Microsoft.Extensions.Logging;

namespace Folio.Tests.Infrastructure;

/// <summary>Collects every log line written through it, with its level and event id.</summary>
public sealed class CapturingLoggerFactory : ILoggerFactory
{
    public ConcurrentQueue<(LogLevel Level, EventId Id, string Message)> Lines { get; } = new();

    public ILogger CreateLogger(string categoryName) => new Logger(this);

    public void AddProvider(ILoggerProvider provider)
    {
    }

    public void Dispose()
    {
    }

    private sealed class Logger(CapturingLoggerFactory owner) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state)
            where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
            owner.Lines.Enqueue((logLevel, eventId, formatter(state, exception)));
    }
}
