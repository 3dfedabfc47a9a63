using BenchmarkDotNet.Running;

// Run with: dotnet run -c Release --project benchmarks/Folio.Benchmarks -- --filter '*JournalAppendBenchmarks*'
BenchmarkSwitcher.FromAssembly(typeof(Folio.Benchmarks.FolioBenchmarkConfig).Assembly)
    .Run(args, new Folio.Benchmarks.FolioBenchmarkConfig());
