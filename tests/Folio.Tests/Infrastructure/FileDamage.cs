namespace Folio.Tests.Infrastructure;

/// <summary>Damage to a file on disk, as bit rot or a stray write would leave it (the file may be open
/// elsewhere).</summary>
internal static class FileDamage
{
    /// <summary>XORs the byte at <paramref name="offset"/> with <paramref name="mask"/>.</summary>
    public static void FlipByte(string path, long offset, byte mask)
    {
        using var file = new FileStream(path, FileMode.Open, FileAccess.ReadWrite, FileShare.ReadWrite);
        file.Position = offset;
        int value = file.ReadByte();
        file.Position = offset;
        file.WriteByte((byte)(value ^ mask));
    }
}
