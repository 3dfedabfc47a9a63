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

// The ids LargerThanMemoryBenchmarks reads: one sequence for every case of a run (its processes inherit this
// variable), another in each run, so no run reads blocks an earlier run left in a cache outside this machine (a
// virtual disk's host keeps blocks read recently: a block read again minutes later takes a third of the time).
if (Environment.GetEnvironmentVariable(Folio.Benchmarks.LargerThanMemoryBenchmarks.SeedVariable) is null)
{
    Environment.SetEnvironmentVariable(Folio.Benchmarks.LargerThanMemoryBenchmarks.SeedVariable,
        Random.Shared.Next(1, int.MaxValue).ToString(System.Globalization.CultureInfo.InvariantCulture));
}

BenchmarkSwitcher.FromAssembly(typeof(Folio.Benchmarks.FolioBenchmarkConfig).Assembly)
    .Run(args, new Folio.Benchmarks.FolioBenchmarkConfig());
