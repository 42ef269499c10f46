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

enum class Family { gemm, attention, gret, norms };
inline constexpr int kFamilies = 4;
const char* family_name(Family f);  // "gemm", "attention", "gret", "norms"
enum class Bound { compute, memory };
const char* bound_name(Bound b);  // "compute", "memory"

struct FamilyFit {
  double inverse_efficiency = 1.0;  // measured / roofline, in the large-problem limit
  double per_layer_s = 0.0;         // fixed seconds per layer that has the family
  int points = 0;                   // 0: not fitted, the roofline stands
  double worst_residual = 0.0;      // largest |fit / measured - 1| over its points
};

struct Calibration {
  std::string source;       // the file it was read from, or what it was fitted on
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
  const FamilyFit& fit(bool prefill_phase, Family f, Bound b) const {
    return (prefill_phase ? prefill : decode)[static_cast<int>(f)][static_cast<int>(b)];
  }
};

// Fits from a sweep's rows: the CUPTI family times (gpu_time_s, phases
// prefill.<family> / decode.<family>), the analytic rooflines of the same
// points (roofline_time_s of prefill.<part>), measured latencies and memory.
// InputError when no point has both.
Calibration fit_calibration(const std::vector<ResultRow>& rows, const std::string& source);

// As result rows (reports/SCHEMA.md; device "calibration", phase
// "calibration:<phase>.<family>", metrics inverse_efficiency, per_layer_s,
// points, worst_residual; ...), and back. read_calibration: InputError naming
// the file and line for a row it does not know or a bad value.
std::vector<ResultRow> calibration_rows(const Calibration& c, const Provenance& prov);
Calibration read_calibration(const std::string& path);

// The ceilings the calibrated model divides by on `dev`: the calibration's own
// when dev is its datasheet (or has no rates), else dev's datasheet scaled by
// the calibration's measured-over-datasheet ratios.
DeviceSpec calibrated_ceilings(const Calibration& c, const DeviceSpec& dev);

struct CalibratedPhase {
  std::array<double, kFamilies> family_s{};  // kernel time per family
  double gap_s = 0;
  double host_s = 0;    // the host's calls (prefill: they bound the phase from below; decode replays a graph)
  double total_s = 0;   // max(kernels + gap, host)
  double band = 0;       // the largest worst residual of the fits it used (its uncertainty, relative)
  std::string fallback;  // families that kept the roofline or borrowed the other bound's fit, "" if none
};
// One prefill or decode step of `cfg` (the cost model's work) on `ceil`
// (calibrated_ceilings).
CalibratedPhase calibrated_phase(const ModelConfig& cfg, const PhaseWork& w, bool prefill_phase,
                                 const Calibration& c, const DeviceSpec& ceil);

// What of the runners' own choices a prediction follows: each a default
// (cuda/runner/launch_count.hpp) that a measured row made before it changed
// did not follow, and that the row's notes say when it did.
struct RunnerLayout {
  bool batched_global_kv = true;  // YOCO's global K/V for the whole batch at batch > 1
  bool delta_in_normed = true;    // YOCO's prefill delta in the normed rows' buffer
  bool ffn_up_fused = false;      // the FFN's up half as one kernel (YOCO_FFN_FUSED=1), where it serves
  int64_t ffn_rows = 0;           // YOCO's prefill FFN in row blocks of this many (YOCO_FFN_ROWS); 0: whole steps
  bool shared_sublayers = true;   // YOCO's prefill sublayers in one buffer (kSharedSublayerBuffers)
};
// The words a row's notes carry when its runner fused the FFN's up half.
const char* ffn_up_fused_note();
// How the runners' kernels do the work of `cfg` laid out as `layout`: the
// prefill attention in the flash kernel's query tiles, the FFN's up half fused
// from the selector's rows on where the layout has it and the shape is served.
KernelView runner_kernels(const ModelConfig& cfg, const RunnerLayout& layout);
// The runners' layout now (the defaults of launch_count.hpp).
RunnerLayout current_runner_layout();
// The layout a measured row was made with, from its notes ("global K/V
// batched"; "delta in the normed rows"; "FFN up half fused"; "one buffer for
// the prefill's sublayers"); rows from before a choice lack its words.
RunnerLayout runner_layout_of_notes(const std::string& notes);
// The words a row's notes carry for `layout`'s departures from the runners'
// defaults that a prediction must follow (the FFN fused, its row blocks), each
// after "; "; "" when there are none.
std::string runner_layout_note(const RunnerLayout& layout);
// The prefill chunk a row's notes name ("prefill chunk N"); rows that name
// none ran the runners' default, 32,768 tokens.
int64_t prefill_chunk_of_notes(const std::string& notes);

// One decode step at `context` as the runners run it (the layout's kernels).
CalibratedPhase calibrated_decode(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                  const DeviceSpec& ceil, int64_t batch, int64_t context, const RunnerLayout& layout);

// A prefill of `batch` prompts of `prompt` tokens as the runners run it:
// steps of batch x prefill_rows_per_sequence tokens (at most `chunk` in all),
// the kernels' calibrated time, or the host's calls where they take longer
// (small models, a few tokens of each sequence a step). `layout`: as which
// runner (RunnerLayout); without it, as the runners are now.
CalibratedPhase calibrated_prefill(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                   const DeviceSpec& ceil, int64_t batch, int64_t prompt, int64_t chunk);
CalibratedPhase calibrated_prefill(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                   const DeviceSpec& ceil, int64_t batch, int64_t prompt, int64_t chunk,
                                   const RunnerLayout& layout);

// Memory as the runner allocates it (mem_total_bytes: weights, caches, state,
// activations) for `batch` sequences of `prompt` + `gen` tokens, prefilled in
// steps of `chunk` tokens, on `dev` (its SM count picks the gRet plan; the
// calibration's card where it has none).
double calibrated_memory(const ModelConfig& cfg, const Calibration& c, const DeviceSpec& dev, int64_t batch,
                         int64_t prompt, int64_t gen, int64_t chunk);
double calibrated_memory(const ModelConfig& cfg, const Calibration& c, const DeviceSpec& dev, int64_t batch,
                         int64_t prompt, int64_t gen, int64_t chunk, const RunnerLayout& layout);

// DESIGN.md §4 throughput at `batch` (> 0) with the calibrated times; `band`
// (if given) receives the larger band of its prefill and decode steps. The
// prompts are prefilled as the runners do, the whole batch a step; with
// `sampled_prefill`, as the sweep samples a long point's prefill: one
// prompt's prefill x batch.
double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk,
                             double* band = nullptr, bool sampled_prefill = false);
double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk, double* band,
                             bool sampled_prefill, const RunnerLayout& layout);

}  // namespace yoco::cost

namespace yoco::cost {

// One measured point beside the calibrated model's prediction for it.
struct CalibrationCheck {
  std::string model, phase;
  int64_t seq_len = 0, batch = 1, gen_tokens = 0;
  std::string metric;  // prefill_latency_s, decode_step_latency_s, throughput_tokens_per_s, mem_total_bytes
  double measured = 0, predicted = 0;
  double ratio() const { return predicted / measured; }
};
// What-if: one family's fits (both phases; one bound or both) replaced: by
// the roofline ("ceiling": inverse efficiency 1, no fixed cost) or by an
// efficiency X in (0, 1] (e.g. a peer's measured fraction of the ceiling).
// `spec` is FAMILY[.BOUND]=ceiling|X; InputError naming --what-if otherwise.
// Returns a description for the rows' notes.
std::string apply_what_if(Calibration& c, const std::string& spec);

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
// ceilings above.
std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c,
                                                const DeviceSpec& ceil);
std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c);

}  // namespace yoco::cost
