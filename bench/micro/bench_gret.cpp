// Google Benchmark: the three gRet paradigms of the CPU reference (float, one
// head, no initial state) across lengths, at the head dims of yoco-3b (D = 128)
// and of the scaling family (D = 256). The parallel form grows as n², the
// recurrent and chunkwise forms linearly; tokens/s compares them directly.
// FLOPs and bytes: op_work.hpp (the parallel form is credited with the causal
// half of its n×n products, like attention).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "gret.hpp"
#include "micro_counters.hpp"
#include "micro_main.hpp"
#include "op_work.hpp"
#include "ops.hpp"

namespace {

using yoco::Mat;
using yoco::Vec;
using namespace yoco::micro;

struct Inputs {
  Mat<float> q, k, v;
  Vec<float> g;
};

// Gaussian q, k, v (k scaled by D^-1/2 as in the model) and log-decays
// logsigmoid(z)/16 of a Gaussian z, the model's range (γ in ~[0.73, 1)).
Inputs make_inputs(int64_t n, int64_t d) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  Inputs in{Mat<float>(n, d), Mat<float>(n, d), Mat<float>(n, d), Vec<float>(n)};
  for (auto* m : {&in.q, &in.k, &in.v})
    for (int64_t i = 0; i < m->size(); ++i) m->data()[i] = nd(rng);
  in.k *= 1.0f / std::sqrt(float(d));
  for (int64_t i = 0; i < n; ++i) in.g(i) = yoco::logsigmoid(nd(rng)) / 16.0f;
  return in;
}

void finish(benchmark::State& st, int64_t n, const Work& w) {
  set_work_counters(st, w);
  set_rate_counter(st, "tokens/s", double(n));
}

void BM_GretParallel(benchmark::State& st) {
  const int64_t n = st.range(0), d = st.range(1);
  const auto in = make_inputs(n, d);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::gret_parallel<float>(in.q, in.k, in.v, in.g, nullptr));
  finish(st, n, gret_parallel_work(n, d, 1, false, sizeof(float)));
}

void BM_GretRecurrent(benchmark::State& st) {
  const int64_t n = st.range(0), d = st.range(1);
  const auto in = make_inputs(n, d);
  for (auto _ : st) benchmark::DoNotOptimize(yoco::gret_recurrent<float>(in.q, in.k, in.v, in.g, nullptr));
  finish(st, n, gret_recurrent_work(n, d, 1, false, sizeof(float)));
}

void BM_GretChunkwise(benchmark::State& st) {
  const int64_t n = st.range(0), d = st.range(1), chunk = st.range(2);
  const auto in = make_inputs(n, d);
  for (auto _ : st)
    benchmark::DoNotOptimize(yoco::gret_chunkwise<float>(in.q, in.k, in.v, in.g, nullptr, chunk));
  finish(st, n, gret_chunkwise_work(n, d, chunk, 1, false, sizeof(float)));
}

// n² memory and time: stop at 4096 (a 64 MiB decay matrix, ~0.1 s a call).
BENCHMARK(BM_GretParallel)
    ->ArgNames({"n", "D"})
    ->ArgsProduct({{256, 1024, 4096}, {128, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GretRecurrent)
    ->ArgNames({"n", "D"})
    ->ArgsProduct({{256, 1024, 4096, 16384}, {128, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// The authors' chunk (256) and the common 64.
BENCHMARK(BM_GretChunkwise)
    ->ArgNames({"n", "D", "chunk"})
    ->ArgsProduct({{256, 1024, 4096, 16384}, {128, 256}, {64, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

YOCO_MICRO_MAIN();
