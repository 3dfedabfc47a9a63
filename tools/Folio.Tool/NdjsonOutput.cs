using System.Buffers;
using System.Text.Json;
using Microsoft.Win32.SafeHandles;

namespace Folio.Tool;

/// <summary>NDJSON on standard output: each line is written to <see cref="Json"/> (into a buffer of its own, so the
/// writer's flush does not reach the stream), then ended with <see cref="EndLine"/>, which copies it into a 64 KiB
/// buffer written out when full, at <see cref="FlushAsync"/> and at dispose. One command owns it.
/// <para>
/// A reader that goes away (<c>folio tail --follow | head -1</c>, a consumer that crashed) stops the command: on Unix
/// the lines go to file descriptor 1 through a <see cref="FileStream"/>, whose writes fail once the pipe's reader has
/// closed it (the console stream .NET gives for standard output ignores that failure, so an export would read the
/// whole store and a follower would run for ever, writing to nobody). The failure becomes a
/// <see cref="ToolException"/> saying how many lines were written, and nothing more is flushed.
/// </para>
/// </summary>
internal sealed class NdjsonOutput : IAsyncDisposable
{
    private readonly Stream _output = OpenStandardOutput();
    private readonly BufferedStream _buffered;
    private readonly ArrayBufferWriter<byte> _line = new(4096);
    private long _lines;
    private bool _closed;

    public NdjsonOutput()
    {
        _buffered = new BufferedStream(_output, 1 << 16);
        Json = new Utf8JsonWriter(_line);
    }

    /// <summary>Where the current line's JSON value goes.</summary>
    public Utf8JsonWriter Json { get; }

    /// <summary>Ends the current line.</summary>
    public void EndLine()
    {
        Json.Flush();
        Json.Reset();
        try
        {
            _buffered.Write(_line.WrittenSpan);
            _buffered.WriteByte((byte)'\n');
        }
        catch (IOException e)
        {
            throw ReaderGone(e);
        }
        finally
        {
            _line.ResetWrittenCount();
        }

        _lines++;
    }

    /// <summary>Whether any line was written.</summary>
    public bool Written => _lines > 0;

    /// <summary>Writes what is buffered to standard output now (a follower shows each batch as it comes).</summary>
    public async Task FlushAsync()
    {
        try
        {
            await _buffered.FlushAsync().ConfigureAwait(false);
        }
        catch (IOException e)
        {
            throw ReaderGone(e);
        }
    }

    public async ValueTask DisposeAsync()
    {
        try
        {
            if (!_closed)
            {
                await _buffered.FlushAsync().ConfigureAwait(false);
            }
        }
        catch (IOException e)
        {
            throw ReaderGone(e);
        }
        finally
        {
            await Json.DisposeAsync().ConfigureAwait(false); // writes to its own buffer only
            DiscardBuffered();
            await _output.DisposeAsync().ConfigureAwait(false);
        }
    }

    /// <summary>The failure of a command whose output's reader has gone: found by a write that failed
    /// (<paramref name="failedWrite"/>) or without one (<see cref="ClosedOutputWatch"/>); nothing more is
    /// flushed.</summary>
    public ToolException ReaderGone(IOException? failedWrite = null)
    {
        _closed = true;
        string cause = failedWrite is null ? "" : $" ({failedWrite.Message})";
        return new ToolException($"standard output was closed by its reader{cause}; stopped after {_lines} lines");
    }

    /// <summary>Disposes the buffer (already flushed, unless the output is gone: then its flush fails again and what
    /// it held is dropped).</summary>
    private void DiscardBuffered()
    {
        try
        {
            _buffered.Dispose(); // flushes: fails again at once when the output is gone
        }
        catch (IOException)
        {
            // The reader closed the output; what was buffered has nowhere to go.
        }
    }

    /// <summary>Standard output as a <see cref="FileStream"/> over descriptor 1 when that is a pipe, socket or
    /// terminal (not seekable: written with write(2), and a closed pipe fails the write); else (a file, or Windows)
    /// the console stream, which writes at the descriptor's own offset, as a shell's <c>&gt;</c> and <c>&gt;&gt;</c>
    /// expect (a seekable <see cref="FileStream"/> would write at positions of its own).</summary>
    private static Stream OpenStandardOutput()
    {
        if (!OperatingSystem.IsWindows())
        {
            var descriptor = new FileStream(new SafeFileHandle(1, ownsHandle: false), FileAccess.Write, bufferSize: 0);
            if (!descriptor.CanSeek)
            {
                return descriptor;
            }

            descriptor.Dispose();
        }

        return Console.OpenStandardOutput();
    }
}
