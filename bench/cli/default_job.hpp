#pragma once
// The suite's main job on a machine without a GPU (README quick start): a small
// measured CPU sweep plus the analytic projection of the paper's 3B models on an
// H100, written as CSVs, then the report regenerated.
#include "args.hpp"
#include "sweep.hpp"

namespace yoco::cli {

// yoco-tiny and transformer-tiny at 2K-32K, gen 1024, 3 repeats after 1 warm-up,
// 64 decode steps sampled, 60 s budget per point.
SweepSettings default_cpu_sweep();
// Options given beside --default-job override the CPU sweep's settings.
SweepSettings sweep_settings(const ParsedArgs& a, const SweepSettings& defaults);
int run_default_job(const ParsedArgs& a);

}  // namespace yoco::cli
