#include "greedy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace yoco::cli {

int64_t argmax_lowest(const Eigen::Ref<const RowVec<double>>& logits) {
  int64_t best = 0;
  for (int64_t i = 1; i < logits.size(); ++i)
    if (logits(i) > logits(best) || (std::isnan(logits(best)) && !std::isnan(logits(i)))) best = i;
  return best;
}

double GreedyRun::decode_s_per_step() const {
  if (step_s.empty()) return 0.0;
  double s = 0;
  for (double t : step_s) s += t;
  return s / static_cast<double>(step_s.size());
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GreedyRun run_greedy(ModelRunner& runner, const TokenBatch& prompt, int64_t gen, int64_t prefill_chunk,
                     bool keep_logits, const std::function<void(int64_t, const GreedyRun&)>& after_step) {
  GreedyRun r;
  r.prompt_len = prompt.length;
  r.gen = gen;
  r.batch = prompt.batch;
  r.generated.assign(static_cast<size_t>(prompt.batch), {});

  auto t0 = std::chrono::steady_clock::now();
  Mat<double> logits = runner.prefill(prompt, gen, prefill_chunk);
  r.prefill_s = seconds_since(t0);
  const int64_t prefill_activations = runner.memory().activations;
  int64_t decode_activations = 0;

  std::vector<int64_t> next(static_cast<size_t>(prompt.batch));
  for (int64_t j = 0; j < gen; ++j) {
    // Token j comes from the logits of the previous call.
    for (int64_t b = 0; b < prompt.batch; ++b) {
      next[b] = argmax_lowest(logits.row(b));
      r.generated[b].push_back(next[b]);
    }
    if (keep_logits) r.logits.push_back(std::move(logits));
    t0 = std::chrono::steady_clock::now();
    logits = runner.decode_step(next);
    r.step_s.push_back(seconds_since(t0));
    decode_activations = std::max(decode_activations, runner.memory().activations);
    if (after_step) after_step(j, r);
  }
  if (keep_logits) r.logits.push_back(std::move(logits));
  r.memory = runner.memory();
  r.memory.activations = std::max(prefill_activations, decode_activations);
  return r;
}

}  // namespace yoco::cli
