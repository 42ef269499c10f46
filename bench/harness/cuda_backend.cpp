// The CUDA backend of the sweep (cuda_backend.hpp). Compiled in every preset:
// the CUDA parts only with YOCO_HAVE_CUDA (yoco_cuda defines it for what links
// it); without CUDA every method throws, naming what is missing, so nothing can
// run on a backend that is not there.
#include "cuda_backend.hpp"

#if defined(YOCO_HAVE_DIST)
#include "dist_runner.hpp"
#endif

#include <stdexcept>

#include "cuda_status.hpp"
#include "cupti_collector.hpp"
#include "host_api_time.hpp"
#include "kernel_family.hpp"

#if defined(YOCO_HAVE_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>

#include "attention/prefill_version.hpp"
#include "runner/cuda_model.hpp"
#include "runner/runner_support.hpp"
#include "gret/gret_select.hpp"
#include "cuda_runner.hpp"
#include "transformer_cuda_model.hpp"
#include "device/device_ceilings.hpp"
#include "device/device_query.hpp"
#include "ops/ffn_up.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "stats.hpp"
#endif

namespace yoco::cli {

#if defined(YOCO_HAVE_CUDA)

namespace {

// One untimed decode step before each run of timed ones: the first step of a
// batch size captures and instantiates the step's CUDA graph, a cost a
// generation pays once, which a sampled decode would otherwise scale by
// gen / sample.
constexpr int64_t kDecodeWarmup = 1;
// Eager steps timed after a latency point's graph steps (phase decode_eager).
constexpr int64_t kEagerSteps = 16;
constexpr double kUsableFraction = 0.9;

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("CUDA error in " + what + ": " + cudaGetErrorString(e));
}

// The CudaRunner of a runner the backend made: itself, or (under mpirun) the
// one a sharded runner drives on this rank.
CudaRunner& cuda_runner_of(const ModelRunner& r) {
  const ModelRunner* p = &r;
#if defined(YOCO_HAVE_DIST)
  if (const auto* d = dynamic_cast<const DistRunner*>(p); d && d->local_runner()) p = d->local_runner();
#endif
  auto* c = dynamic_cast<CudaRunner*>(const_cast<ModelRunner*>(p));
  if (!c) throw std::logic_error("CudaBackend: a runner it did not create (not a CudaRunner)");
  return *c;
}

const char* const kStorageNote = "bf16 weights, caches and activations, fp32 gRet state and accumulation";

}  // namespace

struct CudaBackend::Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

std::vector<std::string> cuda_backend_missing() { return {}; }

std::string cuda_model_unsupported_reason(const ModelConfig& cfg) { return cuda::cuda_model_unsupported(cfg); }

std::vector<std::string> cuda_runner_switches() {
  cuda::global_kv_projection_from_env();
  cuda::ffn_row_block_from_env();
  cuda::ffn_fused_swiglu_from_env();
  cuda::shared_sublayer_buffers_from_env();
  cuda::gemm_algorithms_from_env();
  cuda::residual_in_gemm_from_env();
  cuda::residual_per_layer_from_env();
  cuda::gemm_small_rows_from_env();
  cuda::gret_chunk_variant_from_env();
  cuda::gret_decode_variant_from_env();
  std::vector<std::string> set;
  for (const char* name : {"YOCO_GLOBAL_KV", "YOCO_FFN_ROWS", "YOCO_FFN_FUSED", "YOCO_SUBLAYER_BUFFERS",
                           "YOCO_GEMM_ALGO", "YOCO_RESIDUAL_IN_GEMM", "YOCO_RESIDUAL_PER_LAYER", "YOCO_GEMV",
                           "YOCO_GRET_CHUNK", "YOCO_GRET_DECODE"})
    if (const char* v = std::getenv(name); v && *v) set.push_back(std::string(name) + "=" + v);
  return set;
}

CudaBackend::CudaBackend(const std::string& device_name) : events_(std::make_unique<Events>()) {
  const CudaStatus c = cuda_status();
  prov_ = Provenance::here("cuda", device_name.empty() ? c.device_name : device_name, c.driver);
  if (!c.device) throw InputError("--device cuda: " + c.why_not);
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo (the device's free memory)");
  usable_ = kUsableFraction * static_cast<double>(free_b);
  device_total_ = static_cast<double>(total_b);
  check(cudaEventCreate(&events_->start), "create the timer's events");
  check(cudaEventCreate(&events_->stop), "create the timer's events");
}

CudaBackend::~CudaBackend() = default;

Ceilings CudaBackend::measure_ceilings(Progress& progress) {
  progress.step("measuring the GPU's copy bandwidth and bf16 GEMM rate");
  return ceilings_of(cuda::measure_device_ceilings());
}

Ceilings CudaBackend::ceilings_of(const cuda::DeviceCeilings& m) const {
  if (!m.error.empty())
    throw DeviceError("measuring the device's ceilings (a device-to-device copy, a bf16 cuBLAS GEMM) failed: " +
                      m.error + "; nothing was measured");
  Ceilings c;
  c.rows.push_back({"copy_bw_gbs", m.copy_bw.median / 1e9, "GB/s", "measured", m.copy_bw.repeats, m.copy_desc,
                    m.copy_bw.min / 1e9, m.copy_bw.max / 1e9});
  c.rows.push_back({"gemm_peak_tflops", m.gemm_flops.median / 1e12, "TFLOP/s", "measured", m.gemm_flops.repeats,
                    m.gemm_desc, m.gemm_flops.min / 1e12, m.gemm_flops.max / 1e12});
  // Named like the CPU's, after the rows' device_name (--device-name), so that
  // analytic rows of runs that share a label join in `yoco compare`.
  c.roofline.name = "roofline of " + prov_.device_name + " (measured ceilings)";
  c.roofline.peak_flops = m.gemm_flops.median;
  c.roofline.bandwidth = m.copy_bw.median;
  c.roofline.memory_bytes = device_total_;
  c.roofline.source = "measured in this run: bf16 cuBLAS GEMM " + strf("%.1f", m.gemm_flops.median / 1e12) +
                      " TFLOP/s, device-to-device copy " + strf("%.1f", m.copy_bw.median / 1e9) +
                      " GB/s (read + write)";
  return c;
}

cost::Storage CudaBackend::analytic_storage(Precision p) const { return runner_storage("cuda", p); }

double CudaBackend::usable_memory_bytes() const { return usable_; }

double CudaBackend::generation_bytes(const ModelConfig& cfg, Precision, double batch, double prompt, double gen,
                                     double prefill_chunk) const {
  // The runners' own buffers (weights, caches, a prefill chunk's and the decode
  // step's activations, the cuBLAS workspace), by the runners' formulas: the
  // cost model's bf16 estimate counts one temporary per row and misses the fp32
  // residual and the fused projections, about half of what a chunk holds.
  return cfg.is_yoco() ? cuda::yoco_generation_device_bytes(cfg, batch, prompt, gen, prefill_chunk)
                       : cuda::transformer_generation_device_bytes(cfg, batch, prompt, gen, prefill_chunk);
}

std::unique_ptr<ModelRunner> CudaBackend::create_runner(const ModelConfig& cfg, Precision, uint64_t seed) {
  model_ = nullptr;
  cuda::CudaWeightSource src;
  src.seed = seed;
  std::unique_ptr<ModelRunner> r = create_cuda_runner(cfg, src);
  adopt(*r);
  return r;
}

void CudaBackend::adopt(ModelRunner& runner) {
  CudaRunner& cr = cuda_runner_of(runner);
  model_ = &cr.model();
  cr.on_destroy([this] { model_ = nullptr; });  // no dangling pointer once the sweep drops the runner
}

double CudaBackend::time(const std::function<void()>& region) {
  // On the model's stream: it is non-blocking, so events on the legacy stream
  // would not be ordered with its work. Before any runner: the legacy stream.
  cudaStream_t stream = model_ ? model_->stream() : nullptr;
  check(cudaEventRecord(events_->start, stream), "record the timer's start event");
  last_host_s_.reset();
  const auto t0 = std::chrono::steady_clock::now();
  region();
  last_host_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check(cudaEventRecord(events_->stop, stream), "record the timer's stop event");
  check(cudaEventSynchronize(events_->stop), "the timed region");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, events_->start, events_->stop), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e-3;
}

// How YOCO's runner projects the global K/V at `batch` (nothing to say at
// batch 1 or for the Transformer), in the words the calibrated check reads.
static std::string global_kv_note(const ModelConfig& cfg, int64_t batch) {
  if (!cfg.is_yoco() || batch <= 1) return "";
  return cuda::global_kv_projection_from_env() == cuda::GlobalKvProjection::batched ? "global K/V batched"
                                                                                     : "global K/V per sequence";
}

// The runner's layout in a memory row's notes, for the calibrated model's
// check (bench/analytic/runner_layout.hpp, RunnerLayout): what the formula
// must price the row as.
// The FFN's up half as one kernel (YOCO_FFN_FUSED=1 on a device it runs on, as the runners decide).
static std::string ffn_note() {
  if (!cuda::ffn_up_fused_here(cuda::ffn_fused_swiglu_from_env())) return "";
  return std::string(cuda::kFfnUpFusedNote) +
         (cuda::ffn_fused_ctas_from_env() == cuda::GemmSwigluCtas::pair ? cuda::kFfnUpInCtaPairsNote : "");
}

static std::string joined(std::string a, const std::string& b) {
  if (b.empty()) return a;
  return a.empty() ? b : a + "; " + b;
}

// YOCO's prefill FFN in row blocks (YOCO_FFN_ROWS=N; the Transformer's runner has none).
static std::string ffn_rows_note(const ModelConfig& cfg) {
  const int64_t n = cfg.is_yoco() ? cuda::ffn_row_block_from_env() : 0;
  return n > 0 ? cuda::kFfnRowBlocksNote + std::to_string(n) : "";
}

// YOCO's prefill sublayers in one buffer or a buffer each (YOCO_SUBLAYER_BUFFERS): a memory row
// always says which (rows from before either have neither: a buffer each); a prefill or throughput
// row only when apart, the departure from the default (reports/yocoreport/chunks.py tells the
// configurations of step `chunks` apart by it).
static std::string sublayers_note(const ModelConfig& cfg, bool memory_row) {
  if (!cfg.is_yoco()) return "";
  if (!cuda::shared_sublayer_buffers_from_env()) return cuda::kApartSublayerNote;
  return memory_row ? cuda::kSharedSublayerNote : "";
}

// The GEMMs' algorithms when tuned (YOCO_GEMM_ALGO=tuned), and the few rows' GEMV (YOCO_GEMV=1): every row's departure from the default (memory rows too, so that
// reports/yocoreport/chunks.py keeps a tuned run's points apart).
// The GEMV serves only the cublasGemmEx path (ops/gemm.cu): with the tuner on, no row may claim it.
static std::string gemm_note() {
  const bool tuned = cuda::gemm_algorithms_from_env() == cuda::GemmAlgorithms::tuned;
  return joined(tuned ? cuda::kGemmTunedNote : "",
                !tuned && cuda::gemm_small_rows_from_env() == cuda::GemmSmallRows::gemv ? cuda::kGemvNote : "");
}

// The sublayers' outputs added to the residual by their GEMMs (YOCO_RESIDUAL_IN_GEMM=1), or the residual
// stored once a layer (YOCO_RESIDUAL_PER_LAYER=1) where the runner takes it (launch_count.hpp: YOCO's
// prefill with its FFN whole and unfused, the Transformer where its attention output is d wide), so
// that a row never claims what did not run: on every row.
static std::string residual_note(const ModelConfig& cfg) {
  if (cuda::residual_in_gemm_from_env()) return cuda::kResidualInGemmNote;
  if (!cuda::residual_per_layer_from_env()) return "";
  const bool taken = cfg.is_yoco() ? ffn_note().empty() && cuda::ffn_row_block_from_env() == 0 &&
                                         cfg.hidden_dim >= cfg.dim
                                   : cfg.q_width() >= cfg.dim;
  return taken ? cuda::kResidualPerLayerNote : "";
}

// A gRet chunk or decode kernel named by YOCO_GRET_CHUNK / YOCO_GRET_DECODE rather than the selectors'
// choice: on every row of a gRet model, so that a reader, and reports/yocoreport/chunks.py, never take
// a named kernel's row for the default's. (The calibrated check prices only the sweep's rows, which
// name none.)
static std::string gret_kernel_note(const ModelConfig& cfg) {
  if (!cfg.is_yoco() || cfg.self_decoder() != SelfDecoderKind::gret) return "";
  const cuda::GretChunkVariant chunk = cuda::gret_chunk_variant_from_env();
  const cuda::GretDecodeVariant decode = cuda::gret_decode_variant_from_env();
  return joined(chunk == cuda::GretChunkVariant::automatic
                    ? ""
                    : std::string("gRet chunk kernel ") + cuda::gret_chunk_variant_name(chunk) + " named",
                decode == cuda::GretDecodeVariant::automatic
                    ? ""
                    : std::string("gRet decode step ") + cuda::gret_decode_variant_name(decode) + " named");
}

// The flash prefill version the model's prefill attention runs (the Transformer's, YOCO's SWA
// self-decoder's; YOCO's gRet prefill has none: its cross-decoder's last position is a decode kernel),
// on every row, so that the calibrated model prices the kernel each point ran (prefill_version.hpp).
static std::string attention_prefill_note(const ModelConfig& cfg, bool ring) {
  if (cfg.is_yoco() && cfg.self_decoder() != SelfDecoderKind::swa) return "";
  const cuda::CurrentDevice dev = cuda::current_device();
  if (dev.error != cudaSuccess) return "";
  const std::string v = std::to_string(
      cuda::flash_prefill_version(cfg.is_yoco() ? cfg.self_head_dim() : cfg.attn_head_dim(), dev.is_sm90()));
  // baselines/transformer_ring.cpp: the blocks before a rank's own run v1 (keys wholly before the queries).
  if (ring && !cfg.is_yoco()) return "ring attention: flash prefill v" + v + " on the diagonal, v1 off it";
  return cuda::kAttentionPrefillNote + v;
}

static std::string layout_note(const ModelRunner& runner, bool ring) {
  std::string note;
  if (runner.config().is_yoco() && cuda::kDeltaInNormedRows) note = "YOCO's prefill delta in the normed rows";
  note = joined(note, sublayers_note(runner.config(), true));
  note = joined(joined(joined(note, global_kv_note(runner.config(), cuda_runner_of(runner).model().batch())),
                      ffn_note()),
                ffn_rows_note(runner.config()));
  note = joined(joined(joined(note, gemm_note()), residual_note(runner.config())), gret_kernel_note(runner.config()));
  note = joined(note, attention_prefill_note(runner.config(), ring));
  return note.empty() ? note : "; " + note;
}

std::vector<std::string> CudaBackend::runner_log(const ModelRunner& runner) const {
  return cuda_runner_of(runner).model().gemm_tuning_record();
}

std::string CudaBackend::runner_note(const ModelConfig& cfg, int64_t batch) const {
  return joined(joined(joined(joined(global_kv_note(cfg, batch), ffn_note()), ffn_rows_note(cfg)),
                       sublayers_note(cfg, false)),
                joined(joined(joined(gemm_note(), residual_note(cfg)), gret_kernel_note(cfg)),
                       attention_prefill_note(cfg, ring_attention_)));
}

void CudaBackend::reset_peak_memory() {
  if (!model_) return;
  // The previous point's caches and (larger) activation buffers go first, so
  // this point's readings and peaks are its own.
  model_->release_buffers();
  model_->arena().reset_peaks();
}

std::vector<Reading> CudaBackend::memory_breakdown(const ModelRunner& runner, int64_t n, Precision) {
  const cuda::ArenaReport r = cuda_runner_of(runner).model().arena().report();
  const int64_t cap = runner.capacity();
  const std::string note = "the device arena's buffers after prefilling " + std::to_string(n) + " tokens (" +
                           (cap == n ? std::string("caches of exactly that")
                                     : "caches sized for " + std::to_string(cap) + ": the decode steps that follow") +
                           "); " + kStorageNote + layout_note(runner, ring_attention_);
  const double w = static_cast<double>(r.at(cuda::MemCategory::weights));
  const double kv = static_cast<double>(r.at(cuda::MemCategory::kv_cache));
  const double st = static_cast<double>(r.at(cuda::MemCategory::state));
  const double act = static_cast<double>(r.peak_at(cuda::MemCategory::activations));
  const double other = r.device_known ? static_cast<double>(r.other) : 0.0;
  const std::string other_note =
      r.device_known ? "cudaMemGetInfo's used memory beyond the arena's buffers, device-wide (CUDA context, "
                       "libraries, allocator rounding, any other process on the GPU)"
                     : "unknown: cudaMemGetInfo failed (" + r.device_error + "); counted as 0";
  return {
      {"mem_weights_bytes", w, "B", "measured", 1, note, {}, {}},
      {"mem_kv_cache_bytes", kv, "B", "measured", 1, note, {}, {}},
      {"mem_state_bytes", st, "B", "measured", 1, note, {}, {}},
      {"mem_activations_bytes", act, "B", "measured", 1,
       note + "; activations: the arena's peak of activation buffers over this point's prefills so far", {}, {}},
      {"mem_other_bytes", other, "B", "measured", 1, other_note, {}, {}},
      // The model's own memory, as on the CPU and in the analytic rows; `other`
      // (device-wide: the context, libraries, any other process) stands beside it
      // and is in mem_device_peak_bytes.
      {"mem_total_bytes", w + kv + st + act, "B", "measured", 1,
       "weights + kv_cache + state + activations (peak); mem_other_bytes not included" + layout_note(runner, ring_attention_), {}, {}},
  };
}

std::vector<Reading> CudaBackend::memory_peaks() {
  if (!model_) throw std::logic_error("CudaBackend::memory_peaks before create_runner");
  const cuda::ArenaReport r = model_->arena().report();
  return {{"mem_device_peak_bytes", static_cast<double>(r.total_peak + (r.device_known ? r.other : 0)), "B",
           "measured", 1,
           "the device arena's high-water mark over this point's prefills and decode steps + other (cudaMemGetInfo)" +
               std::string(r.device_known ? "" : "; other unknown: " + r.device_error),
           {}, {}}};
}

int64_t CudaBackend::decode_warmup_steps() const { return kDecodeWarmup; }
int64_t CudaBackend::decode_extra_steps() const { return kEagerSteps; }

std::string CudaBackend::device_lost() {
  // An error left by earlier work is returned once; a lost context keeps failing.
  if (cudaDeviceSynchronize() == cudaSuccess) return "";
  cudaGetLastError();
  const cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? "" : std::string("the CUDA context is lost: ") + cudaGetErrorString(e);
}

std::vector<PhaseReading> CudaBackend::decode_extras(ModelRunner& runner, int64_t batch) {
  CudaRunner& cr = cuda_runner_of(runner);
  cuda::CudaModel& m = cr.model();
  // The graph steps just timed (the warm-up step, which captured the graph, left out).
  std::vector<double> graph_enqueue = cr.step_enqueue_s();
  const int64_t drop = std::min<int64_t>(kDecodeWarmup, static_cast<int64_t>(graph_enqueue.size()));
  graph_enqueue.erase(graph_enqueue.begin(), graph_enqueue.begin() + drop);
  const int64_t ctx0 = cr.position();

  std::vector<double> eager_s, eager_enqueue;
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 1);
  const bool graphs = m.decode_graphs();
  m.set_decode_graphs(false);
  try {
    for (int64_t i = 0; i < kEagerSteps; ++i) {
      eager_s.push_back(time([&] { cr.run_decode_step(tokens); }));
      eager_enqueue.push_back(m.last_step_enqueue_s());
    }
  } catch (...) {
    m.set_decode_graphs(graphs);
    throw;
  }
  m.set_decode_graphs(graphs);

  auto reading = [](const std::string& metric, const Summary& s, const std::string& notes) {
    return Reading{metric, s.median, "s", "measured", s.count, notes, s.min, s.max};
  };
  const std::string ctx = " at context " + std::to_string(ctx0) + ".." + std::to_string(ctx0 + kEagerSteps - 1);
  std::vector<PhaseReading> out;
  out.push_back({"decode_eager",
                 reading("decode_step_latency_s", summarize(eager_s),
                         "median of " + std::to_string(kEagerSteps) +
                             " eager decode steps (the step's kernels launched one by one, no CUDA graph)" + ctx +
                             ", right after the decode phase's graph steps; CUDA events on the model's stream")});
  out.push_back({"decode_eager", reading("decode_host_enqueue_s", summarize(eager_enqueue),
                                         "host seconds to launch an eager step's kernels (steady_clock around the "
                                         "enqueue), median of " + std::to_string(kEagerSteps) + ctx)});
  if (!graph_enqueue.empty())
    out.push_back({"decode", reading("decode_host_enqueue_s", summarize(graph_enqueue),
                                     "host seconds to enqueue the step's CUDA graph (steady_clock around the replay), "
                                     "median of the " + std::to_string(graph_enqueue.size()) +
                                         " timed steps (the warm-up step that captured the graph left out)")});
  return out;
}

// The host's CUDA API calls of the profiled region (host_api_time.hpp): what enqueued the work, what
// waited for it, and each function's share, per unit (none where CUPTI did not trace them: the .kernels
// row says why).
static void append_host_api_rows(const std::string& phase, const std::string& per,
                                 const std::vector<ActivityRecord>& records, int64_t units,
                                 std::vector<PhaseReading>& out) {
  const std::string host = phase + ".host";
  const HostApiBreakdown h = aggregate_host_api(records, units);
  if (h.records == 0) return;
  const std::string source =
      "CUPTI runtime and driver API records (host timestamps; each call's time includes CUPTI's tracing of it), "
      "per " + per + "; the region includes the timer's cudaEventRecord and cudaEventSynchronize calls and the "
      "collector's closing cudaDeviceSynchronize";
  const std::string counted =
      strf("%.6g calls per ", h.calls_per_unit) + per +
      strf(" (a driver call inside a runtime call counted once: %lld nested",
           static_cast<long long>(h.nested_driver_calls)) +
      (h.untimed > 0 ? strf("; %lld untimed, as 0 s", static_cast<long long>(h.untimed)) : "") + ")";
  out.push_back({host,
                 {"api_enqueue_s", h.enqueue_seconds_per_unit, "s", "measured", units,
                  "host seconds in CUDA calls that enqueue work or set state, " + counted + "; " + source, {}, {}}});
  out.push_back({host,
                 {"api_wait_s", h.wait_seconds_per_unit, "s", "measured", units,
                  "host seconds in CUDA calls that wait for the device (synchronize, blocking copies); " + source,
                  {}, {}}});
  for (const ApiTime& a : h.apis)
    out.push_back({host + ":" + a.name,
                   {"api_time_s", a.seconds_per_unit, "s", "measured", units,
                    std::string(a.kind == ActivityKind::runtime_api ? "runtime" : "driver") +
                        (a.waits ? ", waits for the device" : "") + strf(", %.6g calls per ", a.calls_per_unit) +
                        per + "; " + source,
                    {}, {}}});
}

bool CudaBackend::has_kernel_profiler() const { return true; }

std::vector<PhaseReading> CudaBackend::kernel_breakdown(const std::string& phase, const std::function<void()>& region,
                                                        int64_t units, double timed_s) {
  if (units < 1) throw std::invalid_argument("CudaBackend::kernel_breakdown: units must be >= 1");
  if (!cupti_) cupti_ = std::make_unique<CuptiCollector>();
  // The model's stream idle, then the region once under CUPTI, timed as
  // time() times it (CUDA events on the model's stream).
  if (model_) model_->synchronize();
  cupti_->start();
  double wall_s = 0;
  try {
    wall_s = time(region);
  } catch (...) {
    try {
      cupti_->stop();
    } catch (...) {
    }
    throw;
  }
  const std::vector<ActivityRecord> records = cupti_->stop();
  const uint64_t dropped = cupti_->dropped_records(), unreadable = cupti_->unreadable_records();

  int64_t kernel_records = 0, copy_records = 0;
  for (const ActivityRecord& r : records) {
    kernel_records += r.kind == ActivityKind::kernel ? 1 : 0;
    copy_records += r.kind == ActivityKind::memcpy || r.kind == ActivityKind::memset ? 1 : 0;
  }
  if (kernel_records == 0)
    throw std::runtime_error("CUPTI delivered no kernel records for the " + phase + " region (" +
                             std::to_string(copy_records) + " memcpy / memset records, " +
                             strf("%.6g", wall_s) + " s on the GPU): CUPTI's kernel tracing does not work in this "
                             "process");

  const KernelBreakdown b = aggregate_kernel_times(records, units);
  const KernelCut cut = cut_kernels(b, 0.999);
  const double u = static_cast<double>(units);
  const std::string per = phase == "decode" ? "decode step" : phase;
  const std::string source = "CUPTI activity records (concurrent kernel), per " + per +
                             (units > 1 ? " (" + std::to_string(units) + " " + per + "s profiled)" : "");
  std::string caveat;
  if (dropped > 0)
    caveat += "; CUPTI dropped " + std::to_string(dropped) + " records (no buffer space): times are low";
  if (unreadable > 0) caveat += "; " + std::to_string(unreadable) + " CUPTI buffers ended in an unreadable record";
  if (b.untimed > 0) caveat += "; " + std::to_string(b.untimed) + " records without timestamps counted as 0 s";
  if (!cupti_->detach_error().empty()) caveat += "; CUPTI stayed attached (" + cupti_->detach_error() + ")";
  auto launches = [&](double per_unit) { return strf("%.6g launches per ", per_unit) + per; };

  std::vector<PhaseReading> out;
  for (const FamilyTime& f : b.families)
    out.push_back({phase + "." + f.family,
                   {"gpu_time_s", f.seconds_per_unit, "s", "measured", units,
                    std::to_string(f.kernels) + " kernels, " + launches(f.launches_per_unit) + "; " + source + caveat,
                    {}, {}}});
  for (const KernelTime& k : cut.kept)
    out.push_back({phase + ":" + k.short_name,
                   {"kernel_time_s", k.seconds_per_unit, "s", "measured", units,
                    "family " + k.family + ", " + launches(k.launches_per_unit) + "; " + source + caveat, {}, {}}});
  if (cut.has_rest)
    out.push_back({phase + ":(rest)",
                   {"kernel_time_s", cut.rest.seconds_per_unit, "s", "measured", units,
                    std::to_string(cut.rest_kernels) + " kernels past the first 99.9% of the time, merged (family " +
                        cut.rest.family + "), " + launches(cut.rest.launches_per_unit) + "; " + source + caveat,
                    {}, {}}});
  out.push_back({phase + ".kernels",
                 {"gpu_time_s", b.seconds_per_unit, "s", "measured", units,
                  "all " + std::to_string(b.kernels.size()) + " kernels, memcpys and memsets (" +
                      std::to_string(b.records) + " records), " + launches(b.launches_per_unit) + "; " + source +
                      caveat +
                      (cupti_->host_api_error().empty() ? "" : "; no host API rows: " + cupti_->host_api_error()),
                  {}, {}}});
  const double under_s = wall_s / u;
  if (timed_s > 0)
    out.push_back({phase + ".kernels",
                   {"cupti_overhead_fraction", under_s / timed_s - 1, "fraction", "measured", units,
                    strf("%.6g s per ", under_s) + per + " under CUPTI (CUDA events around " + std::to_string(units) +
                        " " + per + (units > 1 ? "s" : "") + ") vs " + strf("%.6g s", timed_s) +
                        " without it (the timed median)" +
                        (cupti_->host_api_error().empty()
                             ? "; the host's API calls traced too (since 2026-11-27: more overhead where the host "
                               "sets the pace than in earlier runs)"
                             : ""),
                    {}, {}}});
  if (wall_s > 0)
    out.push_back({phase + ".kernels",
                   {"gpu_busy_fraction", b.seconds_per_unit * u / wall_s, "fraction", "measured", units,
                    strf("the records' summed GPU time (%.6g s) over the region's time under CUPTI (%.6g s, CUDA "
                         "events); kernels that overlap on several streams can add up past 1",
                         b.seconds_per_unit * u, wall_s) +
                        caveat,
                    {}, {}}});
  append_host_api_rows(phase, per, records, units, out);
  return out;
}



#else  // no CUDA in this build

namespace {

[[noreturn]] void lacks(const std::string& what) {
  throw std::logic_error("the CUDA sweep backend cannot " + what +
                         ": this yoco was built without CUDA (cpu preset); build the cuda preset");
}

}  // namespace

struct CudaBackend::Events {};

std::vector<std::string> cuda_backend_missing() {
  return {"CUDA: this yoco was built without CUDA (cpu preset); build the cuda preset (cmake --preset cuda)"};
}

std::string cuda_model_unsupported_reason(const ModelConfig&) { return ""; }

std::vector<std::string> cuda_runner_switches() { return {}; }

CudaBackend::CudaBackend(const std::string& device_name) {
  const CudaStatus c = cuda_status();
  prov_ = Provenance::here("cuda", device_name.empty() ? c.device_name : device_name, c.driver);
}

CudaBackend::~CudaBackend() = default;

Ceilings CudaBackend::measure_ceilings(Progress&) { lacks("measure its ceilings"); }
cost::Storage CudaBackend::analytic_storage(Precision) const { lacks("name its analytic storage"); }
double CudaBackend::usable_memory_bytes() const { lacks("read its device memory"); }
double CudaBackend::generation_bytes(const ModelConfig&, Precision, double, double, double, double) const {
  lacks("estimate a generation's memory");
}
std::unique_ptr<ModelRunner> CudaBackend::create_runner(const ModelConfig&, Precision, uint64_t) {
  lacks("create runners");
}
void CudaBackend::adopt(ModelRunner&) { lacks("time a runner"); }
Ceilings CudaBackend::ceilings_of(const cuda::DeviceCeilings&) const { lacks("measure its ceilings"); }
double CudaBackend::time(const std::function<void()>&) { lacks("time (CUDA events)"); }
std::string CudaBackend::runner_note(const ModelConfig&, int64_t) const { return ""; }
std::vector<std::string> CudaBackend::runner_log(const ModelRunner&) const { return {}; }
void CudaBackend::reset_peak_memory() { lacks("reset its peak memory mark"); }
std::vector<Reading> CudaBackend::memory_breakdown(const ModelRunner&, int64_t, Precision) {
  lacks("read its memory");
}
std::vector<Reading> CudaBackend::memory_peaks() { lacks("read its device peak"); }
int64_t CudaBackend::decode_warmup_steps() const { lacks("run decode steps"); }
int64_t CudaBackend::decode_extra_steps() const { lacks("run decode steps"); }
std::vector<PhaseReading> CudaBackend::decode_extras(ModelRunner&, int64_t) { lacks("run decode steps"); }
std::string CudaBackend::device_lost() { return ""; }
bool CudaBackend::has_kernel_profiler() const { return false; }
std::vector<PhaseReading> CudaBackend::kernel_breakdown(const std::string&, const std::function<void()>&, int64_t,
                                                        double) {
  lacks("profile kernels (CUPTI)");
}

#endif

}  // namespace yoco::cli
