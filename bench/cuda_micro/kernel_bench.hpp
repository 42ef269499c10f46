#pragma once
// The CUDA kernel micro-benchmarks' shared harness (DESIGN.md §5): CUDA events
// around the launch, warm-up first, the L2 flushed before every sample (cold
// cache, KERNELS.md §5 row 10), median of repeats with min and max kept; each
// kernel's time is reported against its floor (bytes / measured copy rate,
// FLOPs / measured GEMM rate) from the ceilings measured in the same run.
//
// A benchmark is a function registered with YOCO_KERNEL_BENCH(name); it builds
// its inputs (random, never zeros), times its launches with time_launches and
// adds one KernelResult per shape. bench_cuda_kernels runs them all (or those
// named with --filter) and writes the result CSV.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace yoco::cuda_bench {

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int repeats = 0;
};

// Times `launch` (which enqueues the work on `stream`): `warmup` untimed runs,
// then `repeats` samples, each bracketed by its own events, with a write of a
// buffer larger than the L2 before each when `flush_l2`. Throws
// std::runtime_error naming the CUDA error if a launch fails.
Timing time_launches(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream, int warmup = 3,
                     int repeats = 20, bool flush_l2 = true);

struct KernelResult {
  std::string kernel;   // e.g. "gret_chunk"
  std::string variant;  // e.g. "C64 v2 S4 P4" (gRet chunk v2, 4 V-slices, 4 segments) or "splits 33"
  std::string model;    // shape family, e.g. "yoco-3b"
  int64_t seq_len = 0, batch = 1;
  double bytes = 0;     // fewest bytes the kernel must move (each tensor once)
  double flops = 0;     // matmul FLOPs by the FlashAttention convention
  // The members below have default initializers so that a braced row may stop before them without
  // -Wmissing-field-initializers.
  Timing time{};
  std::string notes{};    // e.g. "error vs oracle 3.1e-3"
  std::string skipped{};  // non-empty: the variant did not run, and why (a row of method `skipped`)
  // The variant's parameters (version, chunk, slices, segments, stages, splits, ...): one
  // `param_<name>` row each (method `exact`), so readers need not parse the variant label.
  std::vector<std::pair<std::string, double>> params{};
};

class Report {
 public:
  void add(const KernelResult& r);
  const std::vector<KernelResult>& results() const { return results_; }

 private:
  std::vector<KernelResult> results_;
};

using BenchFn = std::function<void(Report&)>;
// Registration; use the macro.
bool register_kernel_bench(const char* name, BenchFn fn);

}  // namespace yoco::cuda_bench

#define YOCO_KERNEL_BENCH_CAT2(a, b) a##b
#define YOCO_KERNEL_BENCH_CAT(a, b) YOCO_KERNEL_BENCH_CAT2(a, b)
// YOCO_KERNEL_BENCH(gret_chunk) { ... uses `report` ... }
#define YOCO_KERNEL_BENCH(name)                                                                      \
  static void yoco_kernel_bench_##name(::yoco::cuda_bench::Report& report);                          \
  static const bool YOCO_KERNEL_BENCH_CAT(yoco_kernel_bench_registered_, name) =                     \
      ::yoco::cuda_bench::register_kernel_bench(#name, yoco_kernel_bench_##name);                    \
  static void yoco_kernel_bench_##name(::yoco::cuda_bench::Report& report)
