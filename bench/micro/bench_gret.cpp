// Google Benchmark: the three gRet paradigms of the CPU reference across
// lengths, one head of yoco-3b's shape (D = 128), float. The parallel form
// grows as n^2, the recurrent and chunkwise forms linearly. Counters give the
// FLOP rate (matmul FLOPs of each form as computed) and the rate of the q, k,
// v, o bytes that any form must move once.
#include <benchmark/benchmark.h>

#include <random>

#include "gret.hpp"
#include "ops.hpp"

namespace {

using yoco::Mat;
using yoco::Vec;
constexpr int64_t kD = 128;

struct Inputs {
  Mat<float> q, k, v;
  Vec<float> g;
};

Inputs make_inputs(int64_t n) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  Inputs in{Mat<float>(n, kD), Mat<float>(n, kD), Mat<float>(n, kD), Vec<float>(n)};
  for (auto* m : {&in.q, &in.k, &in.v})
    for (int64_t i = 0; i < m->size(); ++i) m->data()[i] = nd(rng);
  in.k *= 1.0f / std::sqrt(float(kD));
  for (int64_t i = 0; i < n; ++i) in.g(i) = yoco::logsigmoid(nd(rng)) / 16.0f;
  return in;
}

void set_counters(benchmark::State& st, int64_t n, double flops_per_call) {
  using benchmark::Counter;
  st.counters["FLOP/s"] = Counter(flops_per_call, Counter::kIsIterationInvariantRate, Counter::kIs1000);
  st.counters["bytes/s"] =
      Counter(4.0 * n * kD * sizeof(float), Counter::kIsIterationInvariantRate, Counter::kIs1000);
  st.counters["tokens/s"] = Counter(double(n), Counter::kIsIterationInvariantRate, Counter::kIs1000);
}

void BM_GretParallel(benchmark::State& st) {
  const int64_t n = st.range(0);
  const auto in = make_inputs(n);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::gret_parallel<float>(in.q, in.k, in.v, in.g, nullptr));
  set_counters(st, n, 4.0 * n * n * kD);  // Q K^T and (.)V over the full n x n
}

void BM_GretRecurrent(benchmark::State& st) {
  const int64_t n = st.range(0);
  const auto in = make_inputs(n);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::gret_recurrent<float>(in.q, in.k, in.v, in.g, nullptr));
  set_counters(st, n, 4.0 * n * kD * kD);  // k^T v and q S per token
}

void BM_GretChunkwise(benchmark::State& st) {
  const int64_t n = st.range(0), chunk = st.range(1);
  const auto in = make_inputs(n);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::gret_chunkwise<float>(in.q, in.k, in.v, in.g, nullptr, chunk));
  // Per chunk of B: Q K^T, (.)V (2 B^2 D each), Q S and K^T V (2 B D^2 each).
  set_counters(st, n, double(n) * (4.0 * chunk * kD + 4.0 * kD * kD));
}

BENCHMARK(BM_GretParallel)->RangeMultiplier(2)->Range(256, 4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GretRecurrent)->RangeMultiplier(2)->Range(256, 16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GretChunkwise)
    ->ArgsProduct({benchmark::CreateRange(256, 16384, 2), {64, 256}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
