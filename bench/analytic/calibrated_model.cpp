// The calibrated model's predictions (calibrated_model.hpp), and its what-if (apply_what_if: one
// family at its roofline or at another efficiency).
#include "calibrated_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "calibration_parts.hpp"
#include "prefill_versions.hpp"
#include "args.hpp"
#include "errors.hpp"
#include "runner/generation_bytes.hpp"

namespace yoco::cost {

using namespace calibration_detail;

CalibratedPhase calibrated_phase(const ModelConfig& cfg, const PhaseWork& w, bool prefill_phase,
                                 const Calibration& c, const DeviceSpec& ceil, double attention_compute_scale) {
  CalibratedPhase out;
  double kernels = 0;
  // The fitted rate, with the prefill attention's compute-bound time at the version the point ran: the
  // compute fit pricing compute-bound work (not memory-bound work that borrows it for want of its own).
  const FamilyFit* flash = &c.fit(true, Family::attention, Bound::compute);
  auto inverse_efficiency = [&](const FamilyFit& fit, Bound priced) {
    return fit.inverse_efficiency *
           (prefill_phase && &fit == flash && priced == Bound::compute ? attention_compute_scale : 1.0);
  };
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
    Bound fit_bound = fit == &c.fit(prefill_phase, fam, bound) ? bound : other;
    out.family_s[f] = roof * inverse_efficiency(*fit, bound) + layers_of(cfg, fam) * fit->per_layer_s;
    // Nor faster than the other resource at its sustained rate, where a fit
    // has one: work near the balance point (short query tiles over a long
    // cache) is bound by whichever of the two runs out first once the
    // kernels' efficiencies are counted, not by the raw rooflines.
    const FamilyFit* priced = fit;  // the fit the family's time came from
    if (const FamilyFit& alt = c.fit(prefill_phase, fam, other); alt.points && fit != &alt) {
      const double floor = bound_roofline(w, fam, other, ceil) * inverse_efficiency(alt, other);
      if (floor > out.family_s[f]) out.family_s[f] = floor, priced = &alt, fit_bound = other;
    }
    // A band from the fit's residuals only where it has them: not from the roofline, nor from a fit
    // through too few points to miss any (kMinBandPoints).
    if (!priced->banded()) {
      out.unbanded += std::string(out.unbanded.empty() ? "" : ", ") + family_name(fam) + " " + bound_name(fit_bound) +
                      (priced->points == 0 ? ": the roofline, no points"
                                           : ": " + std::to_string(priced->points) + " point" +
                                                 (priced->points == 1 ? "" : "s") + ", fewer than " +
                                                 std::to_string(kMinBandPoints));
    }
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
  std::string version_note;
  const double flash = prefill_version_scale(c, cfg, layout.attention_prefill_version, &version_note);
  const PhaseWork w = prefill_work(cfg, st, batch, prompt, rows, runner_kernels(cfg, layout));
  CalibratedPhase p = calibrated_phase(cfg, w, true, c, ceil, flash);
  // Said where the flash kernel's compute-bound time counts (not YOCO's gRet prefill: its one-row
  // cross attention is memory-bound).
  if (w[Part::attention].flops > 0 && family_bound(w, Family::attention, ceil) == Bound::compute)
    p.kernels = version_note;
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
    const int sms = sms_for(c, dev);
    workspace = cuda::gret_prefill_workspace_bytes(B, P, C, [&](double rows) {
      const cuda::GretChunkShape shape = gret_step_shape(cfg, batch, static_cast<int64_t>(rows));
      return cuda::gret_chunk_workspace_bytes(shape, cuda::plan_gret_chunk(shape, sms));
    });
  }
  // The eager decode step (the runner's default) keeps no records beside the states.
  return cuda::yoco_generation_bytes(cfg, B, P, G, C, workspace, 0.0, layout.batched_global_kv,
                                     static_cast<double>(ffn_rows), layout.delta_in_normed, fused,
                                     layout.shared_sublayers)
      .total();
}

double calibrated_throughput(const ModelConfig& cfg, const Storage& st, const Calibration& c, const DeviceSpec& ceil,
                             int64_t seq_len, int64_t gen, int64_t batch, int64_t prefill_chunk, double* band,
                             bool sampled_prefill, const RunnerLayout& layout, std::string* unbanded) {
  const int64_t prompt = seq_len - gen;
  const CalibratedPhase p =
      sampled_prefill ? calibrated_prefill(cfg, st, c, ceil, 1, prompt, prefill_chunk, layout)
                      : calibrated_prefill(cfg, st, c, ceil, batch, prompt, prefill_chunk, layout);
  const double prefill = (sampled_prefill ? static_cast<double>(batch) : 1.0) * p.total_s;
  double decode = 0, b = p.band;
  std::string why = p.unbanded.empty() ? "" : "prefill " + p.unbanded, decode_why;
  for (int64_t i = 0; i < gen; ++i) {
    const CalibratedPhase d = calibrated_decode(cfg, st, c, ceil, batch, prompt + i, layout);
    decode += d.total_s;
    b = std::max(b, d.band);
    if (decode_why.empty() && !d.unbanded.empty()) decode_why = "decode " + d.unbanded;
  }
  if (band) *band = b;
  if (unbanded) *unbanded = why + (why.empty() || decode_why.empty() ? "" : "; ") + decode_why;
  return static_cast<double>(batch * gen) / (prefill + decode);
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

// attention_prefill=vN: every point's prefill attention at version N's measured time, whatever version
// it ran (how much of a ratio rests on which of our flash kernels ran).
static std::string price_every_version_as(Calibration& c, const std::string& rhs) {
  const int t = rhs.size() == 2 && rhs[0] == 'v' ? rhs[1] - '0' : 0;
  if (t < 1 || t > kPrefillVersionSlots)
    throw InputError("--what-if: attention_prefill takes a flash prefill version, v1 to v" +
                     std::to_string(kPrefillVersionSlots) + ", got '" + rhs + "'");
  const int fit = c.attention_prefill_fit_version;
  const double r = c.attention_prefill_time_ratio[t - 1];
  if (fit == 0 || !(r > 0))
    throw InputError("--what-if attention_prefill=" + rhs + ": the calibration has no time for " + rhs +
                     (fit ? " beside its fit's v" + std::to_string(fit) + " (yoco calibrate --kernels)"
                          : " (its sweep names no flash prefill version)"));
  c.attention_prefill_priced_as = t;
  return "attention prefill at " + rhs + "'s time" + (t == fit ? " (the fit's own)" : "");
}

std::string apply_what_if(Calibration& c, const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string lhs = spec.substr(0, eq), rhs = eq == std::string::npos ? "" : spec.substr(eq + 1);
  if (lhs == "attention_prefill") return price_every_version_as(c, rhs);
  const size_t dot = lhs.find('.');
  const std::string fam = lhs.substr(0, dot), bound = dot == std::string::npos ? "" : lhs.substr(dot + 1);
  int f = -1;
  for (int k = 0; k < kFamilies; ++k)
    if (fam == family_name(static_cast<Family>(k))) f = k;
  const bool any_bound = dot == std::string::npos;  // "gemm." names no bound: refused, not read as "gemm"
  if (f < 0 || (!any_bound && bound != "compute" && bound != "memory") || rhs.empty())
    throw InputError("--what-if: expected FAMILY[.BOUND]=ceiling|X (families gemm, attention, gret, norms; bounds "
                     "compute, memory; X an efficiency in [1e-9, 1]) or attention_prefill=vN, got '" + spec + "'");
  double inv = 1.0;
  if (rhs != "ceiling") {
    // Not below 1e-9, the smallest a calibration file may hold (inverse_efficiency at most 1e9): 1e-320 made
    // the inverse inf and every row of the family inf, exit 0.
    const double x = cli::parse_decimal(rhs).value_or(0);
    if (!(x >= 1e-9) || x > 1)
      throw InputError("--what-if: the efficiency must be 'ceiling' or a number in [1e-9, 1], got '" + rhs + "'");
    inv = 1.0 / x;
  }
  // The what-if's efficiency is the attention's whatever kernel runs it: no version to price apart.
  if (f == static_cast<int>(Family::attention) && (any_bound || bound == "compute")) c.attention_prefill_fit_version = 0;
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

}  // namespace yoco::cost
