#pragma once
// The verdict of `yoco check` on one output tensor, and the report of one
// check, shared by every kind (gret, attention): the RMS error ratio
// (DESIGN.md §6), the largest error and where, the non-finite values, the
// first token past the tolerance, and the tolerance: 2x the error of an
// emulation that rounds the same tensors, or --tolerance.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace yoco::check {

struct TensorVerdict {
  std::string name, dtype;
  int64_t elements = 0;
  double rms_ratio = 0;          // RMS(candidate - reference) / RMS(reference)
  double max_abs = 0;            // largest |candidate - reference|
  std::string max_where;         // where it is, in the kind's words
  int64_t nonfinite = 0;         // NaN or infinite candidate values
  int64_t first_bad_token = -1;  // first token (of the whole [B, T] order) past the tolerance; -1: none
  std::string first_bad_where;   // that token as "batch b, token t"
  double tolerance = 0;
  std::string tolerance_from;    // "--tolerance" or how it was derived
  // Why no judgement is possible (empty: it is): a reference that is not
  // finite, or too large to square, or an emulation setting the tolerance
  // that overflows. Never a pass.
  std::string unjudgeable;
  bool pass = false;
};

struct CheckReport {
  std::string kind;                                   // "gret", "attention"
  std::vector<std::pair<std::string, int64_t>> shape;  // ("B", 1), ("T", 65536), ...
  int64_t batch = 0, tokens = 0;                      // for result rows
  std::string conventions;                            // one line
  std::vector<TensorVerdict> verdicts;
  std::vector<std::string> not_judged;  // optional outputs absent, one line each: "final_state: not judged (...)"
  bool pass() const;
};

// InputError "<inputs>: <why> (<scaled>)" where a verdict of `rep` is
// unjudgeable: the inputs or the scale, not the candidate, are out of range.
void refuse_unjudgeable(const CheckReport& rep, const std::string& inputs, const std::string& scaled);

// Sums of one output tensor's comparison with the reference and with the
// emulation that sets the tolerance, and per token for the first bad token.
class ErrorAccumulator {
 public:
  // tokens: B * T when per-token errors are tracked (token outputs), 0 for states.
  explicit ErrorAccumulator(int64_t tokens = 0);
  // One element: the candidate's value, the reference's, the emulation's; the
  // token it belongs to (ignored without per-token tracking); `where` is
  // called only when this element is the largest error so far.
  template <class Where>
  void add(double cand, double ref, double emu, int64_t token, Where&& where) {
    if (!std::isfinite(ref) && ref_nonfinite_++ == 0) ref_nonfinite_where_ = where();
    if (!std::isfinite(emu) && emu_nonfinite_++ == 0) emu_nonfinite_where_ = where();
    ref2_ += ref * ref;
    emu2_ += (emu - ref) * (emu - ref);
    if (!tok_emu2_.empty()) tok_emu2_[static_cast<size_t>(token)] += (emu - ref) * (emu - ref);
    ++n_;
    if (!std::isfinite(cand)) {
      ++nonfinite_;
      if (!tok_bad_.empty()) tok_bad_[static_cast<size_t>(token)] = 1;
      return;
    }
    const double e = cand - ref;
    err2_ += e * e;
    if (!tok_err2_.empty()) tok_err2_[static_cast<size_t>(token)] += e * e;
    if (std::abs(e) > max_abs_) {
      max_abs_ = std::abs(e);
      max_where_ = where();
    }
  }
  // The verdict; `values_per_token` (heads x columns) and `tokens_per_batch`
  // place the first bad token.
  TensorVerdict verdict(const std::string& name, const std::string& dtype, std::optional<double> tolerance,
                        const std::string& derived_from, int64_t values_per_token, int64_t tokens_per_batch) const;

 private:
  double err2_ = 0, ref2_ = 0, emu2_ = 0, max_abs_ = -1;
  int64_t n_ = 0, nonfinite_ = 0, ref_nonfinite_ = 0, emu_nonfinite_ = 0;
  std::string max_where_, ref_nonfinite_where_, emu_nonfinite_where_;
  std::vector<double> tok_err2_, tok_emu2_;
  std::vector<char> tok_bad_;
};

}  // namespace yoco::check
