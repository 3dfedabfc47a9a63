using BenchmarkDotNet.Configs;

namespace Folio.Benchmarks;

/// <summary>The configuration a class adds to run in rounds: <see cref="InterleavedRoundsOrderer"/>.</summary>
public sealed class InterleavedRoundsConfig : ManualConfig
{
    public InterleavedRoundsConfig()
    {
        Orderer = new InterleavedRoundsOrderer();
    }
}
