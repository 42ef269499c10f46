// The prefill attention kernel's version in the calibrated model (prefill_versions.hpp), and the
// versions' time ratios from the calibration card's kernel benchmark (calibration.hpp:
// add_kernel_bench).
#include "prefill_versions.hpp"

#include <cctype>
#include <cstdio>

#include "attention/prefill_version.hpp"
#include "calibration_parts.hpp"
#include "errors.hpp"
#include "runner_layout.hpp"

namespace yoco::cost {

static_assert(kPrefillVersionSlots == cuda::kFlashPrefillVersions,
              "calibration.hpp holds a time ratio for every flash prefill version");

namespace calibration_detail {

PrefillVersions::PrefillVersions(const std::vector<ResultRow>& rows) {
  const std::string kernel_phase = "prefill:";
  for (const auto& r : rows) {
    const Point p{r.prov.git_sha, r.model, r.seq_len, r.batch};
    if (r.phase == "prefill") {
      if (const int v = runner_layout_of_notes(r.notes).attention_prefill_version) said_[p] = v;
    } else if (r.phase.rfind(kernel_phase, 0) == 0 && r.metric == "kernel_time_s" && r.value && *r.value > 0) {
      if (const int v = cuda::flash_prefill_version_of_kernel(r.phase.substr(kernel_phase.size())))
        kernels_[p][v] += *r.value;
    }
  }
  std::map<Point, int> points;
  for (const auto& [p, v] : said_) points[p] = v;
  for (const auto& [p, times] : kernels_)
    if (!points.count(p)) points[p] = of_point(p);
  for (const auto& [p, v] : points) {
    if (v == 0) continue;
    auto [it, fresh] = by_model_.try_emplace({std::get<0>(p), std::get<1>(p)}, v);
    if (!fresh && it->second != v) it->second = -1;
  }
}

int PrefillVersions::of_point(const Point& p) const {
  if (const auto it = said_.find(p); it != said_.end()) return it->second;
  const auto it = kernels_.find(p);
  if (it == kernels_.end()) return 0;
  int best = 0;
  double most = 0;
  for (const auto& [v, t] : it->second)
    if (t > most) best = v, most = t;
  return best;
}

int PrefillVersions::of(const ResultRow& r) const {
  // The row's own words first (a throughput row's point is its batch's, which has no prefill row).
  if (const int v = runner_layout_of_notes(r.notes).attention_prefill_version) return v;
  if (const int v = of_point({r.prov.git_sha, r.model, r.seq_len, r.batch})) return v;
  const auto it = by_model_.find({r.prov.git_sha, r.model});
  return it == by_model_.end() || it->second < 0 ? 0 : it->second;
}

int runner_prefill_version(const ModelConfig& cfg) {
  if (cfg.is_yoco() && cfg.self_decoder() != SelfDecoderKind::swa) return 0;  // no flash prefill in its prefill
  return cuda::flash_prefill_version(cfg.is_yoco() ? cfg.self_head_dim() : cfg.attn_head_dim(), true);
}

double prefill_version_scale(const Calibration& c, const ModelConfig& cfg, int version, std::string* note) {
  int v = version > 0 ? version : runner_prefill_version(cfg);
  const int fit = c.attention_prefill_fit_version;
  if (note) note->clear();
  if (v == 0) return 1.0;  // a model without flash prefill
  if (c.attention_prefill_priced_as) v = c.attention_prefill_priced_as;  // a what-if's
  if (fit == 0 || v == fit || v < 1 || v > kPrefillVersionSlots) return 1.0;
  const double r = c.attention_prefill_time_ratio[v - 1];
  char buf[160];
  if (r > 0)
    std::snprintf(buf, sizeof buf, "attention prefill v%d at %.3f of v%d's time (the kernel benchmark, %d shapes)", v,
                  r, fit, c.attention_prefill_ratio_shapes[v - 1]);
  else
    std::snprintf(buf, sizeof buf, "attention prefill v%d priced as the fit's v%d (no kernel-benchmark ratio)", v, fit);
  if (note) *note = buf;
  return r > 0 ? r : 1.0;
}

}  // namespace calibration_detail

using namespace calibration_detail;

namespace {

// An attn_prefill row's label "D<d> v<N>[<shape>]" (bench/cuda_micro/bench_flash_prefill.cpp): the
// version N and the rest (head dim and shape words, " 3 stages" for a variant that is not N's
// default), or version 0 where the label is not of that form.
std::pair<int, std::string> version_and_shape(const std::string& label) {
  size_t i = 0;
  if (label.empty() || label[0] != 'D') return {0, ""};
  for (i = 1; i < label.size() && std::isdigit(static_cast<unsigned char>(label[i])); ++i) {
  }
  if (i == 1 || label.compare(i, 2, " v") != 0 || i + 2 >= label.size()) return {0, ""};
  const char d = label[i + 2];
  if (d < '1' || d > '0' + kPrefillVersionSlots) return {0, ""};
  if (i + 3 < label.size() && label[i + 3] != ' ') return {0, ""};  // v10 and the like: not a version here
  std::string shape = label;
  shape.erase(i, 3);  // " vN"
  return {d - '0', shape};
}

}  // namespace

void add_kernel_bench(Calibration& c, const std::vector<ResultRow>& kernel_rows, const std::string& source) {
  const int fit = c.attention_prefill_fit_version;
  if (fit == 0)
    throw InputError("--kernels " + source + ": the sweep " + c.fitted_on + " names no prefill attention kernel (no "
                     "flash prefill kernel rows from --cupti, no 'attention prefill vN' notes): nothing to price by "
                     "version");
  const std::string prefix = "attn_prefill:";
  // (model, seq_len, batch, head dim and shape) -> version -> kernel time
  std::map<std::tuple<std::string, int64_t, int64_t, std::string>, std::map<int, double>> times;
  for (const auto& r : kernel_rows) {
    // Every measured row is the calibration's card's: a file of two cards' runs would mix their ratios.
    if ((r.method == "measured" && r.prov.device != "analytic") && r.prov.device_name != c.device_name)
      throw InputError("--kernels " + source + ": a row of " + r.phase + " ran on '" + r.prov.device_name +
                       "', the calibration's sweep on '" + c.device_name +
                       "': the versions' ratios must come from the calibration's card");
    if (r.phase.rfind(prefix, 0) != 0 || r.metric != "kernel_time_s" || r.method != "measured" || !r.value ||
        !(*r.value > 0))
      continue;
    const auto [v, shape] = version_and_shape(r.phase.substr(prefix.size()));
    if (v == 0) continue;
    times[{r.model, r.seq_len, r.batch, shape}][v] = *r.value;
  }
  if (times.empty())
    throw InputError("--kernels " + source + ": no measured attn_prefill rows (kernel_time_s of 'attn_prefill:D<d> "
                     "v<N>', bench_cuda_kernels' flash_prefill bench)");
  for (const auto& r : kernel_rows)
    if (r.phase.rfind(prefix, 0) == 0 && r.metric == "kernel_time_s" && r.method == "measured") {
      c.kernel_bench = source + " (" + r.prov.git_sha + " " + r.prov.timestamp.substr(0, 10) + ")";
      break;
    }
  std::array<std::vector<double>, kPrefillVersionSlots> ratios;
  for (const auto& [shape, by_version] : times) {
    const auto base = by_version.find(fit);
    if (base == by_version.end()) continue;
    for (const auto& [v, t] : by_version)
      if (v != fit) ratios[v - 1].push_back(t / base->second);
  }
  bool any = false;
  for (int v = 1; v <= kPrefillVersionSlots; ++v) {
    const auto& r = ratios[v - 1];
    c.attention_prefill_time_ratio[v - 1] = v == fit ? 1.0 : median(r);
    c.attention_prefill_ratio_shapes[v - 1] = v == fit ? 0 : static_cast<int>(r.size());
    any = any || !r.empty();
  }
  if (!any)
    throw InputError("--kernels " + source + ": no attn_prefill shape has v" + std::to_string(fit) +
                     " (the sweep's version) beside another version (kernel_time_s rows 'attn_prefill:D<d> v<N>')");
}

}  // namespace yoco::cost
