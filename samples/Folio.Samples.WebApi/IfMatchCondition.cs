using System.Globalization;
using Microsoft.Extensions.Primitives;
using Microsoft.Net.Http.Headers;

namespace Folio.Samples.WebApi;

/// <summary>
/// A request's <c>If-Match</c> precondition (RFC 9110, section 13.1.1): <c>*</c>, or entity tags compared strongly
/// with the note's ETag, its version in quotes (<c>"12"</c>). A weak tag (<c>W/"12"</c>) or a tag that is no version
/// never matches; a header that is no list of entity tags is a bad request.
/// </summary>
internal sealed class IfMatchCondition
{
    private readonly bool _any;
    private readonly List<long> _versions;

    private IfMatchCondition(bool any, List<long> versions)
    {
        _any = any;
        _versions = versions;
    }

    /// <summary>The request's condition, or null when it has no <c>If-Match</c>.</summary>
    /// <exception cref="ArgumentException">The header is not a list of entity tags (answered 400).</exception>
    public static IfMatchCondition? Parse(HttpContext context)
    {
        StringValues header = context.Request.Headers.IfMatch;
        if (StringValues.IsNullOrEmpty(header))
        {
            return null;
        }

        if (!EntityTagHeaderValue.TryParseStrictList(header, out IList<EntityTagHeaderValue>? tags) || tags.Count == 0)
        {
            throw new ArgumentException(
                $"If-Match must be * or a list of entity tags such as \"12\" (a note's ETag), not '{header}'.");
        }

        bool any = false;
        var versions = new List<long>();
        foreach (EntityTagHeaderValue tag in tags)
        {
            if (tag.Equals(EntityTagHeaderValue.Any))
            {
                any = true;
            }
            else if (!tag.IsWeak && long.TryParse(tag.Tag.AsSpan().Trim('"'), NumberStyles.None,
                CultureInfo.InvariantCulture, out long version))
            {
                versions.Add(version);
            }
        }

        return new IfMatchCondition(any, versions);
    }

    /// <summary>Whether a note at <paramref name="version"/> meets the condition.</summary>
    public bool Matches(long version) => _any || _versions.Contains(version);
}
