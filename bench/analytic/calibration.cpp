#include "calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "attention/attention_tiles.hpp"
#include "errors.hpp"
#include "gret/gret_plan.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "result_csv.hpp"
#include "runner/generation_bytes.hpp"
#include "runner/launch_count.hpp"

namespace yoco::cost {

using cli::make_row;
using cli::read_results_csv;

namespace {

// The cost model's parts each family covers, and the CUPTI families of the
// sweep (harness/kernel_family) each covers.
const std::vector<Part>& parts_of(Family f) {
  static const std::array<std::vector<Part>, kFamilies> p{{{Part::gemm, Part::lm_head}, {Part::attention},
                                                            {Part::gret}, {Part::norms}}};
  return p[static_cast<int>(f)];
}
const std::vector<std::string>& cupti_families_of(Family f) {
  static const std::array<std::vector<std::string>, kFamilies> p{
      {{"gemm"}, {"attention_prefill", "attention_decode"}, {"gret"}, {"norms", "other"}}};
  return p[static_cast<int>(f)];
}

// Layers that run a family: every layer has GEMMs and norms; attention runs in
// the Transformer's layers and YOCO's cross-decoder (and SWA self-decoder)
// layers; gRet in YOCO's gRet self-decoder.
double layers_of(const ModelConfig& cfg, Family f) {
  switch (f) {
    case Family::gemm:
    case Family::norms: return static_cast<double>(cfg.n_layers);
    case Family::attention:
      return static_cast<double>(!cfg.is_yoco() ? cfg.n_layers
                                                : cfg.n_cross_layers() +
                                                      (cfg.self_decoder() == SelfDecoderKind::swa ? cfg.n_self_layers() : 0));
    case Family::gret:
      return static_cast<double>(cfg.is_yoco() && cfg.self_decoder() == SelfDecoderKind::gret ? cfg.n_self_layers() : 0);
  }
  return 0;
}

double family_roofline(const PhaseWork& w, Family f, const DeviceSpec& dev) {
  double t = 0;
  for (Part p : parts_of(f)) t += roofline_time(w[p], dev);
  return t;
}

Bound family_bound(const PhaseWork& w, Family f, const DeviceSpec& dev) {
  Work sum;
  for (Part p : parts_of(f)) sum += w[p];
  return sum.flops / dev.peak_flops >= sum.bytes / dev.bandwidth ? Bound::compute : Bound::memory;
}

// One resource's share of the family's roofline: its FLOPs at the peak or
// its bytes at the bandwidth, part by part.
double bound_roofline(const PhaseWork& w, Family f, Bound b, const DeviceSpec& dev) {
  double t = 0;
  for (Part p : parts_of(f)) t += b == Bound::compute ? w[p].flops / dev.peak_flops : w[p].bytes / dev.bandwidth;
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

// The gRet chunk plan the library picks for a prefill step of `rows` tokens of
// each of `batch` sequences on `sms` SMs.
cuda::GretChunkShape gret_step_shape(const ModelConfig& cfg, int64_t batch, int64_t rows) {
  cuda::GretChunkShape shape;
  shape.batch = batch;
  shape.heads = cfg.n_self_heads;
  shape.head_dim = cfg.self_head_dim();
  shape.seq_len = rows;
  shape.row_stride = 4 * cfg.dim;
  return shape;
}

int sms_for(const Calibration& c, const DeviceSpec& dev) { return dev.sm_count > 0 ? dev.sm_count : std::max(c.sm_count, 1); }

// The runners' host calls for `batch` sequences prefilled `rows` tokens a step.
// ffn_fused_from_rows: KernelView's (0: never).
cuda::RunnerLaunches launches_of(const ModelConfig& cfg, int64_t batch, int64_t rows, int sms,
                                 bool batched_global_kv = cuda::kBatchedGlobalKvByDefault,
                                 int64_t ffn_fused_from_rows = 0) {
  double chunk_launches = 1;
  if (cfg.is_yoco() && cfg.self_decoder() == SelfDecoderKind::gret) {
    const cuda::GretChunkPlan plan = cuda::plan_gret_chunk(gret_step_shape(cfg, batch, rows), sms);
    chunk_launches = (plan.segments > 1 ? 3 : 1) + (cuda::gret_chunk_fuses_norm_gate(plan) ? 0 : 1);
  }
  const bool on = ffn_fused_from_rows > 0;
  const cuda::FfnFused fused{on && batch * rows >= ffn_fused_from_rows, on && batch >= ffn_fused_from_rows};
  return cuda::runner_launches(cfg, static_cast<double>(batch), chunk_launches, batched_global_kv, fused);
}

// The preset of a row's model; nullopt for pairs ("a vs b"), "-" and files.
std::optional<ModelConfig> preset_of(const std::string& model) {
  if (model.empty() || model == "-" || model.find(' ') != std::string::npos) return std::nullopt;
  try {
    return preset_config(model);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace

const char* bound_name(Bound b) { return b == Bound::compute ? "compute" : "memory"; }

const char* family_name(Family f) {
  switch (f) {
    case Family::gemm: return "gemm";
    case Family::attention: return "attention";
    case Family::gret: return "gret";
    case Family::norms: return "norms";
  }
  return "?";
}

// A run's measured ceilings (phase ceiling: the GEMM rate and the copy bandwidth of the same run)
// and the card and commit they name; the last of each where a file holds several.
struct RunCeilings {
  std::string card, fitted_at;
  double peak_flops = 0, bandwidth = 0;
};
static RunCeilings run_ceilings(const std::vector<ResultRow>& rows) {
  RunCeilings rc;
  for (const auto& r : rows) {
    if (r.phase != "ceiling" || r.method != "measured" || !r.value) continue;
    if (r.metric == "gemm_peak_tflops") rc.peak_flops = *r.value * 1e12;
    if (r.metric == "copy_bw_gbs") rc.bandwidth = *r.value * 1e9;
    rc.card = r.prov.device_name;
    rc.fitted_at = r.prov.git_sha + " " + r.prov.timestamp.substr(0, 10);
  }
  return rc;
}

Calibration fit_calibration(const std::vector<ResultRow>& rows, const std::string& source) {
  Calibration c;
  c.source = source;
  const RunCeilings rc = run_ceilings(rows);
  c.peak_flops = rc.peak_flops;
  c.bandwidth = rc.bandwidth;
  c.device_name = rc.card;
  c.fitted_at = rc.fitted_at;
  // Measured values by point and (phase, metric).
  std::map<Key, std::map<std::pair<std::string, std::string>, double>> measured;
  std::map<Key, RunnerLayout> layouts;  // as each point's prefill row says its runner ran
  std::map<Key, int64_t> chunks;        // and in prefill steps of how many tokens
  std::vector<double> others;
  for (const auto& r : rows) {
    if (!r.value || r.phase == "ceiling") continue;
    if (r.method != "measured" && r.method != "sampled" && r.method != "exact") continue;
    if (!preset_of(r.model)) continue;
    measured[{r.model, r.seq_len, r.batch}][{r.phase, r.metric}] = *r.value;
    if (r.phase == "prefill" && r.metric == "prefill_latency_s") {
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
  for (const auto& [key, m] : measured) {
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
    // The prefill's host time over its calls, at batch 1.
    if (const auto enq = get("prefill", "prefill_host_enqueue_s"); enq && *enq > 0 && batch == 1) {
      const int64_t rows = std::min(len, chunk);
      const cuda::RunnerLaunches n = launches_of(cfg, 1, rows, sheet.sm_count, lay.batched_global_kv, fused_from);
      const double steps = std::ceil(static_cast<double>(len) / static_cast<double>(rows));
      prefill_host_call.push_back(*enq / (steps * n.prefill_step + n.prefill_once));
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

CalibratedPhase calibrated_phase(const ModelConfig& cfg, const PhaseWork& w, bool prefill_phase,
                                 const Calibration& c, const DeviceSpec& ceil) {
  CalibratedPhase out;
  double kernels = 0;
  for (int f = 0; f < kFamilies; ++f) {
    const Family fam = static_cast<Family>(f);
    const double roof = family_roofline(w, fam, ceil);
    if (roof <= 0) continue;
    const Bound bound = family_bound(w, fam, ceil);
    const Bound other = bound == Bound::compute ? Bound::memory : Bound::compute;
    const FamilyFit* fit = &c.fit(prefill_phase, fam, bound);
    if (fit->points == 0) {
      const FamilyFit& alt = c.fit(prefill_phase, fam, other);
      out.fallback += std::string(out.fallback.empty() ? "" : ", ") + family_name(fam) + " " + bound_name(bound) +
                      (alt.points ? std::string(": the ") + bound_name(other) + "-bound fit" : ": the roofline");
      if (alt.points) fit = &alt;
    }
    out.family_s[f] = roof * fit->inverse_efficiency + layers_of(cfg, fam) * fit->per_layer_s;
    // Nor faster than the other resource at its sustained rate, where a fit
    // has one: work near the balance point (short query tiles over a long
    // cache) is bound by whichever of the two runs out first once the
    // kernels' efficiencies are counted, not by the raw rooflines.
    if (const FamilyFit& alt = c.fit(prefill_phase, fam, other); alt.points && fit != &alt)
      out.family_s[f] = std::max(out.family_s[f], bound_roofline(w, fam, other, ceil) * alt.inverse_efficiency);
    out.band = std::max(out.band, fit->worst_residual);
    kernels += out.family_s[f];
  }
  out.gap_s = kernels * (prefill_phase ? c.prefill_gap : c.decode_gap);
  out.total_s = kernels + out.gap_s;
  return out;
}

CalibratedPhase calibrated_prefill(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                   const DeviceSpec& ceil, int64_t batch, int64_t prompt, int64_t chunk,
                                   const RunnerLayout& layout) {
  const int64_t rows = static_cast<int64_t>(cuda::prefill_rows_per_sequence(
      static_cast<double>(batch), static_cast<double>(prompt), static_cast<double>(chunk)));
  // The work as the runners' kernels do it: the attention in tiles of query
  // rows (a batch prefilled together a few rows of each sequence a step pads
  // them), the FFN's up half fused where the layout says so.
  CalibratedPhase p =
      calibrated_phase(cfg, prefill_work(cfg, st, batch, prompt, rows, runner_kernels(cfg, layout)), true, c, ceil);
  const cuda::RunnerLaunches n = launches_of(cfg, batch, rows, sms_for(c, ceil), layout.batched_global_kv,
                                             runner_kernels(cfg, layout).ffn_up_fused_from_rows);
  const double steps = std::ceil(static_cast<double>(prompt) / static_cast<double>(rows));
  const double call_s = c.prefill_host_call_s > 0 ? c.prefill_host_call_s : c.host_call_s;
  p.host_s = call_s * (steps * n.prefill_step + n.prefill_once);
  p.total_s = std::max(p.total_s, p.host_s);
  return p;
}

double calibrated_memory(const ModelConfig& cfg, const Calibration& c, const DeviceSpec& dev, int64_t batch,
                         int64_t prompt, int64_t gen, int64_t chunk, const RunnerLayout& layout) {
  const double B = static_cast<double>(batch), P = static_cast<double>(prompt), G = static_cast<double>(gen),
               C = static_cast<double>(chunk);
  // The FFN's up half fused on every block of a prefill step (the layout's FFN row blocks; 0: whole steps).
  const auto rows = static_cast<int64_t>(std::min(B * cuda::prefill_rows_per_sequence(B, P, C), 1e15));
  const int64_t ffn_rows = cfg.is_yoco() ? layout.ffn_rows : 0;  // the Transformer's runner has no FFN row blocks
  const bool fused =
      layout.ffn_up_fused && cuda::gemm_swiglu::fused_on_every_block(rows, ffn_rows, cfg.dim, cfg.hidden_dim);
  if (!cfg.is_yoco()) return cuda::transformer_generation_bytes(cfg, B, P, G, C, fused).total();
  double workspace = 0;
  if (cfg.self_decoder() == SelfDecoderKind::gret) {
    const cuda::GretChunkShape shape =
        gret_step_shape(cfg, batch, static_cast<int64_t>(cuda::prefill_rows_per_sequence(B, P, C)));
    workspace = static_cast<double>(cuda::gret_chunk_workspace_bytes(shape, cuda::plan_gret_chunk(shape, sms_for(c, dev))));
  }
  // The eager decode step (the runner's default) keeps no records beside the states.
  return cuda::yoco_generation_bytes(cfg, B, P, G, C, workspace, 0.0, layout.batched_global_kv,
                                     static_cast<double>(ffn_rows), layout.delta_in_normed, fused,
                                     layout.shared_sublayers)
      .total();
}

double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk, double* band,
                             bool sampled_prefill, const RunnerLayout& layout) {
  const int64_t prompt = seq_len - gen;
  const CalibratedPhase p =
      sampled_prefill ? calibrated_prefill(cfg, st, c, ceil, 1, prompt, prefill_chunk, layout)
                      : calibrated_prefill(cfg, st, c, ceil, batch, prompt, prefill_chunk, layout);
  const double prefill = (sampled_prefill ? static_cast<double>(batch) : 1.0) * p.total_s;
  double decode = 0, b = p.band;
  for (int64_t i = 0; i < gen; ++i) {
    const CalibratedPhase d = calibrated_decode(cfg, st, c, ceil, batch, prompt + i, layout);
    decode += d.total_s;
    b = std::max(b, d.band);
  }
  if (band) *band = b;
  return static_cast<double>(batch * gen) / (prefill + decode);
}

std::vector<ResultRow> calibration_rows(const Calibration& c, const Provenance& prov) {
  std::vector<ResultRow> rows;
  auto add = [&](const std::string& phase, const std::string& metric, double v, const std::string& unit,
                 const std::string& notes) {
    rows.push_back(make_row(prov, "-", 0, 1, 0, "calibration:" + phase, metric, v, unit, "calibrated", 0, notes));
  };
  const std::string from = "fitted on " + c.source + " (" + c.device_name + ", " + c.fitted_at + ")";
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
            fit.points ? std::to_string(fit.points) + " points; " + from : "no points: the roofline";
        add(ph, "inverse_efficiency", fit.inverse_efficiency, "x", note);
        add(ph, "per_layer_s", fit.per_layer_s, "s", note);
        add(ph, "points", fit.points, "count", note);
        add(ph, "worst_residual", fit.worst_residual, "fraction", note);
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
                                  " batch-1 points of the prefill's host time (prefill_host_enqueue_s) / the "
                                  "runner's calls; " + from
                            : "no prefill host times in the sweep: a prefill's calls cost call_s");
  add("host", "prefill_points", c.prefill_host_points, "count", "batch-1 points with a prefill host time");
  add("ceilings", "sm_count", c.sm_count, "count", "the device's datasheet (the gRet plan of the memory model)");
  return rows;
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
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    const std::string at = path + ":" + std::to_string(i < line_of.size() ? line_of[i] : static_cast<int>(i) + 2);
    auto bad = [&](const std::string& why) -> InputError { return InputError(at + ": " + why); };
    if (r.phase.rfind("calibration:", 0) != 0) throw bad("phase '" + r.phase + "' is not a calibration row");
    if (!r.value || !std::isfinite(*r.value) || *r.value < 0)
      throw bad(r.metric + " needs a finite value >= 0");
    const double v = *r.value;
    const std::string ph = r.phase.substr(12);
    const std::string prefix = "calibrated on ";
    if (c.device_name.empty() && r.prov.device_name.rfind(prefix, 0) == 0)
      c.device_name = r.prov.device_name.substr(prefix.size());
    if (c.fitted_at.empty() && !c.device_name.empty()) {
      const size_t at_dev = r.notes.find("(" + c.device_name + ", ");
      if (at_dev != std::string::npos) {
        const size_t from = at_dev + c.device_name.size() + 3, close = r.notes.find(')', from);
        c.fitted_at = r.notes.substr(from, close == std::string::npos ? close : close - from);
      }
    }
    if (ph == "ceilings") {
      if (r.metric == "gemm_peak_tflops") c.peak_flops = v * 1e12, ceilings = true;
      else if (r.metric == "copy_bw_gbs") c.bandwidth = v * 1e9;
      else if (r.metric == "datasheet_tflops") c.datasheet_flops = v * 1e12;
      else if (r.metric == "datasheet_gbs") c.datasheet_bandwidth = v * 1e9;
      else if (r.metric == "sm_count") {
        if (v < 1 || v > 1e6 || v != std::floor(v)) throw bad("sm_count must be a whole count in [1, 1e6]");
        c.sm_count = static_cast<int>(v);
      }
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
        if (v > 1) throw bad("call_s must be below 1 s");
        c.host_call_s = v;
      } else if (r.metric == "points") {
        if (v > 1e9) throw bad("points must be a count below 1e9");
        c.host_points = static_cast<int>(v);
      } else if (r.metric == "prefill_call_s") {
        if (v > 1) throw bad("prefill_call_s must be below 1 s");
        c.prefill_host_call_s = v;
      } else if (r.metric == "prefill_points") {
        if (v > 1e9) throw bad("prefill_points must be a count below 1e9");
        c.prefill_host_points = static_cast<int>(v);
      } else {
        throw bad("unknown metric '" + r.metric + "' for calibration:host");
      }
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
                "<compute|memory>, calibration:<prefill|decode>, calibration:ceilings, calibration:memory, calibration:host)");
    FamilyFit& fit = (phase == "prefill" ? c.prefill : c.decode)[f][b];
    if (r.metric == "inverse_efficiency") {
      fit.inverse_efficiency = v;  // 0: a family whose time is its fixed cost alone
    } else if (r.metric == "per_layer_s") {
      fit.per_layer_s = v;
    } else if (r.metric == "points") {
      if (v > 1e9) throw bad("points must be a count below 1e9");
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
  return c;
}

}  // namespace yoco::cost

namespace yoco::cost {

std::string apply_what_if(Calibration& c, const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string lhs = spec.substr(0, eq), rhs = eq == std::string::npos ? "" : spec.substr(eq + 1);
  const size_t dot = lhs.find('.');
  const std::string fam = lhs.substr(0, dot), bound = dot == std::string::npos ? "" : lhs.substr(dot + 1);
  int f = -1;
  for (int k = 0; k < kFamilies; ++k)
    if (fam == family_name(static_cast<Family>(k))) f = k;
  const bool any_bound = bound.empty();
  if (f < 0 || (!any_bound && bound != "compute" && bound != "memory") || rhs.empty())
    throw InputError("--what-if: expected FAMILY[.BOUND]=ceiling|X (families gemm, attention, gret, norms; bounds "
                     "compute, memory; X an efficiency in (0, 1]), got '" + spec + "'");
  double inv = 1.0;
  if (rhs != "ceiling") {
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(rhs, &used);
    } catch (...) {
      used = 0;
    }
    if (used != rhs.size() || !(x > 0) || x > 1)
      throw InputError("--what-if: the efficiency must be 'ceiling' or a number in (0, 1], got '" + rhs + "'");
    inv = 1.0 / x;
  }
  for (auto* phase : {&c.prefill, &c.decode})
    for (int b = 0; b < 2; ++b)
      if (any_bound || b == (bound == "compute" ? 0 : 1)) {
        FamilyFit& fit = (*phase)[f][b];
        fit.inverse_efficiency = inv;
        fit.per_layer_s = 0;
        fit.points = std::max(fit.points, 1);  // stands as a fit: no fallback to another bound
      }
  return lhs + (rhs == "ceiling" ? " at its roofline (no fixed cost)" : " at " + rhs + " of its roofline");
}

RunnerLayout current_runner_layout() {
  RunnerLayout l{cuda::kBatchedGlobalKvByDefault, cuda::kDeltaInNormedRows, cuda::kFfnUpFusedByDefault};
  l.shared_sublayers = cuda::kSharedSublayerBuffers;
  return l;
}

// The whole number right after the first `words` in `notes` that digits
// follow (as reports/yocoreport/chunks.py reads them); `absent` where none do.
static int64_t number_after(const std::string& notes, const std::string& words, int64_t absent) {
  for (size_t at = notes.find(words); at != std::string::npos; at = notes.find(words, at + 1)) {
    int64_t n = 0;
    bool any = false;
    for (size_t i = at + words.size();
         i < notes.size() && std::isdigit(static_cast<unsigned char>(notes[i])) && n < (int64_t{1} << 50); ++i) {
      n = 10 * n + (notes[i] - '0');
      any = true;
    }
    if (any) return n;
  }
  return absent;
}

RunnerLayout runner_layout_of_notes(const std::string& notes) {
  RunnerLayout l{notes.find("global K/V batched") != std::string::npos,
                 notes.find("delta in the normed rows") != std::string::npos,
                 notes.find(cuda::kFfnUpFusedNote) != std::string::npos,
                 number_after(notes, cuda::kFfnRowBlocksNote, 0)};
  l.shared_sublayers = notes.find(cuda::kSharedSublayerNote) != std::string::npos;
  return l;
}

std::string runner_layout_note(const RunnerLayout& layout) {
  std::string note;
  if (layout.ffn_up_fused) note += std::string("; ") + cuda::kFfnUpFusedNote;
  if (layout.ffn_rows > 0) note += "; " + std::string(cuda::kFfnRowBlocksNote) + std::to_string(layout.ffn_rows);
  if (!layout.shared_sublayers && cuda::kSharedSublayerBuffers) note += std::string("; ") + cuda::kApartSublayerNote;
  return note;
}

int64_t prefill_chunk_of_notes(const std::string& notes) {
  const int64_t c = number_after(notes, "prefill chunk ", kDefaultPrefillChunk);
  return c > 0 ? c : kDefaultPrefillChunk;
}

const char* ffn_up_fused_note() { return cuda::kFfnUpFusedNote; }

KernelView runner_kernels(const ModelConfig& cfg, const RunnerLayout& layout) {
  KernelView k;
  k.attention_tile_rows = cuda::attn::kPrefillTileRows;
  // Served: gemm_swiglu::unsupported's shape rules for a step of that many rows (the device is the runner's).
  const cuda::gemm_swiglu::Shape s{cuda::gemm_swiglu::kMinRowsToFuse, cfg.dim, cfg.hidden_dim, cfg.dim, cfg.hidden_dim};
  if (layout.ffn_up_fused && cuda::gemm_swiglu::unsupported(s) == nullptr)
    k.ffn_up_fused_from_rows = cuda::gemm_swiglu::kMinRowsToFuse;
  return k;
}

CalibratedPhase calibrated_decode(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                  const DeviceSpec& ceil, int64_t batch, int64_t context, const RunnerLayout& layout) {
  return calibrated_phase(cfg, decode_work(cfg, st, batch, context, runner_kernels(cfg, layout)), false, c, ceil);
}

CalibratedPhase calibrated_prefill(const ModelConfig& cfg, const Storage& st, const Calibration& c,
                                   const DeviceSpec& ceil, int64_t batch, int64_t prompt, int64_t chunk) {
  return calibrated_prefill(cfg, st, c, ceil, batch, prompt, chunk, current_runner_layout());
}

double calibrated_memory(const ModelConfig& cfg, const Calibration& c, const DeviceSpec& dev, int64_t batch,
                         int64_t prompt, int64_t gen, int64_t chunk) {
  return calibrated_memory(cfg, c, dev, batch, prompt, gen, chunk, current_runner_layout());
}

double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk, double* band,
                             bool sampled_prefill) {
  return calibrated_throughput(cfg, st, c, ceil, seq_len, gen, batch, prefill_chunk, band, sampled_prefill,
                               current_runner_layout());
}

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
                                                const DeviceSpec& ceil) {
  std::vector<CalibrationCheck> out;
  const Storage st;
  for (const auto& r : rows) {
    if (!r.value || *r.value <= 0) continue;
    const auto cfg = preset_of(r.model);
    if (!cfg) continue;
    CalibrationCheck k{r.model, r.phase, r.seq_len, r.batch, r.gen_tokens, r.metric, *r.value, 0};
    // As the point's runner was laid out and chunked: its rows say so since
    // each choice became the default or an option; rows from before say
    // nothing (RunnerLayout, the default chunk).
    const RunnerLayout layout = runner_layout_of_notes(r.notes);
    const int64_t chunk = prefill_chunk_of_notes(r.notes);
    if (r.phase == "prefill" && r.metric == "prefill_latency_s" && r.method == "measured") {
      k.predicted = calibrated_prefill(*cfg, st, c, ceil, r.batch, r.seq_len, chunk, layout).total_s;
    } else if (r.phase == "decode" && r.metric == "decode_step_latency_s" && r.method == "measured") {
      k.predicted = calibrated_decode(*cfg, st, c, ceil, r.batch, r.seq_len, layout).total_s;
    } else if (r.phase == "throughput" && r.metric == "throughput_tokens_per_s" &&
               (r.method == "sampled" || r.method == "measured") && r.gen_tokens > 0 && r.gen_tokens < r.seq_len) {
      // As the point ran its prefill: the whole batch, or one prompt x batch ("prefill sampled" in its notes).
      const bool sampled = r.notes.find("prefill sampled") != std::string::npos;
      k.predicted =
          calibrated_throughput(*cfg, st, c, ceil, r.seq_len, r.gen_tokens, r.batch, chunk, nullptr, sampled, layout);
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
