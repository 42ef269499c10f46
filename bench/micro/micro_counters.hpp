#pragma once
// The work counters every micro-benchmark reports, CPU reference ops now and
// CUDA kernels later, so that all rows carry the same names in the same units
// and a JSON reader needs one rule for all of them (DESIGN.md §5):
//
//   flops   FLOP per iteration              FLOP/s  flops / second
//   bytes   bytes per iteration             B/s     bytes / second
//
// All decimal (kIs1000): the console's "12.3G/s" is 12.3 GFLOP/s or 12.3 GB/s;
// --benchmark_format=json writes the raw numbers ("FLOP/s": 1.23e10).
//
// What counts as work is fixed by the formulas in op_work.hpp, not by what an
// implementation happens to execute, so the rates of two implementations of
// one op are comparable (rate ratio = speed ratio).
//
// Rates divide by the time Google Benchmark uses for the run: register CPU
// benchmarks with ->UseRealTime() (wall time, not the CPU time of the thread),
// and CUDA benchmarks with ->UseManualTime(), passing CUDA-event times to
// state.SetIterationTime().
#include <benchmark/benchmark.h>

namespace yoco::micro {

// Work of one call of an op.
struct Work {
  double flops = 0;  // matmul FLOPs only (op_work.hpp)
  double bytes = 0;  // compulsory traffic: each input/output tensor once
};

// Sets flops, FLOP/s, bytes, B/s. An op without matrix products (RMSNorm)
// reports bytes only: a "0 FLOP/s" column would say nothing.
inline void set_work_counters(benchmark::State& st, const Work& w) {
  using benchmark::Counter;
  if (w.flops > 0) {
    st.counters["flops"] = Counter(w.flops, Counter::kDefaults, Counter::kIs1000);
    st.counters["FLOP/s"] = Counter(w.flops, Counter::kIsIterationInvariantRate, Counter::kIs1000);
  }
  st.counters["bytes"] = Counter(w.bytes, Counter::kDefaults, Counter::kIs1000);
  st.counters["B/s"] = Counter(w.bytes, Counter::kIsIterationInvariantRate, Counter::kIs1000);
}

// A per-iteration count as a rate, e.g. "tokens/s".
inline void set_rate_counter(benchmark::State& st, const char* name, double per_iteration) {
  using benchmark::Counter;
  st.counters[name] = Counter(per_iteration, Counter::kIsIterationInvariantRate, Counter::kIs1000);
}

}  // namespace yoco::micro
