using System.Runtime.CompilerServices;
using System.Text;

namespace Folio.Documents;

/// <summary>
/// Remembers the last decoded collection names (there are few), so recovery replay does not allocate one per command.
/// Single-threaded.
/// </summary>
internal sealed class CollectionNameCache
{
    private readonly string?[] _names = new string?[8];
    private readonly byte[]?[] _bytes = new byte[]?[8];
    private int _next;

    [MethodImpl(MethodImplOptions.AggressiveOptimization)] // replay: a store opens once per process, so no tier-0 pass
    public string Get(ReadOnlySpan<byte> utf8)
    {
        for (int i = 0; i < _names.Length; i++)
        {
            if (_bytes[i] is { } known && utf8.SequenceEqual(known))
            {
                return _names[i]!;
            }
        }

        string name = Encoding.UTF8.GetString(utf8);
        _bytes[_next] = utf8.ToArray();
        _names[_next] = name;
        _next = (_next + 1) % _names.Length;
        return name;
    }
}
