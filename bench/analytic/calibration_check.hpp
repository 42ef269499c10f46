#pragma once
// The calibrated model held against measured points: every measured point of a result file predicted
// on the ceilings the check names (the calibration's own, a card's datasheet scaled, or the rows' own).
#include <cstdint>
#include <string>
#include <vector>

#include "calibrated_model.hpp"

namespace yoco::cost {

// One measured point beside the calibrated model's prediction for it.
struct CalibrationCheck {
  std::string model, phase;
  int64_t seq_len = 0, batch = 1, gen_tokens = 0;
  std::string metric;  // prefill_latency_s, decode_step_latency_s, throughput_tokens_per_s, mem_total_bytes
  double measured = 0, predicted = 0;
  // Why the prediction has no band (CalibratedPhase::unbanded: a family at the roofline or fitted on
  // fewer than kMinBandPoints points); "" where it has one, and for memory (the runners' formula).
  std::string unbanded;
  double ratio() const { return predicted / measured; }
};

// The ceilings a check of `rows` divides by (yoco calibrate --ceilings), and
// what they are, in words for the output:
//   "auto": the calibration's own measured ceilings when the rows come from the
//     kind of card it was fitted on (by datasheet name) or name no card; else
//     the rows' card's datasheet scaled by the calibration's measured /
//     datasheet ratios: the projection `yoco model --calibration --device-spec`
//     made before that card ran (the out-of-sample test of a second card);
//     a card with no datasheet here: its own measured ceilings, as "run";
//   "run": the rows' own measured ceilings (phase ceiling): the calibration's
//     efficiencies on the card's measured rates;
//   a datasheet name (h100, h200, b200): that card's datasheet, scaled.
// InputError naming `source` (or --ceilings) when the rows lack what the mode needs.
struct CheckCeilings {
  DeviceSpec ceil;
  std::string how;
};
CheckCeilings check_ceilings(const std::vector<ResultRow>& rows, const Calibration& c, const std::string& mode,
                             const std::string& source);

// Every measured point of `rows` (their models' presets, batch and gen as the
// rows have them) predicted by `c` on `ceil`; without it, on the "auto"
// ceilings above. InputError naming `source` (the rows' file) for a point
// with batch 0.
std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c,
                                                const DeviceSpec& ceil, const std::string& source = "the rows");
std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c);


}  // namespace yoco::cost
