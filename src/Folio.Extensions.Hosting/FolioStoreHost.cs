using System.Diagnostics.Metrics;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Folio.Extensions.Hosting;

/// <summary>
/// Owns the host's one <see cref="DocumentStore"/>: opens it when the host starts (so a locked folder or a damaged
/// journal stops start-up with its own exception, not the first request) and closes it when the host stops, after
/// the web server has drained its requests (hosted services stop in reverse order of registration, and the server
/// registers after the application's services): pending commits are finished and acknowledged, the journal is
/// synced and the folder's lock released.
/// </summary>
/// <remarks>
/// Protocol: the store is created once under <see cref="_gate"/> (start-up or the first resolution, whichever comes
/// first) and published through a volatile field; readers of <see cref="Store"/> after that take no lock. After
/// <see cref="StopAsync"/> the store is disposed and <see cref="Store"/> throws <see cref="ObjectDisposedException"/>;
/// stopping again (the container disposes this object after the host stopped it) does nothing.
/// </remarks>
internal sealed partial class FolioStoreHost : IHostedService, IAsyncDisposable, IDisposable
{
    private readonly IOptions<FolioOptions> _options;
    private readonly IHostEnvironment? _environment;
    private readonly ILoggerFactory? _loggerFactory;
    private readonly IMeterFactory? _meterFactory;
    private readonly ILogger _logger;
    private readonly Lock _gate = new();
    private volatile DocumentStore? _store;
    private volatile bool _stopped;

    public FolioStoreHost(IOptions<FolioOptions> options, ILoggerFactory? loggerFactory = null,
        IMeterFactory? meterFactory = null, IHostEnvironment? environment = null)
    {
        _options = options;
        _environment = environment;
        _loggerFactory = loggerFactory;
        _meterFactory = meterFactory;
        _logger = loggerFactory?.CreateLogger<FolioStoreHost>()
            ?? Microsoft.Extensions.Logging.Abstractions.NullLogger<FolioStoreHost>.Instance;
    }

    /// <summary>The open store; opens it on first use if the host has not started yet.</summary>
    public DocumentStore Store => _store ?? Open();

    public async Task StartAsync(CancellationToken cancellationToken)
    {
        cancellationToken.ThrowIfCancellationRequested();
        if (_store is null)
        {
            await Task.Run(Open, cancellationToken).ConfigureAwait(false);
        }
    }

    public async Task StopAsync(CancellationToken cancellationToken)
    {
        DocumentStore? store;
        lock (_gate)
        {
            if (_stopped)
            {
                return; // the host stopped it already; the container's disposal calls again
            }

            _stopped = true;
            store = _store;
        }

        if (store is not null)
        {
            Closing(_logger, store.Path);
            await store.DisposeAsync().ConfigureAwait(false);
        }
    }

    public async ValueTask DisposeAsync()
    {
        await StopAsync(CancellationToken.None).ConfigureAwait(false);
    }

    public void Dispose() => DisposeAsync().AsTask().GetAwaiter().GetResult();

    private DocumentStore Open()
    {
        lock (_gate)
        {
            ObjectDisposedException.ThrowIf(_stopped, this);
            if (_store is { } existing)
            {
                return existing;
            }

            FolioOptions options = _options.Value;
            DocumentStore store = DocumentStore.Open(FullPath(options.Path!),
                options.ToStoreOptions(_loggerFactory, _meterFactory));
            _store = store;
            return store;
        }
    }

    /// <summary>A relative path is the host's content root's (a service started by systemd or the Windows service
    /// manager runs in / or System32, where its content root is the application's folder), else the current
    /// directory's.</summary>
    private string FullPath(string path) =>
        System.IO.Path.IsPathRooted(path) || _environment?.ContentRootPath is not { Length: > 0 } root
            ? path
            : System.IO.Path.Combine(root, path);

    [LoggerMessage(EventId = 4001, Level = LogLevel.Information,
        Message = "Host is stopping: closing Folio store '{Path}' (finishing pending commits, syncing the journal)")]
    private static partial void Closing(ILogger logger, string path);
}
