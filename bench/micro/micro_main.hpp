#pragma once
// BENCHMARK_MAIN with a shorter default --benchmark_min_time, so that a plain
// run of every micro-benchmark binary takes seconds, not minutes. The default
// is put in front of the user's arguments; a --benchmark_min_time given on the
// command line comes later and wins (the flag parser keeps the last value),
// which MinTime() on the registrations would not allow.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace yoco::micro {

inline int run_benchmarks(int argc, char** argv, const char* default_min_time) {
  std::vector<char*> args(argv, argv + argc);
  std::string flag = std::string("--benchmark_min_time=") + default_min_time;
  args.insert(args.begin() + (argc > 0 ? 1 : 0), flag.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace yoco::micro

// 0.2 s per benchmark instead of 0.5 s; pass --benchmark_min_time=2 for steadier numbers.
#define YOCO_MICRO_MAIN() \
  int main(int argc, char** argv) { return yoco::micro::run_benchmarks(argc, argv, "0.2"); }
