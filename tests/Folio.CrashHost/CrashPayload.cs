using System.Text;

namespace Folio.CrashHost;

/// <summary>The deterministic document of an id, so the parent can check the bytes it reads back.</summary>
public static class CrashPayload
{
    public static byte[] For(string id)
        => Encoding.UTF8.GetBytes(
        $"{{\"id\":\"{id}\",\"pad\":\"{new string((char)('a' + (id.Length % 26)), id.Length * 3)}\"}}");
}
