#pragma once
// The model-level correctness check of DESIGN.md §6: the logits of the cached
// path (chunked prefill, then decode steps) must equal the full forward
// (parallel paradigm, no cache) over prompt + generated tokens.
#include <cstdint>

#include "greedy.hpp"
#include "model_runner.hpp"

namespace yoco::cli {

struct DecodeCheck {
  int64_t positions = 0;  // positions compared per sequence (gen + 1)
  int64_t sequences = 0;
  double max_abs_diff = 0.0;
  double max_rms_ratio = 0.0;  // max over (sequence, position) of yoco::rms_ratio(cached, forward)
  double tolerance = 0.0;      // on the RMS ratio
  bool pass = false;           // NaN anywhere fails
};

// RMS-ratio tolerance: 1e-9 in f64, 1e-4 in f32.
double decode_check_tolerance(Precision p);

// `run` must have kept its logits. Compares, for every sequence, the prefill's
// logits with the forward's at position prompt_len - 1 and decode step j's
// with the forward's at prompt_len + j (gen + 1 positions in all).
DecodeCheck check_decode_against_forward(const ModelRunner& runner, const TokenBatch& prompt, const GreedyRun& run);

}  // namespace yoco::cli
