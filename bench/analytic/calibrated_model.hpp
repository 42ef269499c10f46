#pragma once
// The calibrated model's predictions (calibration.hpp): a prefill, a decode step, a generation's
// memory and DESIGN.md §4 throughput as the runners run them (runner_layout.hpp), each family's
// roofline time times its fitted inverse efficiency plus its fixed cost a layer, the host's calls as a
// floor under a prefill.
#include <array>
#include <cstdint>
#include <string>

#include "calibration.hpp"
#include "runner_layout.hpp"

namespace yoco::cost {

struct CalibratedPhase {
  std::array<double, kFamilies> family_s{};  // kernel time per family
  double gap_s = 0;
  double host_s = 0;    // the host's calls (prefill: they bound the phase from below; decode replays a graph)
  double total_s = 0;   // max(kernels + gap, host)
  double band = 0;       // the largest worst residual of the fits it used (its uncertainty, relative)
  // Why the band is unknown, "" when it is known: families priced at the roofline (no points on either
  // bound) or by a fit of fewer than kMinBandPoints points ("gemm compute: the roofline, no points").
  std::string unbanded;
  std::string fallback;  // families that kept the roofline or borrowed the other bound's fit, "" if none
  std::string kernels;   // the kernel versions it priced apart from the fit's ("attention prefill v3 at ..."), or ""
};
// One prefill or decode step of `cfg` (the cost model's work) on `ceil`
// (calibrated_ceilings). attention_compute_scale: the factor on the prefill
// attention's compute-bound time at the fitted rate (the version it ran
// against the fit's: prefill_versions.hpp).
CalibratedPhase calibrated_phase(const ModelConfig& cfg, const PhaseWork& w, bool prefill_phase,
                                 const Calibration& c, const DeviceSpec& ceil, double attention_compute_scale = 1.0);

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
// (if given) receives the larger band of its prefill and decode steps,
// `unbanded` (if given) why that band is unknown ("" when known: CalibratedPhase::unbanded). The
// prompts are prefilled as the runners do, the whole batch a step; with
// `sampled_prefill`, as the sweep samples a long point's prefill: one
// prompt's prefill x batch.
double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk,
                             double* band = nullptr, bool sampled_prefill = false);
double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk, double* band,
                             bool sampled_prefill, const RunnerLayout& layout, std::string* unbanded = nullptr);


}  // namespace yoco::cost
