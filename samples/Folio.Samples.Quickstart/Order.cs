using System.Text.Json.Serialization;

namespace Folio.Samples.Quickstart;

/// <summary>The quickstart's document: an order. Its <c>Id</c> property is the document id.</summary>
public sealed class Order
{
    public string? Id { get; set; }

    public string Customer { get; set; } = "";

    public decimal Total { get; set; }

    public int Lines { get; set; }

    public string Status { get; set; } = "new";

    public DateTime CreatedUtc { get; set; }
}

/// <summary>Source-generated serialization for <see cref="Order"/> (no reflection at run time).</summary>
[JsonSerializable(typeof(Order))]
internal sealed partial class QuickstartJsonContext : JsonSerializerContext;
