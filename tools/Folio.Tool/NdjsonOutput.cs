using System.Text.Json;

namespace Folio.Tool;

/// <summary>NDJSON on standard output: each line is written to <see cref="Json"/>, then ended with
/// <see cref="EndLine"/>; buffered in 64 KiB, flushed at dispose. One command owns it.</summary>
internal sealed class NdjsonOutput : IAsyncDisposable
{
    private readonly Stream _output = Console.OpenStandardOutput();
    private readonly BufferedStream _buffered;

    public NdjsonOutput()
    {
        _buffered = new BufferedStream(_output, 1 << 16);
        Json = new Utf8JsonWriter(_buffered);
    }

    /// <summary>Where the current line's JSON value goes.</summary>
    public Utf8JsonWriter Json { get; }

    /// <summary>Ends the current line.</summary>
    public void EndLine()
    {
        Json.Flush();
        Json.Reset();
        _buffered.WriteByte((byte)'\n');
        Written = true;
    }

    /// <summary>Whether any line was written.</summary>
    public bool Written { get; private set; }

    /// <summary>Writes what is buffered to standard output now (a follower shows each batch as it comes).</summary>
    public Task FlushAsync() => _buffered.FlushAsync();

    public async ValueTask DisposeAsync()
    {
        await Json.DisposeAsync();
        await _buffered.DisposeAsync();
        await _output.DisposeAsync();
    }
}
