namespace Folio;

/// <summary>
/// Thrown when a folder is already open by this or another process. Folio owns its folder exclusively through a
/// lock file; close the other instance first.
/// </summary>
public sealed class StoreLockedException : FolioException
{
    /// <summary>Creates an exception with a default message.</summary>
    public StoreLockedException()
        : base("The folder is already open by another Folio instance.")
    {
        Directory = string.Empty;
    }

    /// <summary>Creates an exception with the given message.</summary>
    /// <param name="message">What went wrong.</param>
    public StoreLockedException(string message)
        : base(message)
    {
        Directory = string.Empty;
    }

    /// <summary>Creates an exception with the given message and cause.</summary>
    /// <param name="message">What went wrong.</param>
    /// <param name="innerException">The cause.</param>
    public StoreLockedException(string message, Exception? innerException)
        : base(message, innerException)
    {
        Directory = string.Empty;
    }

    internal StoreLockedException(string directory, string lockFile, Exception? innerException)
        : base($"The folder '{directory}' is already open by another Folio instance (in this or another process): " +
            $"its lock file '{lockFile}' is held.", innerException)
    {
        Directory = directory;
    }

    /// <summary>The folder that is already open.</summary>
    public string Directory { get; }
}
