#pragma once
// Greedy generation through a ModelRunner, timed: the inference protocol of
// DESIGN.md §4 (prefill = time to first token, then one decode step per token).
#include <cstdint>
#include <functional>
#include <vector>

#include "memory.hpp"
#include "model_runner.hpp"

namespace yoco::cli {

// Index of the largest logit; ties go to the lowest id (NaNs never win).
int64_t argmax_lowest(const Eigen::Ref<const RowVec<double>>& logits);

struct GreedyRun {
  int64_t prompt_len = 0, gen = 0, batch = 0;
  // generated[b][j], j < gen: token j of sequence b.
  std::vector<std::vector<int64_t>> generated;
  // logits[0]: the prefill's (last prompt position, predicts generated token 0);
  // logits[1 + j]: decode step j's, after feeding generated token j (predicts
  // token j + 1; the last one predicts a token past `gen`, never emitted).
  // Each [batch, vocab]. Empty unless kept.
  std::vector<Mat<double>> logits;
  double prefill_s = 0.0;
  std::vector<double> step_s;  // one per decode step
  // Caches at the end; activations = the larger peak of prefill and decode.
  MemoryBreakdown memory;
  double decode_s_per_step() const;  // mean; 0 without steps
};

// Prefill (cache sized for prompt + gen, the given chunk), then `gen` decode
// steps that feed each generated token back, so that the cache ends exactly
// full. gen = 0: prefill only. `after_step(j, run)`, when given, follows decode
// step j (0-based), untimed.
GreedyRun run_greedy(ModelRunner& runner, const TokenBatch& prompt, int64_t gen, int64_t prefill_chunk,
                     bool keep_logits,
                     const std::function<void(int64_t, const GreedyRun&)>& after_step = {});

}  // namespace yoco::cli
