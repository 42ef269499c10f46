#pragma once
// The main() of every micro-benchmark binary: BENCHMARK_MAIN's, with the
// process set up for short, allocation-independent runs.
//
// A shorter default --benchmark_min_time, so that a plain run of every micro-benchmark binary takes seconds, not minutes. The default
// is put in front of the user's arguments; a --benchmark_min_time given on the
// command line comes later and wins (the flag parser keeps the last value),
// which MinTime() on the registrations would not allow.
//
// It also keeps large blocks in the heap: the reference ops return fresh
// matrices, and glibc serves blocks over 32 MiB with mmap, so every call
// would fault in and zero new pages (RMSNorm of 4096 × 4096 floats ran at
// 4 GB/s instead of ~30). A runtime reuses its buffers; so do we.
#include <benchmark/benchmark.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <string>
#include <vector>

namespace yoco::micro {

inline void keep_large_blocks_in_heap() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);              // no mmap-backed blocks: all from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // freed heap is kept (up to 1 GiB of it)
#endif
}

inline int run_benchmarks(int argc, char** argv, const char* default_min_time) {
  keep_large_blocks_in_heap();
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
