// The calibrated model held against measured points (calibration_check.hpp).
#include "calibration_check.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "calibration_parts.hpp"
#include "device_spec.hpp"
#include "prefill_versions.hpp"
#include "errors.hpp"

namespace yoco::cost {

using namespace calibration_detail;

CheckCeilings check_ceilings(const std::vector<ResultRow>& rows, const Calibration& c, const std::string& mode,
                             const std::string& source) {
  // The rows' card: the name their measured ceilings carry, else any GPU row's.
  const RunCeilings rc = run_ceilings(rows);
  std::string card = rc.card;
  for (size_t i = 0; card.empty() && i < rows.size(); ++i)
    if (rows[i].prov.device.rfind("cuda", 0) == 0) card = rows[i].prov.device_name;
  const std::string own = datasheet_name_of(c.device_name), theirs = datasheet_name_of(card);
  // Another card the suite has no datasheet for (an A100, say): no projection to check it on, only
  // its own measured ceilings; never the calibration's card's rates under its name.
  const bool unknown_card = mode == "auto" && !card.empty() && theirs.empty() && card != c.device_name;
  if (mode == "run" || unknown_card) {
    if (!(rc.peak_flops > 0) || !(rc.bandwidth > 0))
      throw InputError(source + (unknown_card ? ": '" + card + "' has no datasheet here (known: H100, H200, B200), so "
                                                "the check needs the run's measured ceilings"
                                              : std::string(": --ceilings run needs the run's measured ceilings")) +
                       " (phase ceiling, gemm_peak_tflops and copy_bw_gbs)");
    DeviceSpec d = theirs.empty() ? DeviceSpec{} : device_spec(theirs);
    d.name = card;
    d.peak_flops = rc.peak_flops;
    d.bandwidth = rc.bandwidth;
    d.source = "the run's measured ceilings (" + card + ")";
    return {d, d.source + ", the calibration's efficiencies" + (unknown_card ? " (no datasheet for the card)" : "")};
  }
  std::string sheet = mode;
  if (mode == "auto") {
    if (theirs.empty() || theirs == own) {  // the calibration's card, or rows that name none
      const DeviceSpec d = calibrated_ceilings(c, DeviceSpec{});
      return {d, d.source};
    }
    sheet = theirs;
  } else if (const auto names = device_spec_names(); std::find(names.begin(), names.end(), mode) == names.end()) {
    throw InputError("--ceilings: expected auto, run, h100, h200 or b200, got '" + mode + "'");
  }
  const DeviceSpec d = calibrated_ceilings(c, device_spec(sheet));
  return {d, d.source};
}

std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c) {
  return check_calibration(rows, c, check_ceilings(rows, c, "auto", c.source).ceil);
}

std::vector<CalibrationCheck> check_calibration(const std::vector<ResultRow>& rows, const Calibration& c,
                                                const DeviceSpec& ceil, const std::string& source) {
  std::vector<CalibrationCheck> out;
  const Storage st;
  const PrefillVersions versions(rows);
  for (const auto& r : rows) {
    if (!r.value) continue;
    // A point the calibrated model predicts (the branches below): a measured prefill, decode step,
    // throughput or memory.
    const bool m = r.method == "measured", sampled = r.method == "sampled";
    const bool checked = (r.phase == "prefill" && r.metric == "prefill_latency_s" && m) ||
                         (r.phase == "decode" && r.metric == "decode_step_latency_s" && m) ||
                         (r.phase == "throughput" && r.metric == "throughput_tokens_per_s" && (m || sampled) &&
                          r.gen_tokens > 0 && r.gen_tokens < r.seq_len) ||
                         (r.phase == "memory" && r.metric == "mem_total_bytes" && m);
    if (!checked) continue;
    const std::string row = "the " + r.phase + " " + r.metric + " row of " + r.model + " at seq_len " +
                            std::to_string(r.seq_len);
    // The calibration is the CUDA runners' (their kernels, their buffers): a CPU run's times and memory
    // are another implementation's, not a check of it (a CPU run's tiny models were off by 427%).
    if (r.prov.device.rfind("cuda", 0) != 0)
      throw InputError(source + ": " + row + " ran on device '" + r.prov.device +
                       "', not a CUDA run: the calibration prices the CUDA runners only");
    // A measured time, rate or size of 0 has no ratio to the prediction; dropped, it went unsaid.
    if (!(*r.value > 0) || !std::isfinite(*r.value))
      throw InputError(source + ": " + row + " has value " + (std::ostringstream() << *r.value).str() +
                       ": a measured point needs a value > 0 to be checked");
    const auto cfg = preset_of(r.model);
    if (!cfg) continue;
    CalibrationCheck k{r.model, r.phase, r.seq_len, r.batch, r.gen_tokens, r.metric, *r.value, 0, ""};
    // As the point's runner was laid out and chunked: its rows say so since
    // each choice became the default or an option; rows from before say
    // nothing (RunnerLayout, the default chunk).
    RunnerLayout layout = runner_layout_of_notes(r.notes);
    // The prefill attention kernel it ran: its notes, else its point's CUPTI rows say (0: the runners' now).
    layout.attention_prefill_version = versions.of(r);
    const int64_t chunk = prefill_chunk_of_notes(r.notes);
    const bool measured = r.method == "measured" || r.method == "sampled" || r.method == "exact";
    if (measured) require_point_batch(r, source);
    if (r.phase == "prefill" && r.metric == "prefill_latency_s" && r.method == "measured") {
      const CalibratedPhase p = calibrated_prefill(*cfg, st, c, ceil, r.batch, r.seq_len, chunk, layout);
      k.predicted = p.total_s;
      k.unbanded = p.unbanded;
    } else if (r.phase == "decode" && r.metric == "decode_step_latency_s" && r.method == "measured") {
      const CalibratedPhase d = calibrated_decode(*cfg, st, c, ceil, r.batch, r.seq_len, layout);
      k.predicted = d.total_s;
      k.unbanded = d.unbanded;
    } else if (r.phase == "throughput" && r.metric == "throughput_tokens_per_s" &&
               (r.method == "sampled" || r.method == "measured") && r.gen_tokens > 0 && r.gen_tokens < r.seq_len) {
      // As the point ran its prefill: the whole batch, or one prompt x batch ("prefill sampled" in its notes).
      const bool sampled = r.notes.find("prefill sampled") != std::string::npos;
      k.predicted = calibrated_throughput(*cfg, st, c, ceil, r.seq_len, r.gen_tokens, r.batch, chunk, nullptr, sampled,
                                          layout, &k.unbanded);
    } else if (r.phase == "memory" && r.metric == "mem_total_bytes" && r.method == "measured") {
      // The point's caches hold its prompt (the sweep's memory rows: "caches of exactly that").
      k.predicted = calibrated_memory(*cfg, c, ceil, r.batch, r.seq_len, 0, chunk, layout);
    } else {
      continue;
    }
    out.push_back(k);
  }
  return out;
}

}  // namespace yoco::cost
