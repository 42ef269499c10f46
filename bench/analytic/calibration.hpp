#pragma once
// The calibrated cost model: the roofline (cost_model.hpp) corrected by what
// one device measured. Per phase (prefill, decode step) and kernel family
// (the CUPTI families of the sweep: gemm, which includes the LM head,
// attention, gret, norms and the other element-wise kernels), a family's time
// is
//     roofline time of its parts x inverse_efficiency + layers x per_layer_s
// (the first term the kernels' sustained fraction of the ceilings, the second
// the fixed cost of launches and small tails, per layer that has the family),
// fitted apart for work that is compute-bound and memory-bound on the device
// (by the family's own roofline: the Transformer's prefill attention is a
// compute-bound flash kernel, YOCO's last-position cross attention in the same
// phase a memory-bound decode kernel), and no shorter than the other
// resource's share at that resource's fitted rate (work near the balance point
// is bound by whichever runs out first once efficiencies count); the phase's
// time is the families' sum times (1 + host gap fraction). The prefill's
// attention is counted as the kernel computes it, in query tiles
// (cuda/attention/attention_tiles.hpp: kPrefillTileRows).
// Memory: the runners' own buffers by the runners' own formula
// (cuda/runner/generation_bytes.hpp: weights, caches, states, a prefill
// step's and the decode step's activations, the gRet chunk workspace of the
// plan the library picks for the card's SM count, cuBLAS's workspace), not a
// fit; the context's `other` (device-wide) stays beside it, as in the rows.
// The fit is least squares, non-negative, over the points of a sweep that
// carry a CUPTI breakdown; a family without points keeps the roofline
// (inverse_efficiency 1, no overhead) and says so.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "cost_model.hpp"
#include "device_spec.hpp"
#include "result_row.hpp"

namespace yoco::cost {

using cli::Provenance;
using cli::ResultRow;

// Flash prefill versions a calibration can hold a time ratio for (cuda/attention/prefill_version.hpp:
// kFlashPrefillVersions; calibration_file.cpp checks that they agree).
inline constexpr int kPrefillVersionSlots = 3;

enum class Family { gemm, attention, gret, norms };
inline constexpr int kFamilies = 4;
const char* family_name(Family f);  // "gemm", "attention", "gret", "norms"
enum class Bound { compute, memory };
const char* bound_name(Bound b);  // "compute", "memory"

// The fewest points a family's fit gives a band from: the fit has two
// parameters (inverse_efficiency, per_layer_s), so through one or two points
// it passes exactly and its worst residual is 0 whatever its error (two decode
// points of one model gave norms an inverse efficiency of 359 at 0.0%); a
// third point is the first the fit can miss. Below it the fit stands but its
// band is unknown, and every prediction that uses it says so.
inline constexpr int kMinBandPoints = 3;

struct FamilyFit {
  double inverse_efficiency = 1.0;  // measured / roofline, in the large-problem limit
  double per_layer_s = 0.0;         // fixed seconds per layer that has the family
  int points = 0;                   // 0: not fitted, the roofline stands
  double worst_residual = 0.0;      // largest |fit / measured - 1| over its points
  // The worst residual bounds the error only past kMinBandPoints points.
  bool banded() const { return points >= kMinBandPoints; }
};

struct Calibration {
  std::string source;       // the file it was read from, or what it was fitted on
  std::string fitted_on;    // what it was fitted on (a file read says it in its notes; empty if not)
  std::string device_name;  // the device of the measurements
  std::string fitted_at;    // commit and date of the fit (projections keep them)
  // The ceilings the fit's rooflines used (the run's own), and the datasheet
  // of that device: a projection to another card scales the datasheet ratios.
  double peak_flops = 0, bandwidth = 0;
  double datasheet_flops = 0, datasheet_bandwidth = 0;
  // [family][bound]
  std::array<std::array<FamilyFit, 2>, kFamilies> prefill{}, decode{};
  double prefill_gap = 0, decode_gap = 0;  // host gaps: fraction of the kernels' time
  double other_bytes = 0;  // the CUDA context, libraries (median of mem_other_bytes; not in mem_total_bytes)
  // The host's seconds to enqueue one call (launch, cuBLAS call, copy):
  // the eager decode steps' host enqueue time over the runner's calls
  // (cuda/runner/launch_count.hpp), median over the points; 0 (no host floor)
  // when the sweep has no eager steps.
  double host_call_s = 0;
  int host_points = 0;
  // The host's seconds a call of a prefill (its cuBLAS calls cost more there
  // than a decode step's: run-17's small presets): the prefills' own host
  // time (prefill_host_enqueue_s) over their calls, median over the batch-1
  // points that have it; 0 (the decode steps' host_call_s instead) without.
  double prefill_host_call_s = 0;
  int prefill_host_points = 0;
  int sm_count = 0;        // the measured card's (its datasheet's), for the gRet plan where a target has none
  // The prefill attention kernel the fit's compute-bound prefill attention
  // ran (flash prefill v1..v3, by the sweep's CUPTI kernel names or its
  // rows' notes); 0 where they name none: then no point's attention is
  // priced by version.
  int attention_prefill_fit_version = 0;
  // Version v's time over the fit version's on the calibration's card, at
  // [v - 1]: the median over the shapes its kernel benchmark ran both at
  // (add_kernel_bench; shapes at [v - 1]); 0 where not measured. A point that
  // ran another version (a later runner, another head dim's kernel) has its
  // compute-bound prefill attention scaled by it.
  std::array<double, kPrefillVersionSlots> attention_prefill_time_ratio{};
  std::array<int, kPrefillVersionSlots> attention_prefill_ratio_shapes{};
  // Where the ratios were measured: "FILE (commit date)" of the kernel benchmark; "" where none.
  std::string kernel_bench;
  // A what-if's version every flash prefill is priced at, whatever it ran
  // (apply_what_if "attention_prefill=vN"); 0: each at its own. Not in the file.
  int attention_prefill_priced_as = 0;
  const FamilyFit& fit(bool prefill_phase, Family f, Bound b) const {
    return (prefill_phase ? prefill : decode)[static_cast<int>(f)][static_cast<int>(b)];
  }
};

// Fits from a sweep's rows: the CUPTI family times (gpu_time_s, phases
// prefill.<family> / decode.<family>), the analytic rooflines of the same
// points (roofline_time_s of prefill.<part>), measured latencies and memory.
// InputError when no point has both.
Calibration fit_calibration(const std::vector<ResultRow>& rows, const std::string& source);

// Adds the prefill attention versions' time ratios (Calibration::
// attention_prefill_time_ratio) from a kernel benchmark's rows of the
// calibration's card (attn_prefill:D<d> v<N>[ shape], kernel_time_s): each
// version against the fit's at the same model, length, head dim and shape.
// InputError naming `source` where the rows are another card's, the fit names
// no version, or no shape has the fit's version beside another.
void add_kernel_bench(Calibration& c, const std::vector<ResultRow>& kernel_rows, const std::string& source);

// As result rows (reports/SCHEMA.md; device "calibration", phase
// "calibration:<phase>.<family>", metrics inverse_efficiency, per_layer_s,
// points, worst_residual; ...), and back. read_calibration: InputError naming
// the file and line for a row it does not know or a bad value.
std::vector<ResultRow> calibration_rows(const Calibration& c, const Provenance& prov);
Calibration read_calibration(const std::string& path);
// InputError naming `source` and the row where a value of calibration_rows is
// one read_calibration refuses (a fit off by more than 100% on a point, a
// ceiling past 1e6): checked before such a file is written.
void require_readable(const std::vector<ResultRow>& calibration, const std::string& source);

// The ceilings the calibrated model divides by on `dev`: the calibration's own
// when dev is its datasheet (or has no rates), else dev's datasheet scaled by
// the calibration's measured-over-datasheet ratios.
DeviceSpec calibrated_ceilings(const Calibration& c, const DeviceSpec& dev);

// What-if: one family's fits (both phases; one bound or both) replaced: by
// the roofline ("ceiling": inverse efficiency 1, no fixed cost) or by an
// efficiency X in [1e-9, 1] (e.g. a peer's measured fraction of the ceiling).
// `spec` is FAMILY[.BOUND]=ceiling|X; or attention_prefill=vN: every point's
// prefill attention at flash prefill version N's time (the calibration's
// kernel-benchmark ratio), whatever version it ran. InputError naming
// --what-if otherwise. Returns a description for the rows' notes.
std::string apply_what_if(Calibration& c, const std::string& spec);

}  // namespace yoco::cost
