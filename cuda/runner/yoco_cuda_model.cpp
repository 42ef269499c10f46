// The YOCO runner (runner/yoco_cuda_model.hpp): its weights on the device, a generation's caches,
// state and positions, the logits; and what the rest of the suite sees of it (create_yoco_cuda_model,
// the device bytes of a generation).
#include "runner/yoco_cuda_model.hpp"

#include <climits>
#include <stdexcept>

#include "attention/cache_ops.hpp"
#include "attention/cache_plan.hpp"
#include "errors.hpp"
#include "gret/gret_chunk.hpp"
#include "ops.hpp"
#include "ops/elementwise.hpp"
#include "ops/ffn_up.hpp"
#include "runner/generation_bytes.hpp"

namespace yoco::cuda {
namespace yoco_runner {

namespace {

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

}  // namespace

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
  ffn_ctas_ = ffn_fused_ctas_from_env();
  shared_sublayers_ = shared_sublayer_buffers_from_env();
  residual_in_gemm_ = residual_in_gemm_from_env();
  residual_per_layer_ = residual_per_layer_from_env();
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
  gemm_.set_small_rows(gemm_small_rows_from_env());
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
    // The decode graph stays: its launches name these same buffers, and the positions and lengths it
    // reads are the device's (set again below). Destroying and capturing it anew put a
    // cudaGraphExecDestroy (run-06, H200: the costliest host call of yoco-small's 4K prefill) and a
    // stream synchronisation inside every timed prefill of a benchmark's repeats.
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
  const int cross_before = cross_splits_, swa_before = swa_splits_;
  const int sms = device_sm_count();
  cross_splits_ = choose_decode_splits(cross_decode_shape(batch), rows, sms);
  // Sharded, the cross attention always leaves split partials for the combine across ranks.
  if (link_) cross_splits_ = std::max(cross_splits_, 2);
  if (!gret()) swa_splits_ = choose_decode_splits(swa_decode_shape(batch), W_, sms);
  // A new generation of the graph key (yoco_decode.cpp) where the step's launches change: new
  // buffers, or other splits (launch shapes baked into the graph).
  if (!keep || cross_splits_ != cross_before || swa_splits_ != swa_before) ++generation_;
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

}  // namespace yoco_runner

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
    shape.row_stride = 4 * c.dim;
    const int sms = device_sm_count();
    const GretChunkVariant variant = gret_chunk_variant_from_env();
    workspace = gret_prefill_workspace_bytes(batch, prompt, chunk, [&](double rows) {
      shape.seq_len = static_cast<int64_t>(std::min(rows, 1e12));
      return gret_chunk_workspace_bytes(shape, select_gret_chunk(shape, sms, variant));
    });
    pending = static_cast<double>(yoco_runner::gret_extra_bytes_per_layer(
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
  return std::make_unique<yoco_runner::YocoCudaModel>(cfg, source, link);
}

}  // namespace yoco::cuda
