#include "verdict.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"

namespace yoco::check {

namespace {
double ratio(double num2, double den2) { return den2 > 0 ? std::sqrt(num2 / den2) : (num2 > 0 ? INFINITY : 0.0); }
}  // namespace

void refuse_unjudgeable(const CheckReport& rep, const std::string& inputs, const std::string& scaled) {
  for (const auto& v : rep.verdicts)
    if (!v.unjudgeable.empty())
      throw InputError(inputs + ": " + v.unjudgeable + "; the inputs or --scale are out of range (" + scaled + ")");
}

bool CheckReport::pass() const {
  return !verdicts.empty() && std::all_of(verdicts.begin(), verdicts.end(), [](const TensorVerdict& v) { return v.pass; });
}

ErrorAccumulator::ErrorAccumulator(int64_t tokens)
    : tok_err2_(static_cast<size_t>(tokens), 0.0),
      tok_emu2_(static_cast<size_t>(tokens), 0.0),
      tok_bad_(static_cast<size_t>(tokens), 0) {}

TensorVerdict ErrorAccumulator::verdict(const std::string& name, const std::string& dtype,
                                        std::optional<double> tolerance, const std::string& derived_from,
                                        int64_t values_per_token, int64_t tokens_per_batch) const {
  TensorVerdict v;
  v.name = name;
  v.dtype = dtype;
  v.elements = n_;
  v.rms_ratio = ratio(err2_, ref2_);
  v.max_abs = std::max(0.0, max_abs_);
  v.max_where = max_where_;
  v.nonfinite = nonfinite_;
  if (tolerance) {
    v.tolerance = *tolerance;
    v.tolerance_from = "--tolerance";
  } else {
    v.tolerance = std::max(2.0 * ratio(emu2_, ref2_), 1e-12);
    v.tolerance_from = derived_from;
  }
  // The sums of squares overflow before the values do (|x| > 1e154): an RMS
  // ratio of inf / inf, or of NaN sums, said 0 and passed.
  if (ref_nonfinite_)
    v.unjudgeable = "the fp64 reference of '" + name + "' is not finite (" + std::to_string(ref_nonfinite_) +
                    " values, the first at " + ref_nonfinite_where_ + "): nothing to judge against";
  else if (!std::isfinite(ref2_))
    v.unjudgeable = "the fp64 reference of '" + name + "' is too large to measure errors against (its sum of squares "
                    "overflows)";
  else if (!tolerance && (emu_nonfinite_ || !std::isfinite(emu2_)))
    v.unjudgeable = "the emulation that sets the tolerance of '" + name + "' overflows" +
                    (emu_nonfinite_ ? " (the first at " + emu_nonfinite_where_ + ")" : std::string()) +
                    ": give --tolerance";
  v.pass = v.unjudgeable.empty() && v.nonfinite == 0 && v.rms_ratio <= v.tolerance;
  // The first token past the tolerance: its RMS error (over heads and
  // columns) is beyond the tolerance against the whole output's reference RMS,
  // and beyond twice the emulation's error on that same token (one token's
  // error scatters around the average: a correct output's worst token is
  // not a bad one). An offset that wraps shows where it starts.
  const double ref_rms = n_ > 0 ? std::sqrt(ref2_ / static_cast<double>(n_)) : 0.0;
  const double k = tolerance ? 1.0 : 2.0;  // with --tolerance, that alone decides
  for (size_t t = 0; t < tok_err2_.size(); ++t) {
    const double tok_rms = std::sqrt(tok_err2_[t] / static_cast<double>(values_per_token));
    const bool past_tolerance = ref_rms > 0 && tok_rms / ref_rms > v.tolerance;
    const bool past_emulation = tolerance || tok_err2_[t] > k * k * tok_emu2_[t];
    if (tok_bad_[t] || (past_tolerance && past_emulation)) {
      v.first_bad_token = static_cast<int64_t>(t);
      v.first_bad_where = "batch " + std::to_string(static_cast<int64_t>(t) / tokens_per_batch) + ", token " +
                          std::to_string(static_cast<int64_t>(t) % tokens_per_batch);
      break;
    }
  }
  return v;
}

}  // namespace yoco::check
