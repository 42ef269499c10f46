// Google Benchmark: the SwiGLU FFN of the CPU reference
// (yoco::swiglu_ffn = W2 (silu(W1 x) ⊙ W3 x), float) at tokens × d × F.
// Three GEMMs, 6·T·d·F FLOPs; bytes are x, y and the three weights
// (op_work.hpp). T = 1 is a decode step: weight-bound, read B/s; large T is
// compute-bound, read FLOP/s.
#include <benchmark/benchmark.h>

#include <cmath>

#include "micro_counters.hpp"
#include "micro_main.hpp"
#include "op_work.hpp"
#include "ops.hpp"

namespace {

using yoco::Mat;
using namespace yoco::micro;

void BM_SwigluFfn(benchmark::State& st) {
  const int64_t t = st.range(0), d = st.range(1), f = st.range(2);
  const Mat<float> x = Mat<float>::Random(t, d);
  // Weights scaled 1/sqrt(in), as the models initialise them.
  const Mat<float> w1 = Mat<float>::Random(f, d) / std::sqrt(float(d));
  const Mat<float> w3 = Mat<float>::Random(f, d) / std::sqrt(float(d));
  const Mat<float> w2 = Mat<float>::Random(d, f) / std::sqrt(float(f));
  for (auto _ : st) benchmark::DoNotOptimize(yoco::swiglu_ffn<float>(x, w1, w3, w2));
  set_work_counters(st, swiglu_ffn_work(t, d, f, sizeof(float)));
  set_rate_counter(st, "tokens/s", double(t));
}

// {T, d, F}: the tiny presets (d 64, F 192), yoco-160m (768, 3·768) and
// yoco-400m (1024, 3·1024), at a decode step and at prefill chunks.
BENCHMARK(BM_SwigluFfn)
    ->ArgNames({"T", "d", "F"})
    ->Args({256, 64, 192})
    ->Args({1, 768, 2304})
    ->Args({256, 768, 2304})
    ->Args({1, 1024, 3072})
    ->Args({256, 1024, 3072})
    ->Args({1024, 1024, 3072})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

YOCO_MICRO_MAIN();
