namespace Folio.Tests.Infrastructure;

/// <summary>
/// The collection of tests that measure how the process's thread pool treats them, and so must not share it with
/// other tests: xunit runs this collection by itself, after the parallel ones.
/// </summary>
[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class SerialTests
{
    public const string Name = "Serial: runs alone";
}
