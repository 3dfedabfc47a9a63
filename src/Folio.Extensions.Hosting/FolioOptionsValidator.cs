using Microsoft.Extensions.Options;

namespace Folio.Extensions.Hosting;

/// <summary>
/// Validates <see cref="FolioOptions"/> when the host starts (registered with <c>ValidateOnStart</c>), with the same
/// rules the store applies at open, so a bad setting stops the host with a message naming it instead of failing the
/// first request.
/// </summary>
internal sealed class FolioOptionsValidator : IValidateOptions<FolioOptions>
{
    public ValidateOptionsResult Validate(string? name, FolioOptions options)
    {
        var failures = new List<string>();
        if (string.IsNullOrWhiteSpace(options.Path))
        {
            failures.Add("Folio:Path is required: the folder the store keeps its journal in.");
        }
        else if (options.Path.AsSpan().IndexOfAny(System.IO.Path.GetInvalidPathChars()) >= 0)
        {
            failures.Add($"Folio:Path '{options.Path}' contains characters that are not valid in a path.");
        }

        if (options.DegradedSyncLatency <= TimeSpan.Zero)
        {
            failures.Add($"Folio:DegradedSyncLatency must be positive (was {options.DegradedSyncLatency}).");
        }

        try
        {
            options.ToStoreOptions(null, null).Validate();
        }
        catch (ArgumentException e)
        {
            failures.Add($"Folio:{e.ParamName}: {e.Message}");
        }

        return failures.Count == 0 ? ValidateOptionsResult.Success : ValidateOptionsResult.Fail(failures);
    }
}
