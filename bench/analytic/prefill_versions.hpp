#pragma once
// The prefill attention kernel's version in the calibrated model. The fit's
// compute-bound prefill attention is one flash prefill version's (the
// committed H100 sweep ran v2); the runners run another now (v3 on Hopper at
// head dim 128, v1 at other head dims), and so did other cards' runs. So the
// model holds, from the calibration card's own kernel benchmark, each
// version's time over the fit version's, and prices a point's prefill
// attention at the version that point ran. Internal to bench/analytic.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "calibration.hpp"

namespace yoco::cost::calibration_detail {

// The flash prefill version each point of a file's rows ran: the words its
// rows' notes carry ("attention prefill vN", the CUDA runners' since the model
// prices versions), else its CUPTI kernel rows (phase prefill:<kernel>,
// kernel_time_s: the flash prefill kernel with the most time), else what the
// other points of the same model and commit in the file say where they agree;
// 0 where nothing says.
class PrefillVersions {
 public:
  explicit PrefillVersions(const std::vector<ResultRow>& rows);
  int of(const ResultRow& point_row) const;

 private:
  using Point = std::tuple<std::string, std::string, int64_t, int64_t>;  // commit, model, seq_len, batch
  std::map<Point, std::map<int, double>> kernels_;  // version -> the point's prefill time in it
  std::map<Point, int> said_;                       // notes' words
  std::map<std::pair<std::string, std::string>, int> by_model_;  // (commit, model): -1 where points differ
  int of_point(const Point& p) const;
};

// The version the runners run now for cfg's prefill attention (its SWA
// self-decoder's for YOCO), on the Hopper path: the calibration's
// efficiencies are Hopper kernels', carried to any card it projects to.
int runner_prefill_version(const ModelConfig& cfg);

// The factor on cfg's compute-bound prefill attention time for a point that
// ran `version` (0: the runners' now): the calibration's time ratio of that
// version to its fit's; 1 where the fit names no version, the version is the
// fit's, or the ratio was not measured. `note` gets what the factor is ("" for 1
// by the fit's own version or without one).
double prefill_version_scale(const Calibration& c, const ModelConfig& cfg, int version, std::string* note);

}  // namespace yoco::cost::calibration_detail
