// Google Benchmark: causal GQA softmax self-attention of the CPU reference
// (yoco::attention, float, batch 1, scale Da^-1/2), the cross-decoder's and the
// Transformer's attention at prefill. Shapes: head dims 64 and 128, 4 or 8
// query heads, groups of 1 (MHA) and 4 (the presets' Hkv = H/4), and one
// sliding-window case (the SWA self-decoder, window 1024). FLOPs and bytes:
// op_work.hpp (FlashAttention's count: causal = half of 4·S²·H·Da).
#include <benchmark/benchmark.h>

#include <cmath>

#include "micro_counters.hpp"
#include "micro_main.hpp"
#include "op_work.hpp"
#include "ops.hpp"

namespace {

using yoco::Mat;
using namespace yoco::micro;

void BM_Attention(benchmark::State& st) {
  const int64_t s = st.range(0), h = st.range(1), hkv = st.range(2), da = st.range(3), window = st.range(4);
  // Uniform [-1, 1) entries: scaled scores have std 1/3, so the softmax is
  // spread over many keys (no early-out anywhere, all shapes do equal work).
  const Mat<float> q = Mat<float>::Random(s, h * da);
  const Mat<float> k = Mat<float>::Random(s, hkv * da);
  const Mat<float> v = Mat<float>::Random(s, hkv * da);
  const double scale = 1.0 / std::sqrt(double(da));
  for (auto _ : st) benchmark::DoNotOptimize(yoco::attention<float>(q, k, v, h, hkv, da, 0, 0, window, scale));
  set_work_counters(st, attention_work(1, s, h, hkv, da, window, sizeof(float)));
  set_rate_counter(st, "tokens/s", double(s));
}

// {S, H, Hkv, Da, window}
void attention_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t s : {256, 1024, 4096}) {
    b->Args({s, 4, 4, 64, 0});   // MHA, Da 64 (yoco-swa-160m's self-attention heads, no window)
    b->Args({s, 8, 2, 64, 0});   // group 4, Da 64 (160m/400m cross-attention)
    b->Args({s, 8, 8, 128, 0});  // MHA, Da 128
    b->Args({s, 8, 2, 128, 0});  // group 4, Da 128 (6.8b: 8 of its 32 heads, 2 of its 8 KV heads)
  }
  b->Args({4096, 4, 4, 64, 1024});  // sliding window 1024: ~7/16 of the causal pairs
}

BENCHMARK(BM_Attention)
    ->ArgNames({"S", "H", "Hkv", "Da", "W"})
    ->Apply(attention_shapes)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

YOCO_MICRO_MAIN();
