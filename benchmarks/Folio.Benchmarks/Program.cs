using BenchmarkDotNet.Running;

// Run with: dotnet run -c Release --project benchmarks/Folio.Benchmarks -- --filter '*JournalAppendBenchmarks*'
// dotnet run -c Release --project benchmarks/Folio.Benchmarks -- --build-larger-than-memory builds the stores
// LargerThanMemoryBenchmarks reuses (otherwise its first setup builds them).
if (args is ["--build-prefetch"])
{
    Console.WriteLine(Folio.Benchmarks.PrefetchBenchmarks.EnsureBuilt());
    return;
}

if (args is ["--build-larger-than-memory"])
{
    Console.WriteLine(Folio.Benchmarks.LargerThanMemoryBenchmarks.EnsureBuilt());
    return;
}

BenchmarkSwitcher.FromAssembly(typeof(Folio.Benchmarks.FolioBenchmarkConfig).Assembly)
    .Run(args, new Folio.Benchmarks.FolioBenchmarkConfig());
