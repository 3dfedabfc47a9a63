using System.Collections.Immutable;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Order;
using BenchmarkDotNet.Running;

namespace Folio.Benchmarks;

/// <summary>
/// Runs a class's methods in interleaved rounds: for each value of the other parameters, every method of round 1, then
/// every method of round 2 in the reverse order, then round 3 in the declared order again, and so on. A class opts in
/// with an integer parameter named <see cref="BenchmarkConstants.RoundParameter"/>. BenchmarkDotNet otherwise runs
/// each case's iterations back to back, so two methods compared in a report meet whatever the disk did during their
/// own minutes; on this host the fsync drifts by 2x within a minute. In rounds, the methods compared run beside each
/// other several times, and the reversal (A B B A) cancels a drift that is linear over the rounds.
/// </summary>
public sealed class InterleavedRoundsOrderer : DefaultOrderer
{
    public override IEnumerable<BenchmarkCase> GetExecutionOrder(ImmutableArray<BenchmarkCase> benchmarkCases,
        IEnumerable<BenchmarkLogicalGroupRule>? order = null)
    {
        List<BenchmarkCase> declared = base.GetExecutionOrder(benchmarkCases, order).ToList();
        var methods = new Dictionary<string, int>(StringComparer.Ordinal);
        var others = new Dictionary<string, int>(StringComparer.Ordinal);
        foreach (BenchmarkCase benchmark in declared)
        {
            methods.TryAdd(benchmark.Descriptor.WorkloadMethod.Name, methods.Count);
            others.TryAdd(OtherParameters(benchmark), others.Count);
        }

        return declared
            .OrderBy(b => others[OtherParameters(b)])
            .ThenBy(Round)
            .ThenBy(b => Round(b) % 2 == 1 ? methods[b.Descriptor.WorkloadMethod.Name]
                : -methods[b.Descriptor.WorkloadMethod.Name])
            .ToList();
    }

    private static int Round(BenchmarkCase benchmark)
    {
        foreach (BenchmarkDotNet.Parameters.ParameterInstance parameter in benchmark.Parameters.Items)
        {
            if (parameter.Name == BenchmarkConstants.RoundParameter && parameter.Value is int round)
            {
                return round;
            }
        }

        return 1;
    }

    private static string OtherParameters(BenchmarkCase benchmark)
    {
        var key = new System.Text.StringBuilder();
        foreach (BenchmarkDotNet.Parameters.ParameterInstance parameter in benchmark.Parameters.Items)
        {
            if (parameter.Name != BenchmarkConstants.RoundParameter)
            {
                key.Append(parameter.Name).Append('=').Append(parameter.Value).Append('&');
            }
        }

        return key.ToString();
    }
}
