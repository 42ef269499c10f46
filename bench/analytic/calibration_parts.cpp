// What the calibration's files share (calibration_parts.hpp), and the names of its families and bounds.
#include "calibration_parts.hpp"

#include <algorithm>

#include "errors.hpp"

namespace yoco::cost {

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

}  // namespace yoco::cost

namespace yoco::cost::calibration_detail {

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
                                 bool batched_global_kv, int64_t ffn_fused_from_rows) {
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

void require_point_batch(const ResultRow& r, const std::string& source) {
  if (r.batch >= 1) return;
  throw InputError(source + ": the " + r.phase + " " + r.metric + " row of " + r.model + " at seq_len " +
                   std::to_string(r.seq_len) + " has batch " + std::to_string(r.batch) +
                   " (column 'batch': a measured point has at least 1 sequence)");
}

RunCeilings run_ceilings(const std::vector<ResultRow>& rows) {
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

}  // namespace yoco::cost::calibration_detail
