// YOCO on the GPU (DESIGN.md §3-4): the pair of reference/yoco_model.cpp
// YocoModel. The self-decoder (gRet: fused QKVG GEMM, RoPE with the key scale
// folded in, log-decays, the chunk kernel, per-head norm + gate; or SWA:
// windowed flash prefill over the ring, ring-buffer FlashDecoding) produces the
// one global K/V cache, written once; the cross-decoder runs for the last
// position only at prefill (the early exit) and reads that cache with
// FlashDecoding at decode. Decode steps replay a captured CUDA graph.
#include <algorithm>
#include <chrono>
#include <functional>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "attention/cache_ops.hpp"
#include "attention/cache_plan.hpp"
#include "runner/cuda_model.hpp"
#include "runner/generation_bytes.hpp"
#include "ops/elementwise.hpp"
#include "errors.hpp"
#include "attention/flash_decode.hpp"
#include "attention/flash_prefill.hpp"
#include "ops/gemm.hpp"
#include "ops/ffn_up.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_gate.hpp"
#include "gret/gret_recurrent.hpp"
#include "gret/gret_select.hpp"
#include "inference_checks.hpp"
#include "ops.hpp"
#include "param_layout.hpp"
#include "runner/runner_support.hpp"
#include "runner/shard_link.hpp"
#include "runner/sublayer_buffers.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

std::string self_prefix(int64_t l) { return "self_decoder.layers." + std::to_string(l) + "."; }
std::string cross_prefix(int64_t l) { return "cross_decoder.layers." + std::to_string(l) + "."; }

// The weights one GEMM reads together (DeviceWeights groups).
std::vector<std::vector<std::string>> fused_groups(const ModelConfig& c) {
  std::vector<std::vector<std::string>> g;
  for (int64_t l = 0; l < c.n_self_layers(); ++l) {
    const std::string p = self_prefix(l);
    if (c.self_decoder() == SelfDecoderKind::gret)
      g.push_back({p + "mixer.q_proj.weight", p + "mixer.k_proj.weight", p + "mixer.v_proj.weight",
                   p + "mixer.g_proj.weight"});
    else
      g.push_back({p + "mixer.q_proj.weight", p + "mixer.k_proj.weight", p + "mixer.v_proj.weight"});
    g.push_back({p + "ffn.fc1.weight", p + "ffn.gate.weight"});
  }
  g.push_back({"cross_decoder.k_proj.weight", "cross_decoder.v_proj.weight"});
  for (int64_t l = 0; l < c.n_cross_layers(); ++l) g.push_back({cross_prefix(l) + "ffn.fc1.weight", cross_prefix(l) + "ffn.gate.weight"});
  return g;
}


// Extra decode-state bytes per gRet layer that the selected decode step keeps
// beside the state (gret_decode_state_extra_bytes), after the states.
int64_t gret_extra_bytes_per_layer(GretDecodeVariant decode, const ModelConfig& c, int64_t batch) {
  return gret_decode_state_extra_bytes(decode, batch, c.n_self_heads, c.self_head_dim());
}

PrefillAttentionShape attention_shape(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t q_rows,
                                      int64_t capacity, int64_t q_stride, int64_t kv_stride, int64_t window) {
  PrefillAttentionShape a;
  a.batch = batch;
  a.n_heads = heads;
  a.n_kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.q_rows = q_rows;
  a.capacity = capacity;
  a.q_stride = q_stride;
  a.kv_stride = kv_stride;
  a.window = window;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return a;
}

// Each layer's weights, looked up once (the eager decode step launches ~20
// kernels per layer; a string lookup per launch would be host overhead).
struct FfnWeights {
  const bf16 *final_norm = nullptr, *w13 = nullptr, *w2 = nullptr;  // w13 = [W1; W3]
};
struct SelfLayerWeights {
  const bf16 *mixer_norm = nullptr, *proj = nullptr, *gate_logits = nullptr, *out = nullptr;  // proj = [Wq; Wk; Wv(; Wg)]
  FfnWeights ffn;
};
struct CrossLayerWeights {
  const bf16 *mixer_norm = nullptr, *q = nullptr, *out = nullptr;
  FfnWeights ffn;
};

// The fp32 residual stream of `rows` rows and the bf16 output of a sublayer
// not yet added to it: the add happens inside the next norm (add + RMSNorm in
// one pass), so the stream is read and written once per sublayer.
struct Residual {
  float* x = nullptr;
  bf16* delta = nullptr;
  int64_t rows = 0;
  bool pending = false;
};

// Where a sublayer's output projection goes: the bf16 delta that the next add + RMSNorm adds, or
// (YOCO_RESIDUAL_IN_GEMM=1, the prefill's self-decoder) the fp32 residual itself, added by the GEMM
// (beta 1), with no delta and no add pass after.
struct SublayerOut {
  bf16* delta = nullptr;
  float* residual = nullptr;  // set: accumulate here
  static SublayerOut into_delta(const Residual& r) { return {r.delta, nullptr}; }
};

// The decode step's buffers (B rows each), looked up once per step before
// the enqueue, so that an eager step's host time is its launches alone.
struct StepBuffers {
  int64_t* tokens = nullptr;
  float *x = nullptr, *z = nullptr, *log_gamma = nullptr, *workspace = nullptr, *logits = nullptr;
  bf16 *delta = nullptr, *h = nullptr, *q = nullptr, *o = nullptr, *proj = nullptr, *kv_row = nullptr,
       *ffn_in = nullptr, *ffn_hidden = nullptr;
};

class YocoCudaModel final : public CudaModel {
 public:
  // link: null for the whole sequence on this GPU, else this rank's shard of
  // it (runner/shard_link.hpp; outlives the model).
  YocoCudaModel(const ModelConfig& cfg, const CudaWeightSource& source, ShardLink* link);
  ~YocoCudaModel() override;

  const ModelConfig& config() const override { return cfg_; }
  void prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length, int64_t max_new_tokens,
               int64_t prefill_chunk) override;
  void decode_step(const std::vector<int64_t>& tokens) override;
  void skip_positions(int64_t n) override;
  std::vector<float> logits() override;
  std::vector<float> forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) override;
  std::vector<std::string> gemm_tuning_record() const override { return gemm_.tuning_record(); }
  void release_buffers() override {
    drop_generation();
    scratch_.clear();
  }

 private:
  void drop_generation();
  // Caches for `batch` sequences of `capacity` tokens (`rows` of them in this
  // rank's global K/V: all of them unsharded), zeroed state, positions.
  void allocate_generation(int64_t batch, int64_t capacity, int64_t rows);
  // Embedding and the self-decoder over `batch` x `n` tokens at positions
  // s..s+n-1 (tokens already on the device), then the global K/V of those
  // tokens written into the cache rows s..s+n-1. Leaves M (the self-decoder
  // output) in the residual "x".
  void self_decoder_chunk(const int64_t* tokens, int64_t batch, int64_t n, int64_t s);
  // A prefill step's working sets for `rows` rows (batch x n): the mixer's, the FFN's, the global
  // K/V's rows, carved from one buffer (runner/sublayer_buffers.hpp) unless YOCO_SUBLAYER_BUFFERS
  // = apart asked for a buffer each.
  struct StepWork {
    bf16 *proj = nullptr, *out = nullptr, *window = nullptr, *w13 = nullptr, *hidden = nullptr, *kv_rows = nullptr;
    float *gate_logits = nullptr, *log_decay = nullptr;
  };
  StepWork step_work(int64_t batch, int64_t n);
  void gret_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s, const StepWork& w,
                        const SublayerOut& out);
  void swa_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s, const StepWork& w,
                       const SublayerOut& out);
  // h13: [min(rows, ffn_block(rows)), 2F], act: [.., F] buffers of the
  // caller's; the rows in blocks of ffn_block(rows).
  void ffn(const FfnWeights& w, const bf16* h, int64_t rows, const SublayerOut& out, bf16* h13, bf16* act);
  // A sublayer's output projection, `rows` rows of a[.., k] · wᵀ into `out` from row `row0` on.
  void project_out(const bf16* a, int64_t rows, int64_t k, const bf16* w, const SublayerOut& out, int64_t row0,
                   const std::string& what);
  int64_t ffn_block(int64_t rows) const { return ffn_rows_ > 0 ? std::min(rows, ffn_rows_) : rows; }
  // Rows of the FFN's W1|W3 output a step of `rows` rows needs: a block's, or 0 where every block
  // takes the fused kernel (the memory formula's ffn_w13_rows asks the same).
  int64_t ffn_w13_rows(int64_t rows) const {
    return ffn_fused_ && gemm_swiglu::fused_on_every_block(rows, ffn_rows_, d_, F_) ? 0 : ffn_block(rows);
  }
  void norm(Residual& r, const bf16* w, bf16* out);
  // The cross-decoder layers over r.rows rows of the residual: norm, q
  // projection, `attend(q, out)` (RoPE on q, then attention over the global
  // cache), out projection, FFN. Then the final norm into h.
  void cross_decoder(Residual& r, bf16* h, bf16* q, bf16* a, bf16* ffn_in, bf16* ffn_hidden,
                     const std::function<void(bf16* q, bf16* out)>& attend);
  // The cross-decoder and LM head for one query per sequence at the device
  // positions (the early exit at prefill; every decode step). r: [batch, d].
  void cross_decoder_step(Residual& r, int64_t batch, const StepBuffers& b);
  // The decode step's work, all on the stream (captured into the graph).
  void enqueue_decode_step(int64_t batch, const StepBuffers& b);
  // Its self-decoder part: the new token through the self-decoder, its row
  // appended to the global cache; leaves M in r (nothing pending).
  void enqueue_self_decoder_step(int64_t batch, const StepBuffers& b, Residual& r);
  // A decode step on one rank of a sharded sequence (eager: it meets the
  // other ranks twice a cross layer).
  void sharded_decode_step(const StepBuffers& b);
  // Device positions as the kernels read them: positions_ (absolute: RoPE,
  // ring slots) and lengths_ (this rank's visible global-cache rows); the
  // append row and the SWA ring's count are those two unsharded.
  void set_sharded_positions(int64_t pos, int64_t visible_rows);
  // The link's shard of a prompt of `length` tokens (the link plans it before
  // each prefill or forward), checked, into shard_; the generation dropped.
  void take_shard(const char* what, int64_t length);
  const int64_t* append_rows() const { return link_ ? append_rows_.as<int64_t>() : positions_.as<int64_t>(); }
  const int64_t* ring_lengths() const { return link_ ? ring_lengths_.as<int64_t>() : lengths_.as<int64_t>(); }
  StepBuffers prepare_decode_buffers(int64_t batch);

  bool gret() const { return cfg_.self_decoder() == SelfDecoderKind::gret; }
  int64_t self_width() const { return (gret() ? 4 : 3) * d_; }  // fused projection row
  float* gret_state(int64_t l) const {
    return state_.as<float>() + l * batch_ * Hs_ * D_ * D_;
  }
  void* gret_pending(int64_t l) const {
    return state_.as<unsigned char>() + Ls_ * batch_ * Hs_ * D_ * D_ * 4 +
           l * gret_extra_bytes_per_layer(decode_, cfg_, batch_);
  }
  bf16* swa_ring(int64_t l) const { return state_.as<bf16>() + l * batch_ * W_ * 2 * d_; }
  DecodeAttentionShape cross_decode_shape(int64_t batch) const;
  DecodeAttentionShape swa_decode_shape(int64_t batch) const;
  int64_t decode_workspace_size(int64_t batch) const;

  ModelConfig cfg_;
  int64_t d_, Ls_, Lc_, Hs_, D_, H_, Hkv_, Da_, qw_, kvw_, F_, V_, W_;
  float eps_;
  // The gRet kernels, as the selectors answer for this model (their per-run
  // overrides read once, here).
  GretDecodeVariant decode_ = GretDecodeVariant::eager;
  GretUpdateBranches update_branches_{1};  // the split step's state updates (side stream made on first use)
  GretChunkVariant chunk_variant_ = GretChunkVariant::automatic;
  GlobalKvProjection global_kv_ = kDefaultGlobalKv;
  int64_t ffn_rows_ = 0;  // the FFN's row block (0: the whole step)
  bool ffn_fused_ = false;  // the W1|W3 GEMM with SwiGLU in its epilogue (YOCO_FFN_FUSED, on a device it runs on)
  bool residual_in_gemm_ = false;  // the prefill's sublayer outputs added to the residual by their GEMMs
  bool shared_sublayers_ = kSharedSublayerBuffers;  // one buffer for a step's sublayers (YOCO_SUBLAYER_BUFFERS)
  std::vector<SelfLayerWeights> self_w_;
  std::vector<CrossLayerWeights> cross_w_;
  std::vector<std::string> self_names_, cross_names_;  // NVTX range names, made once
  const bf16 *embed_ = nullptr, *kv_norm_ = nullptr, *wkv_ = nullptr, *final_norm_ = nullptr, *lm_head_ = nullptr;
  Gemm gemm_;
  DeviceBuffer gemm_workspace_, self_freq_, cross_freq_;
  Scratch scratch_;
  DeviceBuffer kv_;     // [batch, capacity, 2 kvw] bf16: K-hat | V-hat (kv_cache)
  // gRet [Ls, batch, Hs, D, D] fp32, then [Ls] of the decode step's extra bytes (gret_decode_state_extra_bytes)
  // | SWA rings [Ls, batch, W, 2d] bf16 (category state)
  DeviceBuffer state_;
  DeviceBuffer positions_, lengths_;  // [batch] int64: the next token's position, and position + 1
  // Sharded only: this rank's shard and its link, the first position its
  // global-cache rows hold, the rows a sequence has there; [batch] int64 the
  // row the next token appends to, and the SWA ring's token count.
  ShardLink* link_ = nullptr;
  Shard shard_;
  int64_t row0_ = 0, rows_ = 0;
  DeviceBuffer append_rows_, ring_lengths_;
  int cross_splits_ = 1, swa_splits_ = 1;
  uint64_t generation_ = 0;
  int64_t logits_rows_ = 0;
  StepGraph graph_;
  TokenUpload upload_;
};

YocoCudaModel::YocoCudaModel(const ModelConfig& cfg, const CudaWeightSource& source, ShardLink* link)
    : cfg_(cfg), scratch_(arena_), link_(link) {
  if (!cfg_.is_yoco()) throw InputError(cfg_.name + " is not a YOCO config");
  if (const std::string why = cuda_model_unsupported(cfg_); !why.empty())
    throw InputError(cfg_.name + " cannot run on the CUDA runners: " + why);
  d_ = cfg_.dim;
  Ls_ = cfg_.n_self_layers();
  Lc_ = cfg_.n_cross_layers();
  Hs_ = cfg_.n_self_heads;
  D_ = cfg_.self_head_dim();
  H_ = cfg_.n_attn_heads;
  Hkv_ = cfg_.n_attn_kv_heads;
  Da_ = cfg_.attn_head_dim();
  qw_ = cfg_.q_width();
  kvw_ = cfg_.kv_width();
  F_ = cfg_.hidden_dim;
  V_ = cfg_.vocab_size;
  W_ = cfg_.window();
  eps_ = static_cast<float>(cfg_.norm_eps);
  decode_ = select_gret_decode(cfg_.self_head_dim(), gret_decode_variant_from_env());
  // Its side stream now, not inside the first decode step's capture.
  if (decode_ == GretDecodeVariant::split)
    check_cuda(update_branches_.prepare(), "create the gRet state-update stream");
  chunk_variant_ = gret_chunk_variant_from_env();
  global_kv_ = global_kv_projection_from_env();
  ffn_rows_ = ffn_row_block_from_env();
  ffn_fused_ = ffn_up_fused_here(ffn_fused_swiglu_from_env());
  shared_sublayers_ = shared_sublayer_buffers_from_env();
  residual_in_gemm_ = residual_in_gemm_from_env();
  if (!gemm_.ok()) throw std::runtime_error("cuBLAS: " + gemm_.error());
  weights_ = DeviceWeights::create(arena_, cfg_, source, fused_groups(cfg_), stream_);
  auto ffn_of = [&](const std::string& p) {
    return FfnWeights{weights_[p + "final_layer_norm.weight"], weights_[p + "ffn.fc1.weight"], weights_[p + "ffn.fc2.weight"]};
  };
  for (int64_t l = 0; l < Ls_; ++l) {
    const std::string p = self_prefix(l);
    SelfLayerWeights w;
    w.mixer_norm = weights_[p + "mixer_layer_norm.weight"];
    w.proj = weights_[p + "mixer.q_proj.weight"];  // the first of the fused group
    if (gret()) w.gate_logits = weights_[p + "mixer.gt_proj.weight"];
    w.out = weights_[p + "mixer.out_proj.weight"];
    w.ffn = ffn_of(p);
    self_w_.push_back(w);
    self_names_.push_back("self-decoder layer " + std::to_string(l));
  }
  for (int64_t l = 0; l < Lc_; ++l) {
    const std::string p = cross_prefix(l);
    cross_w_.push_back({weights_[p + "mixer_layer_norm.weight"], weights_[p + "mixer.q_proj.weight"],
                        weights_[p + "mixer.out_proj.weight"], ffn_of(p)});
    cross_names_.push_back("cross-decoder layer " + std::to_string(l));
  }
  embed_ = weights_["embed_tokens.weight"];
  kv_norm_ = weights_["cross_decoder.kv_layer_norm.weight"];
  wkv_ = weights_["cross_decoder.k_proj.weight"];  // [Wk; Wv]
  final_norm_ = weights_["layer_norm.weight"];
  lm_head_ = weights_["output_projection.weight"];
  self_freq_ = upload_table(arena_, rope_inv_freq_linspace(D_, cfg_.rope_theta), "self-decoder RoPE table", stream_);
  cross_freq_ = upload_table(arena_, rope_inv_freq_linspace(Da_, cfg_.rope_theta), "cross-decoder RoPE table", stream_);
  gemm_workspace_ = arena_.require(MemCategory::activations, kCublasWorkspaceBytes, "activations: cuBLAS workspace");
  check_gemm(gemm_.set_workspace(gemm_workspace_.get(), kCublasWorkspaceBytes), "set the cuBLAS workspace");
  check_gemm(gemm_.choose_algorithms(gemm_algorithms_from_env()), "choose the GEMM algorithms");
}

YocoCudaModel::~YocoCudaModel() {
  cudaStreamSynchronize(stream_);  // nothing in flight may use the buffers freed below
  graph_.invalidate();
}

void YocoCudaModel::drop_generation() {
  cudaStreamSynchronize(stream_);  // nothing in flight may still use the buffers freed here
  graph_.invalidate();
  kv_.reset();
  state_.reset();
  positions_.reset();
  lengths_.reset();
  append_rows_.reset();
  ring_lengths_.reset();
  batch_ = position_ = capacity_ = rows_ = 0;
  logits_rows_ = 0;
}

DecodeAttentionShape YocoCudaModel::cross_decode_shape(int64_t batch) const {
  DecodeAttentionShape s;
  s.batch = batch;
  s.n_heads = H_;
  s.n_kv_heads = Hkv_;
  s.head_dim = Da_;
  s.capacity = rows_;
  s.window = 0;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Da_)));
  s.kv_stride = 2 * kvw_;
  return s;
}

DecodeAttentionShape YocoCudaModel::swa_decode_shape(int64_t batch) const {
  DecodeAttentionShape s;
  s.batch = batch;
  s.n_heads = Hs_;
  s.n_kv_heads = Hs_;
  s.head_dim = D_;
  s.capacity = W_;
  s.window = W_;
  s.ring = true;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D_)));
  s.kv_stride = 2 * d_;
  return s;
}

int64_t YocoCudaModel::decode_workspace_size(int64_t batch) const {
  int64_t n = decode_workspace_floats(cross_decode_shape(batch), cross_splits_);
  if (!gret()) n = std::max(n, decode_workspace_floats(swa_decode_shape(batch), swa_splits_));
  return std::max<int64_t>(n, 1);
}

void YocoCudaModel::allocate_generation(int64_t batch, int64_t capacity, int64_t rows) {
  const std::string what = std::to_string(batch) + " x " + std::to_string(rows) + " tokens";
  if (rows > INT64_MAX / (4 * kvw_) / batch) {
    drop_generation();
    throw DeviceOutOfMemory("kv_cache: the global K/V of " + what + " does not fit (the size overflows 64 bits)");
  }
  const int64_t kv_bytes = batch * rows * 2 * kvw_ * 2;
  const int64_t gret_layer_bytes =
      batch * Hs_ * D_ * D_ * 4 + gret_extra_bytes_per_layer(decode_, cfg_, batch);
  const int64_t state_bytes = gret() ? Ls_ * gret_layer_bytes : Ls_ * batch * W_ * 2 * d_ * 2;
  // A generation of the same shape as the one before keeps its buffers (zeroed
  // again below): freeing and allocating them anew put a device-wide
  // cudaFree and cudaMalloc calls inside every timed prefill of a benchmark's
  // repeats -- at the small presets' 4K, a prefill is well under a millisecond.
  // (Sharded, take_shard has dropped the generation already: a shard never keeps one.)
  const bool keep = kv_ && state_ && positions_ && batch == batch_ && kv_.bytes() == kv_bytes &&
                    state_.bytes() == state_bytes && (!link_ || (append_rows_ && ring_lengths_));
  if (keep) {
    cudaStreamSynchronize(stream_);  // as drop_generation: no replay of the old graph in flight (errors surface later)
    graph_.invalidate();             // re-captured for the new generation (generation_ below), as after an allocation
    batch_ = position_ = capacity_ = rows_ = 0;
    logits_rows_ = 0;
  } else {
    drop_generation();
    kv_ = arena_.require(MemCategory::kv_cache, kv_bytes, "kv_cache: the global K/V of " + what);
    state_ = arena_.require(MemCategory::state, state_bytes,
                            std::string("state: ") + (gret() ? "gRet states" : "SWA rings") + " of " +
                                std::to_string(batch) + " sequences");
    positions_ = arena_.require(MemCategory::state, batch * 8, "state: decode positions");
    lengths_ = arena_.require(MemCategory::state, batch * 8, "state: decode lengths");
    if (link_) {
      append_rows_ = arena_.require(MemCategory::state, batch * 8, "state: decode append rows");
      ring_lengths_ = arena_.require(MemCategory::state, batch * 8, "state: decode ring lengths");
    }
  }
  // Zeroed: a key tile cut by the causal edge loads rows not written yet, and a
  // masked key's P = 0 times a NaN left in reused memory would still be NaN.
  check_cuda(cudaMemsetAsync(kv_.get(), 0, static_cast<size_t>(kv_bytes), stream_), "zero the global K/V");
  check_cuda(cudaMemsetAsync(state_.get(), 0, static_cast<size_t>(state_bytes), stream_), "zero the state");
  check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, 0, stream_), "positions");
  batch_ = batch;
  capacity_ = capacity;
  rows_ = rows;
  ++generation_;
  const int sms = device_sm_count();
  cross_splits_ = choose_decode_splits(cross_decode_shape(batch), rows, sms);
  // Sharded, the cross attention always leaves split partials for the combine across ranks.
  if (link_) cross_splits_ = std::max(cross_splits_, 2);
  if (!gret()) swa_splits_ = choose_decode_splits(swa_decode_shape(batch), W_, sms);
}

void YocoCudaModel::norm(Residual& r, const bf16* w, bf16* out) {
  if (r.pending) check_cuda(launch_add_rms_norm(r.x, r.delta, w, r.rows, d_, eps_, out, stream_), "add + RMSNorm");
  else check_cuda(launch_rms_norm(r.x, w, r.rows, d_, eps_, out, stream_), "RMSNorm");
  r.pending = false;
}

void YocoCudaModel::project_out(const bf16* a, int64_t rows, int64_t k, const bf16* w, const SublayerOut& out,
                                int64_t row0, const std::string& what) {
  if (out.residual) check_gemm(gemm_.accumulate_f32(a, rows, k, w, d_, out.residual + row0 * d_, stream_), what);
  else check_gemm(gemm_.linear(a, rows, k, w, d_, out.delta + row0 * d_, stream_), what);
}

void YocoCudaModel::ffn(const FfnWeights& w, const bf16* h, int64_t rows, const SublayerOut& out, bf16* h13,
                        bf16* a) {
  const int64_t block = ffn_block(rows);
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    // h13 holds a block's rows (StepWork::w13, the step buffers' batch), or is null where the step fuses.
    check_gemm(ffn_up_swiglu(gemm_, h + r0 * d_, n, d_, w.w13, F_, h13, h13 ? block : 0, a, ffn_fused_, stream_),
               "ffn W1|W3 + SwiGLU");
    project_out(a, n, F_, w.w2, out, r0, "ffn W2");
  }
}

YocoCudaModel::StepWork YocoCudaModel::step_work(int64_t batch, int64_t n) {
  const int64_t R = batch * n, block = ffn_block(R), w13_rows = ffn_w13_rows(R);
  const int64_t window_rows = gret() ? 0 : batch * (W_ - 1 + n);
  const int64_t kv_rows = batch > 1 && global_kv_ == GlobalKvProjection::batched ? R : 0;
  StepWork w;
  if (!shared_sublayers_) {  // a buffer each, by name (the layout before 2026-11-27)
    w.proj = scratch_.bf16("self qkvg", R * self_width());
    if (gret()) {
      w.gate_logits = scratch_.f32("self gate logits", R * Hs_);
      w.log_decay = scratch_.f32("self log decay", R * Hs_);
    } else {
      w.window = scratch_.bf16("swa window", window_rows * 2 * d_);
    }
    w.out = scratch_.bf16("self mixer out", R * d_);
    if (w13_rows > 0) w.w13 = scratch_.bf16("ffn in", w13_rows * 2 * F_);
    w.hidden = scratch_.bf16("ffn hidden", block * F_);
    if (kv_rows > 0) w.kv_rows = scratch_.bf16("global K/V rows", kv_rows * 2 * kvw_);
    return w;
  }
  const sublayer::Mixer m = sublayer::mixer(gret(), R, d_, Hs_, window_rows);
  const sublayer::Ffn f = sublayer::ffn(w13_rows, block, F_);
  auto* base = static_cast<unsigned char*>(
      scratch_.get("sublayers", sublayer::bytes(m, f, sublayer::kv_rows_bytes(kv_rows, kvw_))));
  w.proj = reinterpret_cast<bf16*>(base + m.proj);
  if (gret()) {
    w.gate_logits = reinterpret_cast<float*>(base + m.gate_logits);
    w.log_decay = reinterpret_cast<float*>(base + m.log_decay);
  } else {
    w.window = reinterpret_cast<bf16*>(base + m.window);
  }
  w.out = reinterpret_cast<bf16*>(base + m.out);
  if (w13_rows > 0) w.w13 = reinterpret_cast<bf16*>(base + f.w13);
  w.hidden = reinterpret_cast<bf16*>(base + f.hidden);
  if (kv_rows > 0) w.kv_rows = reinterpret_cast<bf16*>(base);
  return w;
}

void YocoCudaModel::gret_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s,
                                     const StepWork& w, const SublayerOut& out) {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t R = batch * n, SW = self_width();
  bf16* qkvg = w.proj;
  float* z = w.gate_logits;
  float* lg = w.log_decay;
  bf16* o = w.out;
  check_gemm(gemm_.linear(h, R, d_, self_w_[l].proj, SW, qkvg, stream_), p + "q|k|v|g");
  // z in fp32: a bf16 z would shift log gamma by up to ~1.7 % (cuda/gret/gret_gate.hpp).
  check_gemm(gemm_.linear_f32(h, R, d_, self_w_[l].gate_logits, Hs_, z, stream_), p + "gt_proj");
  const double* f = self_freq_.as<double>();
  // q and k adjacent in each row: one pass, k scaled by D^-1/2 after its rotation.
  check_cuda(launch_rope(qkvg, R, SW, 2 * Hs_, D_, s, n, f, RopeLayout::interleaved, stream_,
                         1.0 / std::sqrt(static_cast<double>(D_)), /*unscaled_heads=*/Hs_),
             p + "RoPE q, k");
  check_cuda(launch_gret_log_decay(z, Hs_, R, Hs_, static_cast<float>(cfg_.gate_logit_normalizer), lg, stream_),
             p + "log decay");
  GretChunkShape shape;
  shape.batch = batch;
  shape.heads = Hs_;
  shape.head_dim = D_;
  shape.seq_len = n;
  shape.row_stride = SW;
  const GretChunkPlan plan = select_gret_chunk(shape, device_sm_count(), chunk_variant_);
  const size_t ws_bytes = gret_chunk_workspace_bytes(shape, plan);
  void* ws = ws_bytes ? scratch_.get("gret chunk workspace", static_cast<int64_t>(ws_bytes)) : nullptr;
  // The per-head norm and gate are part of the launch that writes the final o (kernel 6's epilogue, else a
  // kernel after the chunk).
  const GretNormGate norm_gate{qkvg + 3 * d_, SW, eps_};
  check_cuda(launch_gret_chunk(qkvg, qkvg + d_, qkvg + 2 * d_, lg, gret_state(l), o, shape, plan, ws, ws_bytes, stream_,
                               link_ ? nullptr : &norm_gate),
             p + "gRet chunk + norm + gate");
  // Sharded: the chunk kernel ran from a zero state; with the state entering
  // this shard (the scan over the lower ranks) it runs again, and its outputs
  // and final state are the unsharded ones. (A correction of o by exp(G_t) q_t
  // S_in would save this second pass: cuda/runner/NOTES-runners.md.)
  if (link_) {
    if (link_->gret_state_in(l, gret_state(l), lg, batch, n, Hs_, D_, stream_))
      check_cuda(launch_gret_chunk(qkvg, qkvg + d_, qkvg + 2 * d_, lg, gret_state(l), o, shape, plan, ws, ws_bytes,
                                   stream_, &norm_gate),
                 p + "gRet chunk + norm + gate from the incoming state");
    else
      check_cuda(launch_gret_norm_gate(o, norm_gate.g, SW, R, Hs_, D_, eps_, o, stream_), p + "norm + gate");
  }
  project_out(o, R, d_, self_w_[l].out, out, 0, p + "out_proj");
}

void YocoCudaModel::swa_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s,
                                    const StepWork& w, const SublayerOut& out) {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t R = batch * n, SW = self_width();
  bf16* qkv = w.proj;
  bf16* o = w.out;
  check_gemm(gemm_.linear(h, R, d_, self_w_[l].proj, SW, qkv, stream_), p + "q|k|v");
  const double* f = self_freq_.as<double>();
  check_cuda(launch_rope(qkv, R, SW, 2 * Hs_, D_, s, n, f, RopeLayout::interleaved, stream_), p + "RoPE q, k");
  // The window a chunk's queries see: the ring's last W-1 positions before s,
  // unrolled in order, then the chunk's own keys. Masks are relative, so the
  // window buffer's row r stands for position first + r.
  const int64_t first = std::max<int64_t>(0, s - (W_ - 1)), prev = s - first, rows = prev + n;
  bf16* win = w.window;  // [batch, rows, 2d] of its [batch, W - 1 + n, 2d]
  int64_t* prev_dev = scratch_.i64("swa window start", batch);
  int64_t* chunk_start = scratch_.i64("chunk start", batch);
  int64_t* chunk_len = scratch_.i64("chunk length", batch);
  // Set by kernels: a pageable copy here would wait for the stream inside the timed prefill.
  check_cuda(launch_set_positions(prev_dev, nullptr, batch, prev, stream_), "window start");
  check_cuda(launch_set_positions(chunk_start, nullptr, batch, s, stream_), "chunk start");
  check_cuda(launch_set_positions(chunk_len, nullptr, batch, n, stream_), "chunk length");
  bf16* ring = swa_ring(l);
  // Sharded: the window before this shard's first position comes from the lower ranks, into the ring's slots.
  if (link_ && s == shard_.begin) link_->swa_window_in(l, qkv + d_, SW, batch, n, d_, W_, ring, stream_);
  check_cuda(launch_ring_gather(ring, 2 * d_, W_, batch, first, prev, 2 * d_, win, rows, 2 * d_, stream_),
             p + "window from the ring");
  check_cuda(launch_cache_write_rows(qkv + d_, SW, batch, n, 2 * d_, prev_dev, win, rows, 2 * d_, 0, stream_),
             p + "window: the chunk's keys");
  const PrefillAttentionShape a = attention_shape(batch, Hs_, Hs_, D_, n, rows, SW, 2 * d_, W_);
  check_cuda(launch_flash_prefill(qkv, win, win + d_, prev_dev, chunk_len, a, o, nullptr, stream_), p + "SWA attention");
  // Then the ring takes the chunk's last W positions (after the gather read it).
  check_cuda(launch_cache_write_rows(qkv + d_, SW, batch, n, 2 * d_, chunk_start, ring, W_, 2 * d_, W_, stream_),
             p + "ring update");
  project_out(o, R, d_, self_w_[l].out, out, 0, p + "out_proj");
}

void YocoCudaModel::self_decoder_chunk(const int64_t* tokens, int64_t batch, int64_t n, int64_t s) {
  const int64_t R = batch * n;
  Residual r;
  r.rows = R;
  r.x = scratch_.f32("residual", R * d_);
  // The sublayers' output (delta) shares the normed rows' buffer (issue 34:
  // 2d bytes a row off the step's working set, 0.2 GB at yoco-3b's 32K
  // chunk). Safe because each sublayer has read all of h before it writes
  // delta (the mixers' projections and the FFN's W1|W3 of a row block come
  // before their out_proj / W2 of those rows), and the add + RMSNorm that
  // reads delta and writes h reads a row whole before its block barrier and
  // writes it after (cuda/ops/elementwise.cu, rms_norm_kernel).
  bf16* h = scratch_.bf16("normed", R * d_);
  static_assert(kDeltaInNormedRows, "the memory formula (generation_bytes.hpp) follows this layout");
  r.delta = h;
  const StepWork work = step_work(batch, n);
  // Each sublayer's output: into delta, or added to the residual by its output projection's GEMM.
  const SublayerOut out = residual_in_gemm_ ? SublayerOut{nullptr, r.x} : SublayerOut::into_delta(r);
  check_cuda(launch_embedding(tokens, R, embed_, d_,
                              static_cast<float>(std::sqrt(static_cast<double>(d_))), r.x, stream_),
             "embedding");
  {
    NvtxRange range("self-decoder");
    for (int64_t l = 0; l < Ls_; ++l) {
      NvtxRange layer(self_names_[l]);
      norm(r, self_w_[l].mixer_norm, h);
      if (gret()) gret_mixer_chunk(l, h, batch, n, s, work, out);
      else swa_mixer_chunk(l, h, batch, n, s, work, out);
      r.pending = out.residual == nullptr;
      norm(r, self_w_[l].ffn.final_norm, h);
      ffn(self_w_[l].ffn, h, R, out, work.w13, work.hidden);
      r.pending = out.residual == nullptr;
    }
  }
  NvtxRange range("global K/V");
  norm(r, kv_norm_, h);  // leaves M in r.x
  const bf16* wkv = wkv_;  // [Wk; Wv]
  if (batch > 1 && global_kv_ == GlobalKvProjection::batched) {
    // One GEMM for the batch's rows, RoPE on K (position s + row % n), then
    // each sequence's n rows into its cache at s: 4 launches, not 2 a sequence.
    bf16* rows = work.kv_rows;
    int64_t* start = scratch_.i64("chunk start", batch);
    check_gemm(gemm_.linear(h, R, d_, wkv, 2 * kvw_, rows, stream_), "global K/V projection (batch)");
    check_cuda(launch_rope(rows, R, 2 * kvw_, Hkv_, Da_, s, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
               "global K RoPE (batch)");
    check_cuda(launch_set_positions(start, nullptr, batch, s - row0_, stream_), "chunk start");
    check_cuda(launch_cache_write_rows(rows, 2 * kvw_, batch, n, 2 * kvw_, start, kv_.as<bf16>(), rows_, 2 * kvw_, 0,
                                       stream_),
               "global K/V rows into the cache");
    return;
  }
  // One GEMM per sequence, straight into its cache rows (batch 1: no copy).
  for (int64_t b = 0; b < batch; ++b) {
    bf16* dst = kv_.as<bf16>() + (b * rows_ + s - row0_) * 2 * kvw_;
    check_gemm(gemm_.linear(h + b * n * d_, n, d_, wkv, 2 * kvw_, dst, stream_), "global K/V projection");
    check_cuda(launch_rope(dst, n, 2 * kvw_, Hkv_, Da_, s, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
               "global K RoPE");
  }
}

void YocoCudaModel::cross_decoder(Residual& r, bf16* h, bf16* q, bf16* a, bf16* ffn_in, bf16* ffn_hidden,
                                  const std::function<void(bf16* q, bf16* out)>& attend) {
  NvtxRange range("cross-decoder");
  for (int64_t l = 0; l < Lc_; ++l) {
    NvtxRange layer(cross_names_[l]);
    const CrossLayerWeights& w = cross_w_[l];
    norm(r, w.mixer_norm, h);
    check_gemm(gemm_.linear(h, r.rows, d_, w.q, qw_, q, stream_), "cross-decoder q_proj");
    attend(q, a);
    check_gemm(gemm_.linear(a, r.rows, qw_, w.out, d_, r.delta, stream_), "cross-decoder out_proj");
    r.pending = true;
    norm(r, w.ffn.final_norm, h);
    ffn(w.ffn, h, r.rows, SublayerOut::into_delta(r), ffn_in, ffn_hidden);
    r.pending = true;
  }
  norm(r, final_norm_, h);
}

void YocoCudaModel::cross_decoder_step(Residual& r, int64_t batch, const StepBuffers& b) {
  const DecodeAttentionShape shape = cross_decode_shape(batch);
  const bf16* k = kv_.as<bf16>();
  float* ws = b.workspace;
  bf16* h = b.h;
  float* logits = b.logits;
  cross_decoder(r, h, b.q, b.o, b.ffn_in, b.ffn_hidden, [&](bf16* qv, bf16* out) {
    check_cuda(launch_rope_at(qv, batch, qw_, H_, Da_, positions_.as<int64_t>(), 1, cross_freq_.as<double>(),
                              RopeLayout::interleaved, 1.0, stream_),
               "cross-decoder RoPE q");
    check_cuda(launch_flash_decode(qv, k, k + kvw_, lengths_.as<int64_t>(), shape, cross_splits_, ws, out, stream_),
               "cross-decoder FlashDecoding over the global cache");
    if (link_) {
      const DecodePartials parts = decode_partials(shape, cross_splits_, ws);
      link_->attention_across(parts.part_o, parts.part_lse, batch, H_, cross_splits_, Da_, out, "cross_partial",
                              stream_);
    }
  });
  check_gemm(gemm_.linear_f32(h, batch, d_, lm_head_, V_, logits, stream_), "LM head");
  logits_rows_ = batch;
}

void YocoCudaModel::prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length, int64_t max_new_tokens,
                            int64_t prefill_chunk) {
  if (batch < 1) throw InputError("prefill needs a batch of at least one sequence");
  if (length > INT64_MAX / batch || static_cast<int64_t>(tokens.size()) != batch * length)
    throw InputError("prefill: " + std::to_string(tokens.size()) + " tokens for batch " + std::to_string(batch) +
                     " x length " + std::to_string(length));
  TokenBatch tb;
  tb.batch = batch;
  tb.length = length;
  check_prefill_args(tb, max_new_tokens, prefill_chunk);
  if (max_new_tokens > INT64_MAX - length) throw InputError("prompt + tokens to generate overflow");
  validate_tokens(cfg_, tokens);
  if (link_) {
    take_shard("prefill", length);
    row0_ = shard_.begin;  // this rank's cache rows start at its first position
  }
  NvtxRange range("prefill");
  try {
    // Sharded: this rank's positions, as one step (each layer meets the other
    // ranks' finished shards), its rows of the global K/V (the last rank's
    // with room for the generated ones).
    const int64_t begin = link_ ? row0_ : 0, end = link_ ? row0_ + shard_.length : length, held = end - begin;
    const int64_t rows = link_ ? held + (shard_.last() ? max_new_tokens : 0) : length + max_new_tokens;
    allocate_generation(batch, length + max_new_tokens, rows);
    // The decode step's buffers now, so that an out-of-memory shows at the
    // prefill and the first step allocates nothing.
    const StepBuffers step = prepare_decode_buffers(batch);
    const int64_t chunk = link_ ? held : cache_plan::prefill_tokens_per_sequence(prefill_chunk, batch, length);
    int64_t* tok = scratch_.i64("tokens", batch * chunk);
    std::vector<int64_t> ids(static_cast<size_t>(batch * chunk));
    for (int64_t s = begin; s < end; s += chunk) {
      NvtxRange c("prefill chunk at " + std::to_string(s));
      const int64_t n = std::min(chunk, end - s);
      for (int64_t b = 0; b < batch; ++b)
        std::copy_n(tokens.begin() + b * length + s, n, ids.begin() + b * n);
      upload_.upload(ids.data(), batch * n, tok, stream_);
      self_decoder_chunk(tok, batch, n, s);
    }
    // Early exit: the cross-decoder for the last position of each sequence only.
    const int64_t n_last = held - ((held - 1) / chunk) * chunk;
    Residual r;
    r.rows = batch;
    r.x = step.x;
    r.delta = step.delta;
    if (!link_ || shard_.last())
      check_cuda(cudaMemcpy2DAsync(r.x, d_ * 4, scratch_.f32("residual", 0) + (n_last - 1) * d_, n_last * d_ * 4,
                                   d_ * 4, batch, cudaMemcpyDeviceToDevice, stream_),
                 "last positions of M");
    if (link_) {
      link_->hidden_from(shard_.ranks - 1, r.x, batch * d_, stream_);
      set_sharded_positions(length - 1, held);  // every row a rank holds is before the last position
    } else {
      check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, length - 1, stream_),
                 "positions");
    }
    cross_decoder_step(r, batch, step);
    if (!link_)
      check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, length, stream_),
                 "positions");
    position_ = length;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // the next attempt (a smaller batch) starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();  // no half-made generation may be decoded
    throw;
  }
}

StepBuffers YocoCudaModel::prepare_decode_buffers(int64_t batch) {
  // Every buffer the step touches, at its final size, before any capture.
  StepBuffers b;
  b.tokens = scratch_.i64("step tokens", batch);
  b.x = scratch_.f32("step residual", batch * d_);
  b.delta = scratch_.bf16("step delta", batch * d_);
  b.h = scratch_.bf16("step normed", batch * d_);
  b.q = scratch_.bf16("step q", batch * std::max(qw_, d_));
  b.o = scratch_.bf16("step attention", batch * std::max(qw_, d_));
  b.proj = scratch_.bf16("step self proj", batch * self_width());
  b.z = scratch_.f32("step gate logits", batch * Hs_);
  b.log_gamma = scratch_.f32("step log decay", batch * Hs_);
  b.kv_row = scratch_.bf16("step kv row", batch * 2 * kvw_);
  b.ffn_in = scratch_.bf16("step ffn in", batch * 2 * F_);
  b.ffn_hidden = scratch_.bf16("step ffn hidden", batch * F_);
  b.workspace = scratch_.f32("decode workspace", decode_workspace_size(batch));
  b.logits = scratch_.f32("logits", batch * V_);
  return b;
}

void YocoCudaModel::enqueue_decode_step(int64_t batch, const StepBuffers& b) {
  Residual r;
  r.rows = batch;
  r.x = b.x;
  r.delta = b.delta;
  enqueue_self_decoder_step(batch, b, r);
  cross_decoder_step(r, batch, b);
  check_cuda(launch_advance_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, stream_),
             "advance positions");
}

void YocoCudaModel::enqueue_self_decoder_step(int64_t batch, const StepBuffers& b, Residual& r) {
  const int64_t SW = self_width();
  const int64_t* pos = positions_.as<int64_t>();
  bf16 *h = b.h, *proj = b.proj, *o = b.o, *qd = b.q;
  const double* f = self_freq_.as<double>();
  check_cuda(launch_embedding(b.tokens, batch, embed_, d_,
                              static_cast<float>(std::sqrt(static_cast<double>(d_))), r.x, stream_),
             "embedding");
  for (int64_t l = 0; l < Ls_; ++l) {
    norm(r, self_w_[l].mixer_norm, h);
    // The split step's state update of the layer before reads k, v and log γ from proj and lg: done before the
    // projection and the log-decay overwrite them (a no-op for the other steps). Never join right before a
    // programmatic dependent launch: how a join's edge combines with a programmatic one is not documented.
    check_cuda(update_branches_.join(stream_), "join the gRet state update");
    check_gemm(gemm_.linear(h, batch, d_, self_w_[l].proj, SW, proj, stream_), "self-decoder fused projection");
    check_cuda(launch_rope_at(proj, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved, 1.0, stream_), "self-decoder RoPE q");
    if (gret()) {
      float *z = b.z, *lg = b.log_gamma;
      check_gemm(gemm_.linear_f32(h, batch, d_, self_w_[l].gate_logits, Hs_, z, stream_), "self-decoder gt_proj");
      check_cuda(launch_rope_at(proj + d_, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved,
                                1.0 / std::sqrt(static_cast<double>(D_)), stream_),
                 "self-decoder RoPE k");
      check_cuda(launch_gret_log_decay(z, Hs_, batch, Hs_, static_cast<float>(cfg_.gate_logit_normalizer), lg, stream_),
                 "self-decoder log decay");
      // A programmatic dependent of the log-decay kernel where the step allows it: that kernel touches neither
      // the state nor the step's records.
      check_cuda(launch_gret_decode_norm_gate(decode_, proj, proj + d_, proj + 2 * d_, SW, lg, gret_state(l),
                                              gret_pending(l), proj + 3 * d_, SW, eps_, o, batch, Hs_, D_, stream_,
                                              /*overlap_previous=*/true, &update_branches_),
                 "self-decoder gRet step + norm + gate");
    } else {
      check_cuda(launch_rope_at(proj + d_, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved, 1.0, stream_),
                 "self-decoder RoPE k");
      bf16* ring = swa_ring(l);
      check_cuda(launch_cache_write_rows(proj + d_, SW, batch, 1, 2 * d_, pos, ring, W_, 2 * d_, W_, stream_),
                 "self-decoder ring append");
      // FlashDecoding reads dense q rows.
      check_cuda(cudaMemcpy2DAsync(qd, d_ * 2, proj, SW * 2, d_ * 2, batch, cudaMemcpyDeviceToDevice, stream_),
                 "self-decoder q rows");
      check_cuda(launch_flash_decode(qd, ring, ring + d_, ring_lengths(), swa_decode_shape(batch), swa_splits_,
                                     b.workspace, o, stream_),
                 "self-decoder SWA FlashDecoding over the ring");
    }
    check_gemm(gemm_.linear(o, batch, d_, self_w_[l].out, d_, r.delta, stream_), "self-decoder out_proj");
    r.pending = true;
    norm(r, self_w_[l].ffn.final_norm, h);
    ffn(self_w_[l].ffn, h, batch, SublayerOut::into_delta(r), b.ffn_in, b.ffn_hidden);
    r.pending = true;
  }
  // The new token's K-hat / V-hat: one row per sequence appended to the global cache.
  norm(r, kv_norm_, h);
  bf16* kvrow = b.kv_row;
  check_gemm(gemm_.linear(h, batch, d_, wkv_, 2 * kvw_, kvrow, stream_),
             "global K/V projection");
  check_cuda(launch_rope_at(kvrow, batch, 2 * kvw_, Hkv_, Da_, pos, 1, cross_freq_.as<double>(), RopeLayout::interleaved,
                            1.0, stream_),
             "global K RoPE");
  check_cuda(launch_cache_write_rows(kvrow, 2 * kvw_, batch, 1, 2 * kvw_, append_rows(), kv_.as<bf16>(), rows_,
                                     2 * kvw_, 0, stream_),
             "global K/V append");
  // The last layer's split-step state update ran beside the lines above; the step (and a capture) ends joined.
  check_cuda(update_branches_.join(stream_), "join the gRet state update");
}

void YocoCudaModel::set_sharded_positions(int64_t pos, int64_t visible_rows) {
  check_cuda(launch_set_positions(positions_.as<int64_t>(), nullptr, batch_, pos, stream_), "positions");
  check_cuda(launch_set_positions(lengths_.as<int64_t>(), nullptr, batch_, visible_rows, stream_), "visible rows");
  check_cuda(launch_set_positions(append_rows_.as<int64_t>(), nullptr, batch_, pos - row0_, stream_), "append rows");
  check_cuda(launch_set_positions(ring_lengths_.as<int64_t>(), nullptr, batch_, pos + 1, stream_), "ring lengths");
}

void YocoCudaModel::take_shard(const char* what, int64_t length) {
  const Shard sh = checked_shard(*link_, what, length);
  drop_generation();
  shard_ = sh;
}

void YocoCudaModel::sharded_decode_step(const StepBuffers& b) {
  const int64_t pos = position_;
  const bool last = shard_.last();
  // The last rank appends the new row: it sees its rows up to it; the others all theirs.
  set_sharded_positions(pos, last ? pos - row0_ + 1 : shard_.length);
  Residual r;
  r.rows = batch_;
  r.x = b.x;
  r.delta = b.delta;
  if (last) enqueue_self_decoder_step(batch_, b, r);  // where the final states / windows are
  link_->hidden_from(shard_.ranks - 1, r.x, batch_ * d_, stream_);
  r.pending = false;
  cross_decoder_step(r, batch_, b);
}

void YocoCudaModel::decode_step(const std::vector<int64_t>& tokens) {
  if (batch_ == 0) throw InputError("decode step before any prefill: prefill a prompt first");
  check_decode_args(tokens, batch_, position_, capacity_);
  validate_tokens(cfg_, tokens);
  NvtxRange range("decode step");
  try {
    const StepBuffers b = prepare_decode_buffers(batch_);  // allocated at the prefill: lookups here
    upload_.upload(tokens.data(), batch_, b.tokens, stream_);
    if (link_) {
      const auto t0 = std::chrono::steady_clock::now();
      sharded_decode_step(b);
      last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++position_;
      return;
    }
    // The graph stays valid while the batch, the caches and the buffers do.
    const uint64_t key = (generation_ << 32) ^ (scratch_.version() << 12) ^ static_cast<uint64_t>(batch_);
    const auto t0 = std::chrono::steady_clock::now();
    graph_.run(stream_, key, graphs_, [&] {
      try {
        enqueue_decode_step(batch_, b);
      } catch (...) {
        update_branches_.forget();  // a fork recorded in an abandoned capture is not there to join
        throw;
      }
    });
    last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++position_;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();  // the contract: caches dropped, the model usable
    scratch_.clear();
    throw;
  }
}

void YocoCudaModel::skip_positions(int64_t n) {
  if (batch_ == 0) throw InputError("skip_positions before any prefill");
  if (n < 0 || position_ + n > capacity_)
    throw InputError("cannot skip " + std::to_string(n) + " positions: the cache holds " + std::to_string(capacity_) +
                     " tokens and " + std::to_string(position_) + " are used");
  position_ += n;
  if (link_) return;  // a sharded step sets its positions itself
  check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch_, position_, stream_),
             "positions");
}

std::vector<float> YocoCudaModel::logits() {
  if (logits_rows_ == 0) throw InputError("no logits yet: run a prefill or a decode step first");
  return download_floats(scratch_.f32("logits", logits_rows_ * V_), logits_rows_ * V_, stream_);
}

std::vector<float> YocoCudaModel::forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) {
  if (batch < 1 || length < 1) throw InputError("forward needs at least one token");
  if (length > INT64_MAX / batch || static_cast<int64_t>(tokens.size()) != batch * length)
    throw InputError("forward: " + std::to_string(tokens.size()) + " tokens for batch " + std::to_string(batch) +
                     " x length " + std::to_string(length));
  validate_tokens(cfg_, tokens);
  if (link_) {
    take_shard("forward", length);
    row0_ = 0;  // the whole global K/V gathers here: rows are positions
  }
  // Sharded: this rank's positions [begin, begin + n) through the model, the
  // global K/V of every rank gathered once for all cross layers (paper
  // appendix A), then every rank's logits gathered.
  const int64_t begin = link_ ? shard_.begin : 0, n = link_ ? shard_.length : length;
  NvtxRange range("forward");
  std::vector<float> out;
  try {
    allocate_generation(batch, length, length);
    const int64_t R = batch * n;
    int64_t* tok = scratch_.i64("tokens", R);
    std::vector<int64_t> ids(static_cast<size_t>(R));
    for (int64_t b = 0; b < batch; ++b) std::copy_n(tokens.begin() + b * length + begin, n, ids.begin() + b * n);
    upload_.upload(ids.data(), R, tok, stream_);
    self_decoder_chunk(tok, batch, n, begin);
    const int64_t kv_row = 2 * kvw_ * 2;  // bytes of a K-hat | V-hat row
    if (link_)
      link_->gather_rows(kv_.as<bf16>() + begin * 2 * kvw_, length, kv_.as<bf16>(), length, batch, kv_row, "kv_gather",
                         stream_);
    // The cross-decoder over every position (no early exit): causal flash
    // attention of all queries over the global cache.
    Residual r;
    r.rows = R;
    r.x = scratch_.f32("residual", R * d_);
    r.delta = scratch_.bf16("delta", R * d_);
    bf16* h = scratch_.bf16("normed", R * d_);
    bf16* q = scratch_.bf16("cross q", R * qw_);
    bf16* a = scratch_.bf16("cross attention", R * qw_);
    int64_t* zero = scratch_.i64("chunk start", batch);
    int64_t* len = scratch_.i64("chunk length", batch);
    check_cuda(launch_set_positions(zero, nullptr, batch, begin, stream_), "query start");
    check_cuda(launch_set_positions(len, nullptr, batch, n, stream_), "query length");
    const PrefillAttentionShape s = attention_shape(batch, H_, Hkv_, Da_, n, length, qw_, 2 * kvw_, 0);
    const bf16* k = kv_.as<bf16>();
    const StepWork work = step_work(batch, n);  // the self-decoder's, free again: its FFN pieces
    cross_decoder(r, h, q, a, work.w13, work.hidden, [&](bf16* qv, bf16* out) {
      check_cuda(launch_rope(qv, R, qw_, H_, Da_, begin, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
                 "cross-decoder RoPE q");
      check_cuda(launch_flash_prefill(qv, k, k + kvw_, zero, len, s, out, nullptr, stream_), "cross attention");
    });
    float* logits = scratch_.f32("forward logits", R * V_);
    check_gemm(gemm_.linear_f32(h, R, d_, lm_head_, V_, logits, stream_), "LM head");
    if (link_) {
      float* all = scratch_.f32("forward logits of every rank", batch * length * V_);
      link_->gather_rows(logits, n, all, length, batch, V_ * 4, "logits", stream_);
      logits = all;
    }
    out = download_floats(logits, batch * length * V_, stream_);
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
  drop_generation();
  scratch_.clear();  // a forward's buffers scale with its length: give them back
  return out;
}

}  // namespace

// runner/generation_bytes.hpp holds the formula (shared with the cost model);
// here the parts that depend on the device: the chunk kernel's workspace for
// the plan the library picks on this GPU, the decode step's records.
double yoco_generation_device_bytes(const ModelConfig& c, double batch, double prompt, double gen, double chunk) {
  double workspace = 0, pending = 0;
  if (c.self_decoder() == SelfDecoderKind::gret) {
    GretChunkShape shape;
    shape.batch = static_cast<int64_t>(std::min(batch, 1e9));
    shape.heads = c.n_self_heads;
    shape.head_dim = c.self_head_dim();
    shape.seq_len = static_cast<int64_t>(std::min(prefill_rows_per_sequence(batch, prompt, chunk), 1e12));
    shape.row_stride = 4 * c.dim;
    workspace = static_cast<double>(gret_chunk_workspace_bytes(
        shape, select_gret_chunk(shape, device_sm_count(), gret_chunk_variant_from_env())));
    pending = static_cast<double>(gret_extra_bytes_per_layer(
        select_gret_decode(c.self_head_dim(), gret_decode_variant_from_env()), c,
        static_cast<int64_t>(std::min(batch, 1e9))));
  }
  const bool fused = ffn_up_fused_here(ffn_fused_swiglu_from_env());
  return yoco_generation_bytes(c, batch, prompt, gen, chunk, workspace, pending,
                               global_kv_projection_from_env() == GlobalKvProjection::batched,
                               static_cast<double>(ffn_row_block_from_env()), kDeltaInNormedRows, fused,
                               shared_sublayer_buffers_from_env())
      .total();
}

std::unique_ptr<CudaModel> create_yoco_cuda_model(const ModelConfig& cfg, const CudaWeightSource& source,
                                                  ShardLink* link) {
  return std::make_unique<YocoCudaModel>(cfg, source, link);
}

}  // namespace yoco::cuda
