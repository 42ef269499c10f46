#pragma once
// The suite's main job (README quick start). On a machine with a GPU (and the
// cuda preset): the paper's sweep, yoco-3b vs transformer-3b at 32K-1M on the
// CUDA runners with the CUPTI breakdown (--quick: 32K and 128K); without one:
// a small measured CPU sweep. Then the analytic projection of the paper's 3B
// models on an H100, written as CSVs, and the report regenerated.
#include "args.hpp"
#include "sweep.hpp"

namespace yoco::cli {

// yoco-tiny and transformer-tiny at 2K-32K, gen 1024, 3 repeats after 1 warm-up,
// 64 decode steps sampled, 60 s budget per point.
SweepSettings default_cpu_sweep();
// yoco-3b and transformer-3b at 32K-1M (quick: 32K, 128K), gen 1024, 3 repeats
// after 1 warm-up, 64 decode steps sampled, 120 s budget per point, throughput
// batch up to 1024, --cupti.
SweepSettings default_gpu_sweep(bool quick);
// Options given beside --default-job override the CPU sweep's settings.
SweepSettings sweep_settings(const ParsedArgs& a, const SweepSettings& defaults);
int run_default_job(const ParsedArgs& a);

}  // namespace yoco::cli
