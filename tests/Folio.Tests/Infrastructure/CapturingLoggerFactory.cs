using System.Collections.Concurrent;
using Microsoft.Extensions.Logging;

namespace Folio.Tests.Infrastructure;

/// <summary>Collects every log line written through it, with its level and event id; throws after the lines
/// <see cref="ThrowFor"/> picks.</summary>
public sealed class CapturingLoggerFactory : ILoggerFactory
{
    public ConcurrentQueue<(LogLevel Level, EventId Id, string Message)> Lines { get; } = new();

    /// <summary>Which events the logger throws on (after capturing them), as a broken logging provider would; none by
    /// default.</summary>
    public Func<EventId, bool> ThrowFor { get; set; } = static _ => false;

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

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState,
            Exception?, string> formatter)
        {
            owner.Lines.Enqueue((logLevel, eventId, formatter(state, exception)));
            if (owner.ThrowFor(eventId))
            {
                throw new InvalidOperationException("logging provider bug");
            }
        }
    }
}
