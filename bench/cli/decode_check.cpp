#include "decode_check.hpp"

#include <cmath>
#include <stdexcept>

namespace yoco::cli {

double decode_check_tolerance(Precision p) { return p == Precision::f64 ? 1e-9 : 1e-4; }

namespace {
// Keeps NaN once seen, so that a NaN can never be hidden by a later number.
void take_max(double& acc, double x) {
  if (std::isnan(x) || x > acc) acc = std::isnan(acc) ? acc : x;
}
}  // namespace

DecodeCheck check_decode_against_forward(const ModelRunner& runner, const TokenBatch& prompt, const GreedyRun& run) {
  if (static_cast<int64_t>(run.logits.size()) != run.gen + 1)
    throw std::logic_error("check_decode_against_forward: the run did not keep its logits");
  const int64_t B = prompt.batch, N = prompt.length, M = run.gen, L = N + M;
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    seqs[b].assign(prompt.ids.begin() + b * N, prompt.ids.begin() + (b + 1) * N);
    seqs[b].insert(seqs[b].end(), run.generated[b].begin(), run.generated[b].end());
  }
  const Mat<double> full = runner.forward(TokenBatch::from_sequences(seqs), GretParadigm::parallel);

  DecodeCheck c;
  c.positions = M + 1;
  c.sequences = B;
  c.tolerance = decode_check_tolerance(runner.precision());
  for (int64_t j = 0; j <= M; ++j) {
    for (int64_t b = 0; b < B; ++b) {
      const auto cached = run.logits[j].row(b);
      const auto ref = full.row(b * L + N - 1 + j);
      if (!cached.allFinite() || !ref.allFinite()) {  // NaN or inf anywhere fails
        take_max(c.max_abs_diff, NAN);
        take_max(c.max_rms_ratio, NAN);
        continue;
      }
      take_max(c.max_abs_diff, (cached - ref).cwiseAbs().maxCoeff());
      take_max(c.max_rms_ratio, rms_ratio(cached, ref));
    }
  }
  c.pass = !std::isnan(c.max_abs_diff) && !std::isnan(c.max_rms_ratio) && c.max_rms_ratio <= c.tolerance;
  return c;
}

}  // namespace yoco::cli
