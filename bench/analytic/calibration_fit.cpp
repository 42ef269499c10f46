// The calibration fitted on a sweep's rows (calibration.hpp: fit_calibration), and the ceilings it
// divides by on another card (calibrated_ceilings).
#include "calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "calibration_parts.hpp"
#include "calibrated_model.hpp"
#include "prefill_versions.hpp"
#include "errors.hpp"

namespace yoco::cost {

using namespace calibration_detail;

namespace {

// min over x >= 0, y >= 0 of sum (x a_i + y b_i - t_i)^2 / t_i^2 (relative
// errors: a point of 0.1 s weighs as much as one of 100 s).
std::pair<double, double> nnls2(const std::vector<double>& a, const std::vector<double>& b,
                                const std::vector<double>& t) {
  double aa = 0, ab = 0, bb = 0, at = 0, bt = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    aa += w * a[i] * a[i], ab += w * a[i] * b[i], bb += w * b[i] * b[i];
    at += w * a[i] * t[i], bt += w * b[i] * t[i];
  }
  const double det = aa * bb - ab * ab;
  if (det > 1e-12 * aa * bb && aa > 0 && bb > 0) {
    const double x = (at * bb - bt * ab) / det, y = (aa * bt - ab * at) / det;
    if (x >= 0 && y >= 0) return {x, y};
  }
  // One coefficient at its bound: the better of the two one-term fits.
  auto sse = [&](double x, double y) {
    double s = 0;
    for (size_t i = 0; i < t.size(); ++i) s += std::pow((x * a[i] + y * b[i] - t[i]) / t[i], 2);
    return s;
  };
  const std::pair<double, double> only_x{aa > 0 ? std::max(0.0, at / aa) : 0.0, 0.0};
  const std::pair<double, double> only_y{0.0, bb > 0 ? std::max(0.0, bt / bb) : 0.0};
  return sse(only_x.first, only_x.second) <= sse(only_y.first, only_y.second) ? only_x : only_y;
}

using Key = std::tuple<std::string, int64_t, int64_t>;  // model, seq_len, batch

}  // namespace

Calibration fit_calibration(const std::vector<ResultRow>& rows, const std::string& source) {
  Calibration c;
  c.source = source;
  c.fitted_on = source;
  const RunCeilings rc = run_ceilings(rows);
  c.peak_flops = rc.peak_flops;
  c.bandwidth = rc.bandwidth;
  c.device_name = rc.card;
  c.fitted_at = rc.fitted_at;
  // Measured values by point and (phase, metric).
  std::map<Key, std::map<std::pair<std::string, std::string>, double>> measured;
  std::map<Key, RunnerLayout> layouts;  // as each point's prefill row says its runner ran
  std::map<Key, int64_t> chunks;        // and in prefill steps of how many tokens
  std::map<Key, std::string> commits;   // and at which commit
  std::vector<double> others;
  for (const auto& r : rows) {
    if (!r.value || r.phase == "ceiling") continue;
    if (r.method != "measured" && r.method != "sampled" && r.method != "exact") continue;
    if (!preset_of(r.model)) continue;
    require_point_batch(r, source);
    measured[{r.model, r.seq_len, r.batch}][{r.phase, r.metric}] = *r.value;
    if (r.phase == "prefill" && r.metric == "prefill_latency_s") {
      commits[{r.model, r.seq_len, r.batch}] = r.prov.git_sha;
      layouts[{r.model, r.seq_len, r.batch}] = runner_layout_of_notes(r.notes);
      chunks[{r.model, r.seq_len, r.batch}] = prefill_chunk_of_notes(r.notes);
    }
    if (r.metric == "mem_other_bytes") others.push_back(*r.value);
  }
  if (c.peak_flops <= 0 || c.bandwidth <= 0)
    throw InputError(source + ": no measured ceilings (phase ceiling, gemm_peak_tflops and copy_bw_gbs)");
  const std::string dn = c.device_name;
  // The datasheet of the measured card, by its name; a card the suite has no
  // datasheet for cannot be projected from.
  const std::string sheet_name = datasheet_name_of(dn);
  if (sheet_name.empty())
    throw InputError(source + ": no datasheet for '" + dn + "' (known: H100, H200, B200): cannot calibrate projections");
  const DeviceSpec sheet = device_spec(sheet_name);
  c.datasheet_flops = sheet.peak_flops;
  c.datasheet_bandwidth = sheet.bandwidth;
  DeviceSpec ceil{dn, c.peak_flops, c.bandwidth, 0, "the run's measured ceilings"};
  const Storage st;
  struct Sample {
    double roofline, layers, time;
  };
  std::array<std::array<std::vector<Sample>, 2>, kFamilies> pre, dec;
  std::vector<double> gap_pre, gap_dec, host_call, prefill_host_call;
  // The flash prefill version of each point whose prefill attention is compute-bound: one for the fit.
  const PrefillVersions versions(rows);
  std::map<Key, int> attention_version;
  for (const auto& point : measured) {
    // Named, not bound: clang before 16 cannot capture a structured binding in a lambda.
    const auto& key = point.first;
    const auto& m = point.second;
    const auto& [model, len, batch] = key;
    const ModelConfig cfg = *preset_of(model);
    const int64_t chunk = chunks.count(key) ? chunks.at(key) : kDefaultPrefillChunk;  // as its prefill row says
    auto get = [&](const std::string& phase, const std::string& metric) -> std::optional<double> {
      const auto it = m.find({phase, metric});
      return it == m.end() ? std::nullopt : std::optional<double>(it->second);
    };
    // The point's runner as its prefill row says it ran (the fused FFN up half
    // is one call fewer a layer where it fused; the global K/V's calls differ
    // past batch 1).
    const auto lay_it = layouts.find(key);
    const RunnerLayout lay = lay_it == layouts.end() ? RunnerLayout{} : lay_it->second;
    const int64_t fused_from = runner_kernels(cfg, lay).ffn_up_fused_from_rows;
    // The eager step's host enqueue time over its calls (the step's calls do
    // not depend on the prefill plan).
    if (const auto enq = get("decode_eager", "decode_host_enqueue_s"); enq && *enq > 0)
      host_call.push_back(*enq / launches_of(cfg, batch, std::min(len, chunk), sheet.sm_count, lay.batched_global_kv,
                                             fused_from)
                                     .decode_step);
    // The prefill's host time over its calls, at batch 1 and in one step: a prefill of several steps
    // returns about one step before the device is done (each step's token upload waits for the one
    // before, which the stream orders behind that step's kernels), so its call time is not the host's.
    if (const auto enq = get("prefill", "prefill_host_enqueue_s"); enq && *enq > 0 && batch == 1 && len <= chunk) {
      const cuda::RunnerLaunches n = launches_of(cfg, 1, len, sheet.sm_count, lay.batched_global_kv, fused_from);
      prefill_host_call.push_back(*enq / (n.prefill_step + n.prefill_once));
    }
    for (const bool is_pre : {true, false}) {
      const std::string ph = is_pre ? "prefill" : "decode";
      const auto kernels = get(ph + ".kernels", "gpu_time_s");
      if (!kernels || *kernels <= 0) continue;
      // The work as the point's runner did it (a sweep made with the fused FFN up half is fitted
      // on the fused bytes); the sweep's single-sequence 32K steps pad no query tile.
      const KernelView kv = runner_kernels(cfg, lay);
      const PhaseWork w = is_pre ? prefill_work(cfg, st, batch, len, chunk, kv) : decode_work(cfg, st, batch, len, kv);
      for (int f = 0; f < kFamilies; ++f) {
        double t = 0;
        bool any = false;
        for (const auto& cf : cupti_families_of(static_cast<Family>(f)))
          if (const auto v = get(ph + "." + cf, "gpu_time_s")) t += *v, any = true;
        const double layers = layers_of(cfg, static_cast<Family>(f));
        if (!any || t <= 0 || layers == 0) continue;
        const int b = static_cast<int>(family_bound(w, static_cast<Family>(f), ceil));
        (is_pre ? pre : dec)[f][b].push_back({family_roofline(w, static_cast<Family>(f), ceil), layers, t});
        if (is_pre && f == static_cast<int>(Family::attention) && b == static_cast<int>(Bound::compute)) {
          ResultRow at;  // the point as its prefill row names it (its commit: the version's evidence)
          at.prov.git_sha = commits.count(key) ? commits.at(key) : "";
          at.model = model, at.seq_len = len, at.batch = batch;
          attention_version[key] = versions.of(at);
        }
      }
      const auto lat = get(ph, is_pre ? "prefill_latency_s" : "decode_step_latency_s");
      if (lat) (is_pre ? gap_pre : gap_dec).push_back(std::max(0.0, *lat / *kernels - 1.0));
    }
  }
  bool any_fit = false;
  for (const bool is_pre : {true, false})
    for (int f = 0; f < kFamilies; ++f)
      for (int b = 0; b < 2; ++b) {
        const auto& s = (is_pre ? pre : dec)[f][b];
        FamilyFit& fit = (is_pre ? c.prefill : c.decode)[f][b];
        if (s.empty()) continue;
        std::vector<double> a, l, t;
        for (const auto& x : s) a.push_back(x.roofline), l.push_back(x.layers), t.push_back(x.time);
        std::tie(fit.inverse_efficiency, fit.per_layer_s) = nnls2(a, l, t);
        fit.points = static_cast<int>(s.size());
        for (const auto& x : s)
          fit.worst_residual =
              std::max(fit.worst_residual,
                       std::abs((fit.inverse_efficiency * x.roofline + fit.per_layer_s * x.layers) / x.time - 1));
        any_fit = true;
      }
  for (const auto& [key, v] : attention_version) {
    if (v == 0) continue;  // a point nothing names the kernel of
    if (c.attention_prefill_fit_version != 0 && c.attention_prefill_fit_version != v)
      throw InputError(source + ": its points' prefill attention ran flash prefill v" +
                       std::to_string(c.attention_prefill_fit_version) + " and v" + std::to_string(v) + " (" +
                       std::get<0>(key) + " at seq_len " + std::to_string(std::get<1>(key)) +
                       "): fit one version's points at a time");
    c.attention_prefill_fit_version = v;
  }
  // The fit's own version at 1 of its time; the others unmeasured until add_kernel_bench.
  if (c.attention_prefill_fit_version) c.attention_prefill_time_ratio[c.attention_prefill_fit_version - 1] = 1.0;
  if (!any_fit)
    throw InputError(source + ": no point has a CUPTI breakdown (gpu_time_s of prefill.<family> or decode.<family>; "
                              "run the sweep with --cupti)");
  c.prefill_gap = median(gap_pre);
  c.decode_gap = median(gap_dec);
  c.other_bytes = median(others);
  c.sm_count = sheet.sm_count;
  c.host_call_s = median(host_call);
  c.host_points = static_cast<int>(host_call.size());
  c.prefill_host_call_s = median(prefill_host_call);
  c.prefill_host_points = static_cast<int>(prefill_host_call.size());
  return c;
}

DeviceSpec calibrated_ceilings(const Calibration& c, const DeviceSpec& dev) {
  DeviceSpec d = dev;
  const bool same = dev.peak_flops <= 0 || dev.bandwidth <= 0 ||
                    (std::abs(dev.peak_flops / c.datasheet_flops - 1) < 1e-9 &&
                     std::abs(dev.bandwidth / c.datasheet_bandwidth - 1) < 1e-9);
  if (same) {
    d.peak_flops = c.peak_flops;
    d.bandwidth = c.bandwidth;
    d.source = "the calibration's measured ceilings (" + c.device_name + ")";
  } else {
    d.peak_flops = dev.peak_flops * c.peak_flops / c.datasheet_flops;
    d.bandwidth = dev.bandwidth * c.bandwidth / c.datasheet_bandwidth;
    d.source = dev.name + " scaled by " + c.device_name + "'s measured / datasheet ceilings";
  }
  return d;
}

}  // namespace yoco::cost
