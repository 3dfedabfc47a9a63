using System.Runtime.InteropServices;

namespace Folio.Tool;

/// <summary>
/// Notices, while a follower waits for commits, that the reader of its standard output has gone (<c>folio tail
/// --follow | grep -m1 x</c> once the match is printed): every half second a timer polls descriptor 1 for an error or a
/// hang-up (POSIX <c>poll</c> with no events asked for: a pipe with no reader left reports <c>POLLERR</c>, a closed
/// terminal or socket <c>POLLHUP</c>) and then cancels <see cref="Token"/>. A write notices too
/// (<see cref="NdjsonOutput"/>), but a store with no new commits gives the follower nothing to write. Unix only;
/// elsewhere the watch never fires.
/// <para>
/// Owners: one command creates, reads and disposes it; the timer's thread only reads descriptor 1, sets
/// <see cref="OutputClosed"/> (an interlocked exchange, so the token is cancelled once) and cancels the token, which
/// the command observes. A tick racing <see cref="Dispose"/> finds the source disposed and does nothing.
/// </para>
/// </summary>
internal sealed partial class ClosedOutputWatch : IDisposable
{
    private const short PollError = 0x008; // POLLERR, the same on Linux and macOS
    private const short PollHangUp = 0x010; // POLLHUP
    private const int PeriodMilliseconds = 500;

    private readonly CancellationTokenSource _closed;
    private readonly Timer? _timer;
    private int _fired;

    /// <param name="cancellationToken">The command's own cancellation (Ctrl+C), linked into
    /// <see cref="Token"/>.</param>
    public ClosedOutputWatch(CancellationToken cancellationToken)
    {
        _closed = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        if (!OperatingSystem.IsWindows())
        {
            _timer = new Timer(static self => ((ClosedOutputWatch)self!).Check(), this, PeriodMilliseconds,
                PeriodMilliseconds);
        }
    }

    /// <summary>Cancelled when the command is, or when standard output's reader has gone.</summary>
    public CancellationToken Token => _closed.Token;

    /// <summary>Whether the watch found standard output's reader gone (acquire).</summary>
    public bool OutputClosed => Volatile.Read(ref _fired) != 0;

    public void Dispose()
    {
        _timer?.Dispose();
        _closed.Dispose();
    }

    private void Check()
    {
        var descriptor = new PollDescriptor { Descriptor = 1 };
        if (Poll(ref descriptor, 1, 0) != 1 || (descriptor.ReturnedEvents & (PollError | PollHangUp)) == 0
            || Interlocked.Exchange(ref _fired, 1) != 0)
        {
            return;
        }

        try
        {
            _closed.Cancel();
        }
        catch (ObjectDisposedException)
        {
            // The command finished meanwhile.
        }
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct PollDescriptor
    {
        public int Descriptor;
        public short Events;
        public short ReturnedEvents;
    }

    [LibraryImport("libc", EntryPoint = "poll", SetLastError = true)]
    private static partial int Poll(ref PollDescriptor descriptors, nuint count, int timeoutMilliseconds);
}
