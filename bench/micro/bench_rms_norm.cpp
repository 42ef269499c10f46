// Google Benchmark: RMSNorm of the CPU reference (yoco::rms_norm, float, with
// weight) over rows × d. No matrix products, so bytes only: read x, write y,
// read the weight (op_work.hpp). 16 rows (a decode batch) stay in cache and
// show per-call cost; 4096 rows (64 MiB at d = 4096) show memory bandwidth.
// The time includes allocating y, as the reference returns it by value.
#include <benchmark/benchmark.h>

#include "micro_counters.hpp"
#include "micro_main.hpp"
#include "op_work.hpp"
#include "ops.hpp"

namespace {

using yoco::Mat;
using yoco::Vec;
using namespace yoco::micro;

void BM_RmsNorm(benchmark::State& st) {
  const int64_t rows = st.range(0), d = st.range(1);
  const Mat<float> x = Mat<float>::Random(rows, d);
  const Vec<float> w = Vec<float>::Constant(d, 1.0f) + 0.25f * Vec<float>::Random(d);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::rms_norm<float>(x, w.data(), 1e-5));
  set_work_counters(st, rms_norm_work(rows, d, sizeof(float)));
}

// d of the 160m, 400m, 1.4b, 3b and 6.8b presets.
BENCHMARK(BM_RmsNorm)
    ->ArgNames({"rows", "d"})
    ->ArgsProduct({{16, 4096}, {768, 1024, 2048, 3072, 4096}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

YOCO_MICRO_MAIN();
