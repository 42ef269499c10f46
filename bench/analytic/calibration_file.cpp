// A calibration as result rows (reports/SCHEMA.md, device "calibration") and back (calibration.hpp:
// calibration_rows, read_calibration).
#include "calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "calibration_parts.hpp"
#include "errors.hpp"
#include "result_csv.hpp"

namespace yoco::cost {

using namespace calibration_detail;

using cli::make_row;
using cli::read_results_csv;

// "v1".."v3", the flash prefill versions' metric prefix. (Not "v" + std::to_string(v): gcc 12 warns
// -Wrestrict on that concatenation, a false positive, its bug 105329.)
static std::string version_name(int v) {
  static_assert(kPrefillVersionSlots < 10, "one digit a version");
  return {'v', static_cast<char>('0' + v)};
}

std::vector<ResultRow> calibration_rows(const Calibration& c, const Provenance& prov) {
  std::vector<ResultRow> rows;
  auto add = [&](const std::string& phase, const std::string& metric, double v, const std::string& unit,
                 const std::string& notes) {
    rows.push_back(make_row(prov, "-", 0, 1, 0, "calibration:" + phase, metric, v, unit, "calibrated", 0, notes));
  };
  // The sweep of the fit, also where this calibration was read from a file
  // (a file written again from what was read); "from FILE" where the file
  // did not say.
  const std::string from = (c.fitted_on.empty() ? "from " + c.source : "fitted on " + c.fitted_on) + " (" +
                           c.device_name + ", " + c.fitted_at + ")";
  add("ceilings", "gemm_peak_tflops", c.peak_flops / 1e12, "TFLOP/s", "the fit's rooflines; " + from);
  add("ceilings", "copy_bw_gbs", c.bandwidth / 1e9, "GB/s", "the fit's rooflines; " + from);
  add("ceilings", "datasheet_tflops", c.datasheet_flops / 1e12, "TFLOP/s", "the device's datasheet");
  add("ceilings", "datasheet_gbs", c.datasheet_bandwidth / 1e9, "GB/s", "the device's datasheet");
  for (const bool is_pre : {true, false})
    for (int f = 0; f < kFamilies; ++f)
      for (int b = 0; b < 2; ++b) {
        const FamilyFit& fit = (is_pre ? c.prefill : c.decode)[f][b];
        const std::string ph = std::string(is_pre ? "prefill." : "decode.") + family_name(static_cast<Family>(f)) +
                               "." + bound_name(static_cast<Bound>(b));
        const std::string note =
            !fit.points ? "no points: the roofline"
            : fit.banded()
                ? std::to_string(fit.points) + " points; " + from
                : std::to_string(fit.points) + (fit.points == 1 ? " point" : " points") + ", fewer than " +
                      std::to_string(kMinBandPoints) + ": no band (a two-parameter fit passes through them); " + from;
        add(ph, "inverse_efficiency", fit.inverse_efficiency, "x", note);
        add(ph, "per_layer_s", fit.per_layer_s, "s", note);
        add(ph, "points", fit.points, "count", note);
        add(ph, "worst_residual", fit.worst_residual, "fraction", note);
      }
  // Before the last rows: a calibration from before them lacks these rows alone, and a file cut short
  // anywhere still lacks rows every calibration has.
  const int fit_version = c.attention_prefill_fit_version;
  add("attention_prefill", "fit_version", fit_version, "count",
      fit_version ? "the flash prefill version the fit's compute-bound prefill attention ran (its CUPTI kernel names); " + from
          : "no flash prefill version named in the sweep: every version priced as the fit");
  for (int v = 1; v <= kPrefillVersionSlots; ++v) {
    const std::string n = version_name(v);
    const int shapes = c.attention_prefill_ratio_shapes[v - 1];
    const std::string note =
        v == fit_version ? "the fit's own version"
        : shapes ? "median over " + std::to_string(shapes) + " shapes of the kernel benchmark's " + n + " time / v" +
                       std::to_string(fit_version) + "'s (yoco calibrate --kernels " + c.kernel_bench + ")"
                 : "not measured: " + n + " priced as the fit's version";
    add("attention_prefill", n + "_time_ratio", c.attention_prefill_time_ratio[v - 1], "x", note);
    add("attention_prefill", n + "_shapes", shapes, "count", note);
  }
  add("prefill", "gap_fraction", c.prefill_gap, "fraction", "median latency / kernel time - 1; " + from);
  add("decode", "gap_fraction", c.decode_gap, "fraction", "median latency / kernel time - 1; " + from);
  add("memory", "other_bytes", c.other_bytes, "B", "median mem_other_bytes (CUDA context, libraries)");
  add("host", "call_s", c.host_call_s, "s",
      c.host_points ? "median over " + std::to_string(c.host_points) +
                          " points of the eager decode step's host enqueue time / the runner's calls "
                          "(cuda/runner/launch_count.hpp); " + from
                    : "no eager decode steps: no host floor");
  add("host", "points", c.host_points, "count", "points with an eager decode step's host enqueue time");
  add("host", "prefill_call_s", c.prefill_host_call_s, "s",
      c.prefill_host_points ? "median over " + std::to_string(c.prefill_host_points) +
                                  " one-step batch-1 points of the prefill's host time (prefill_host_enqueue_s) / the "
                                  "runner's calls; " + from
                            : "no one-step prefill host times in the sweep: a prefill's calls cost call_s");
  add("host", "prefill_points", c.prefill_host_points, "count", "one-step batch-1 points with a prefill host time");
  add("ceilings", "sm_count", c.sm_count, "count", "the device's datasheet (the gRet plan of the memory model)");
  return rows;
}

namespace {

// What a calibration row's value can mean: past `max` the model's times
// overflow when scaled (1e300 TFLOP/s is inf FLOP/s) or its bands go below 0
// (a worst residual past 1); below `min` a ceiling divides a roofline into inf
// (1e-320 TFLOP/s); a count is a whole number.
struct ValueRange {
  double max;
  bool count;
  const char* what;
  double min = 0;
};

std::optional<ValueRange> value_range(const std::string& metric) {
  static const std::map<std::string, ValueRange> ranges = {
      {"gemm_peak_tflops", {1e6, false, "must be in [0.001, 1e6] TFLOP/s (a B200's datasheet says 2250)", 1e-3}},
      {"datasheet_tflops", {1e6, false, "must be in [0.001, 1e6] TFLOP/s (a B200's datasheet says 2250)", 1e-3}},
      {"copy_bw_gbs", {1e6, false, "must be in [0.001, 1e6] GB/s (a B200's datasheet says 8000)", 1e-3}},
      {"datasheet_gbs", {1e6, false, "must be in [0.001, 1e6] GB/s (a B200's datasheet says 8000)", 1e-3}},
      {"sm_count", {1e6, true, "must be a whole count in [1, 1e6]"}},
      {"points", {1e9, true, "must be a whole count below 1e9"}},
      {"prefill_points", {1e9, true, "must be a whole count below 1e9"}},
      {"worst_residual", {1, false, "must be a fraction in [0, 1] (a wider band would go below 0)"}},
      {"inverse_efficiency", {1e9, false, "must be at most 1e9"}},
      {"per_layer_s", {1, false, "must be below 1 s"}},
      {"call_s", {1, false, "must be below 1 s"}},
      {"prefill_call_s", {1, false, "must be below 1 s"}},
      // A phase's time is its kernels' times (1 + gap_fraction), the gap the median of latency / kernel time - 1
      // (calibration_fit.cpp). The fits say 0.008 (prefill) and 0.004 (decode) on the H100's 3B sweep, 1.08 and
      // 0.13 on run-17's small presets, whose tiny kernels leave the host most of a prefill; 100 (a latency 101
      // times the kernels') is two orders of magnitude past those. A larger gap is no GPU phase scaled but the
      // host's time, which the model prices apart (host call_s); 1e6 priced a 6 s prefill at 6.25e6 s, exit 0.
      {"gap_fraction", {100, false, "must be at most 100 (a latency 101 times the kernels' time; fits measure 0.004 to 1.1)"}},
      {"other_bytes", {1e15, false, "must be at most 1e15 B"}},
      {"fit_version", {kPrefillVersionSlots, true, "must be a flash prefill version, 1 to 3, or 0 (none named)"}},
      {"v1_time_ratio", {100, false, "must be at most 100"}},
      {"v2_time_ratio", {100, false, "must be at most 100"}},
      {"v3_time_ratio", {100, false, "must be at most 100"}},
      {"v1_shapes", {1e9, true, "must be a whole count below 1e9"}},
      {"v2_shapes", {1e9, true, "must be a whole count below 1e9"}},
      {"v3_shapes", {1e9, true, "must be a whole count below 1e9"}},
  };
  const auto it = ranges.find(metric);
  if (it == ranges.end()) return std::nullopt;
  return it->second;
}

std::string value_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Empty when `v` is a value `metric` can have (beyond finite and >= 0, checked apart).
std::string out_of_range(const std::string& metric, double v) {
  const auto range = value_range(metric);
  if (!range || (v <= range->max && v >= range->min && (!range->count || v == std::floor(v)) &&
                 (metric != "sm_count" || v >= 1)))
    return "";
  return metric + " is " + value_text(v) + ": it " + range->what;
}

// The versions' rows as add_kernel_bench and the fit write them: the fit's own version at 1 (no
// shapes), another at 0 with no shapes (unmeasured) or in [0.01, 100] over at least one shape, all 0
// without a fit version. A ratio of 1e-300 priced a 315 s prefill at 10 s, exit 0.
void require_consistent_versions(const Calibration& c, const std::map<std::string, std::string>& at) {
  const int fit = c.attention_prefill_fit_version;
  for (int v = 1; v <= kPrefillVersionSlots; ++v) {
    const std::string n = version_name(v);
    const double r = c.attention_prefill_time_ratio[v - 1];
    const int shapes = c.attention_prefill_ratio_shapes[v - 1];
    std::string why;
    if (fit == 0 && (r != 0 || shapes != 0))
      why = "must be 0 with 0 shapes: fit_version is 0 (no version to price against)";
    else if (fit == v && (r != 1 || shapes != 0))
      why = "must be 1 with 0 shapes: v" + std::to_string(v) + " is the fit's own version";
    else if (fit != 0 && fit != v && !((r == 0 && shapes == 0) || (r >= 0.01 && r <= 100 && shapes >= 1)))
      why = "must be 0 with 0 shapes (not measured) or in [0.01, 100] over at least 1 shape";
    if (why.empty()) continue;
    const auto line = at.find(n + "_time_ratio");
    throw InputError((line == at.end() ? std::string("calibration") : line->second) +
                     ": calibration:attention_prefill " + n + "_time_ratio is " + value_text(r) + " with " +
                     std::to_string(shapes) + " shapes: it " + why);
  }
}

}  // namespace

void require_readable(const std::vector<ResultRow>& calibration, const std::string& source) {
  for (const auto& r : calibration)
    if (r.value)
      if (const std::string why = out_of_range(r.metric, *r.value); !why.empty())
        throw InputError(source + ": the calibration's " + r.phase + " " + why + "; not written");
}

Calibration read_calibration(const std::string& path) {
  const std::vector<ResultRow> rows = read_results_csv(path);
  // Each row's line: the header is line 1; read_results_csv skips blank lines.
  std::vector<int> line_of;
  {
    std::ifstream in(path);
    std::string s;
    for (int n = 1; std::getline(in, s); ++n)
      if (n > 1 && s.find_first_not_of(" \t\r") != std::string::npos) line_of.push_back(n);
  }
  Calibration c;
  c.source = path;
  bool ceilings = false;
  std::set<std::string> seen;  // phase and metric of every row read
  std::map<std::string, std::string> version_row_at;  // calibration:attention_prefill metric -> file:line
  // Each row's unit as calibration_rows writes it (phase and metric -> unit).
  std::map<std::string, std::string> unit_of;
  for (const auto& r : calibration_rows(Calibration{}, Provenance{})) unit_of[r.phase + " " + r.metric] = r.unit;
  std::string first_at;  // file:line of the first row, whose device_name every row shares
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    const std::string key = r.phase + " " + r.metric;
    const std::string at = path + ":" + std::to_string(i < line_of.size() ? line_of[i] : static_cast<int>(i) + 2);
    auto bad = [&](const std::string& why) -> InputError { return InputError(at + ": " + why); };
    if (r.phase.rfind("calibration:", 0) != 0) throw bad("phase '" + r.phase + "' is not a calibration row");
    // One calibration a file: two blocks (two fits appended, another card's below) were read as one,
    // the header crediting the first device and the values the last block's.
    if (first_at.empty()) first_at = at;
    if (r.prov.device_name != rows[0].prov.device_name)
      throw bad("device_name '" + r.prov.device_name + "', but " + first_at + " has '" + rows[0].prov.device_name +
                "': one calibration (one device) a file");
    if (!seen.insert(key).second)
      throw bad(r.phase + " " + r.metric + " a second time: one calibration a file (two blocks appended?)");
    if (r.method != "calibrated")
      throw bad("method '" + r.method + "': a calibration row's is 'calibrated' (yoco calibrate --out)");
    if (const auto u = unit_of.find(key); u != unit_of.end() && r.unit != u->second)
      throw bad(r.metric + " in '" + r.unit + "': yoco calibrate writes it in '" + u->second + "'");
    if (!r.value || !std::isfinite(*r.value) || *r.value < 0)
      throw bad(r.metric + " needs a finite value >= 0");
    const double v = *r.value;
    if (const std::string why = out_of_range(r.metric, v); !why.empty()) throw bad(why);
    const std::string ph = r.phase.substr(12);
    const std::string prefix = "calibrated on ";
    if (c.device_name.empty() && r.prov.device_name.rfind(prefix, 0) == 0)
      c.device_name = r.prov.device_name.substr(prefix.size());
    if (c.fitted_at.empty() && !c.device_name.empty()) {
      const size_t at_dev = r.notes.find("(" + c.device_name + ", ");
      if (at_dev != std::string::npos) {
        const size_t from = at_dev + c.device_name.size() + 3, close = r.notes.find(')', from);
        c.fitted_at = r.notes.substr(from, close == std::string::npos ? close : close - from);
        // "fitted on SWEEP (device, commit date)": the sweep, kept so that a
        // rewrite of this calibration still names it, not this file.
        const std::string on = "fitted on ";
        const size_t sweep = r.notes.rfind(on, at_dev);
        if (sweep != std::string::npos && sweep + on.size() + 1 < at_dev)
          c.fitted_on = r.notes.substr(sweep + on.size(), at_dev - 1 - (sweep + on.size()));
      }
    }
    if (ph == "ceilings") {
      if (r.metric == "gemm_peak_tflops") c.peak_flops = v * 1e12, ceilings = true;
      else if (r.metric == "copy_bw_gbs") c.bandwidth = v * 1e9;
      else if (r.metric == "datasheet_tflops") c.datasheet_flops = v * 1e12;
      else if (r.metric == "datasheet_gbs") c.datasheet_bandwidth = v * 1e9;
      else if (r.metric == "sm_count") c.sm_count = static_cast<int>(v);
      else throw bad("unknown metric '" + r.metric + "' for calibration:ceilings");
      continue;
    }
    if (ph == "prefill" || ph == "decode") {
      if (r.metric != "gap_fraction") throw bad("unknown metric '" + r.metric + "' for " + r.phase);
      (ph == "prefill" ? c.prefill_gap : c.decode_gap) = v;
      continue;
    }
    if (ph == "memory") {
      if (r.metric == "other_bytes") c.other_bytes = v;
      else throw bad("unknown metric '" + r.metric + "' for calibration:memory");
      continue;
    }
    if (ph == "host") {
      if (r.metric == "call_s") {
        c.host_call_s = v;
      } else if (r.metric == "points") {
        c.host_points = static_cast<int>(v);
      } else if (r.metric == "prefill_call_s") {
        c.prefill_host_call_s = v;
      } else if (r.metric == "prefill_points") {
        c.prefill_host_points = static_cast<int>(v);
      } else {
        throw bad("unknown metric '" + r.metric + "' for calibration:host");
      }
      continue;
    }
    if (ph == "attention_prefill") {
      version_row_at[r.metric] = at;
      if (r.metric == "fit_version") {
        c.attention_prefill_fit_version = static_cast<int>(v);
        continue;
      }
      int slot = -1;
      for (int k = 1; k <= kPrefillVersionSlots; ++k) {
        const std::string n = version_name(k);
        if (r.metric == n + "_time_ratio") c.attention_prefill_time_ratio[k - 1] = v, slot = k;
        if (r.metric == n + "_shapes") c.attention_prefill_ratio_shapes[k - 1] = static_cast<int>(v), slot = k;
      }
      // "(yoco calibrate --kernels FILE (commit date))": kept, so that a rewrite still names it.
      const std::string by = "(yoco calibrate --kernels ";
      if (const size_t from = r.notes.find(by); from != std::string::npos && c.kernel_bench.empty() &&
                                                r.notes.size() > from + by.size() + 1)
        c.kernel_bench = r.notes.substr(from + by.size(), r.notes.size() - 1 - (from + by.size()));
      if (slot < 0) throw bad("unknown metric '" + r.metric + "' for calibration:attention_prefill");
      continue;
    }
    // <phase>.<family>.<bound>
    const size_t d1 = ph.find('.'), d2 = d1 == std::string::npos ? d1 : ph.find('.', d1 + 1);
    const std::string phase = ph.substr(0, d1);
    const std::string fam = d1 == std::string::npos ? "" : ph.substr(d1 + 1, d2 == std::string::npos ? d2 : d2 - d1 - 1);
    const std::string bound = d2 == std::string::npos ? "" : ph.substr(d2 + 1);
    int f = -1;
    for (int k = 0; k < kFamilies; ++k)
      if (fam == family_name(static_cast<Family>(k))) f = k;
    const int b = bound == "compute" ? 0 : bound == "memory" ? 1 : -1;
    if ((phase != "prefill" && phase != "decode") || f < 0 || b < 0)
      throw bad("unknown phase '" + r.phase + "' (calibration:<prefill|decode>.<gemm|attention|gret|norms>." +
                "<compute|memory>, calibration:<prefill|decode>, calibration:ceilings, calibration:memory, calibration:host, "
                "calibration:attention_prefill)");
    FamilyFit& fit = (phase == "prefill" ? c.prefill : c.decode)[f][b];
    if (r.metric == "inverse_efficiency") {
      fit.inverse_efficiency = v;  // 0: a family whose time is its fixed cost alone
    } else if (r.metric == "per_layer_s") {
      fit.per_layer_s = v;
    } else if (r.metric == "points") {
      fit.points = static_cast<int>(v);
    } else if (r.metric == "worst_residual") {
      fit.worst_residual = v;
    } else {
      throw bad("unknown metric '" + r.metric + "' for " + r.phase);
    }
  }
  if (!ceilings || c.peak_flops <= 0 || c.bandwidth <= 0 || c.datasheet_flops <= 0 || c.datasheet_bandwidth <= 0)
    throw InputError(path + ": needs calibration:ceilings rows gemm_peak_tflops, copy_bw_gbs, datasheet_tflops and "
                            "datasheet_gbs, all > 0");
  // A missing row read as its default (a fitted family at the roofline), so a
  // file cut short gave another model, exit 0: calibration_rows writes every
  // row, and every one is needed.
  // The prefill attention's versions all or none: a calibration from before them has none, and reads
  // as fitted then (every version priced as the fit's).
  const bool versions = std::any_of(seen.begin(), seen.end(), [](const std::string& k) {
    return k.rfind("calibration:attention_prefill ", 0) == 0;
  });
  for (const auto& r : calibration_rows(Calibration{}, Provenance{}))
    if (!seen.count(r.phase + " " + r.metric) && (versions || r.phase != "calibration:attention_prefill"))
      throw InputError(path + ": no row " + r.phase + " " + r.metric +
                       " (yoco calibrate --out writes every one; a file cut short?)");
  if (versions) require_consistent_versions(c, version_row_at);
  return c;
}

}  // namespace yoco::cost
