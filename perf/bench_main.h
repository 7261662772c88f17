// The Google Benchmark part of a benchmark binary's main(), for binaries whose main() also
// has a mode of its own (engine_pps_bench and engine_qps_bench: --count for callgrind).
// Threading: call once, from main().
#pragma once

#include <benchmark/benchmark.h>

namespace mrc::perf {

/// Runs the registered benchmarks as benchmark_main would; 1 on an unrecognised argument.
inline int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace mrc::perf
