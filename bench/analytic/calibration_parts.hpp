#pragma once
// What the calibration's files share (calibration_fit.cpp, calibrated_model.cpp, calibration_file.cpp,
// calibration_check.cpp): the families' parts and rooflines, the layers that run a family, the
// runners' host calls and gRet plan for a prefill step, a row's preset, a run's measured ceilings.
// Internal to bench/analytic.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "calibration.hpp"
#include "gret/gret_plan.hpp"
#include "runner/launch_count.hpp"

namespace yoco::cost::calibration_detail {

// The cost model's parts each family covers, and the CUPTI families of the
// sweep (harness/kernel_family) each covers.
const std::vector<Part>& parts_of(Family f);
const std::vector<std::string>& cupti_families_of(Family f);
// Layers that run a family: every layer has GEMMs and norms; attention runs in
// the Transformer's layers and YOCO's cross-decoder (and SWA self-decoder)
// layers; gRet in YOCO's gRet self-decoder.
double layers_of(const ModelConfig& cfg, Family f);
double family_roofline(const PhaseWork& w, Family f, const DeviceSpec& dev);
Bound family_bound(const PhaseWork& w, Family f, const DeviceSpec& dev);
// One resource's share of the family's roofline: its FLOPs at the peak or
// its bytes at the bandwidth, part by part.
double bound_roofline(const PhaseWork& w, Family f, Bound b, const DeviceSpec& dev);
double median(std::vector<double> v);
// The gRet chunk plan the library picks for a prefill step of `rows` tokens of
// each of `batch` sequences on `sms` SMs.
cuda::GretChunkShape gret_step_shape(const ModelConfig& cfg, int64_t batch, int64_t rows);
int sms_for(const Calibration& c, const DeviceSpec& dev);
// The runners' host calls for `batch` sequences prefilled `rows` tokens a step.
// ffn_fused_from_rows: KernelView's (0: never).
cuda::RunnerLaunches launches_of(const ModelConfig& cfg, int64_t batch, int64_t rows, int sms,
                                 bool batched_global_kv = cuda::kBatchedGlobalKvByDefault,
                                 int64_t ffn_fused_from_rows = 0);
// The preset of a row's model; nullopt for pairs ("a vs b"), "-" and files.
std::optional<ModelConfig> preset_of(const std::string& model);
// A measured row of a preset model is a point the fit and the check compute at:
// InputError naming `source` and the row when its batch is 0 (only the
// ratio rows of a pair carry batch 0; the cost model needs >= 1 sequence).
void require_point_batch(const ResultRow& r, const std::string& source);

// A run's measured ceilings (phase ceiling: the GEMM rate and the copy bandwidth of the same run)
// and the card and commit they name; the last of each where a file holds several.
struct RunCeilings {
  std::string card, fitted_at;
  double peak_flops = 0, bandwidth = 0;
};
RunCeilings run_ceilings(const std::vector<ResultRow>& rows);

}  // namespace yoco::cost::calibration_detail
