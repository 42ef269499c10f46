// The GQA Transformer baseline on the GPU (baselines/transformer_cuda_runner.hpp): its weights on the
// device, the per-layer caches of a generation, the logits; and what the rest of the suite sees of it
// (create_transformer_cuda_model, the device bytes of a generation).
#include "transformer_cuda_runner.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "attention/cache_ops.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "ops/elementwise.hpp"
#include "ops/ffn_up.hpp"
#include "param_layout.hpp"
#include "runner/generation_bytes.hpp"

namespace yoco::cuda {
namespace transformer_runner {

TransformerCudaModel::TransformerCudaModel(const ModelConfig& cfg, const CudaWeightSource& source, ShardLink* link)
    : cfg_(cfg), link_(link) {
  d_ = cfg_.dim;
  F_ = cfg_.hidden_dim;
  V_ = cfg_.vocab_size;
  H_ = cfg_.n_attn_heads;
  Hkv_ = cfg_.n_attn_kv_heads;
  Da_ = cfg_.attn_head_dim();
  qw_ = cfg_.q_width();
  kvw_ = cfg_.kv_width();
  qkv_w_ = qw_ + 2 * kvw_;
  eps_ = static_cast<float>(cfg_.norm_eps);
  attn_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Da_)));

  if (!gemm_.ok()) throw std::runtime_error("cuBLAS: " + gemm_.error());
  ffn_fused_ = ffn_up_fused_here(ffn_fused_swiglu_from_env());
  ffn_ctas_ = ffn_fused_ctas_from_env();
  residual_in_gemm_ = residual_in_gemm_from_env();
  residual_per_layer_ = residual_per_layer_from_env() && !residual_in_gemm_ && qw_ >= d_;

  std::vector<std::vector<std::string>> groups;
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    groups.push_back({p + "attention.wq.weight", p + "attention.wk.weight", p + "attention.wv.weight"});
    groups.push_back({p + "feed_forward.w1.weight", p + "feed_forward.w3.weight"});
  }
  weights_ = DeviceWeights::create(arena_, cfg_, source, groups, stream_);
  embedding_ = weights_["tok_embeddings.weight"];
  final_norm_ = weights_["norm.weight"];
  output_ = weights_["output.weight"];
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights w;
    w.attn_norm = weights_[p + "attention_norm.weight"];
    w.wqkv = weights_[p + "attention.wq.weight"];  // first of its fused group
    w.wo = weights_[p + "attention.wo.weight"];
    w.ffn_norm = weights_[p + "ffn_norm.weight"];
    w.w13 = weights_[p + "feed_forward.w1.weight"];  // first of its fused group
    w.w2 = weights_[p + "feed_forward.w2.weight"];
    layers_.push_back(w);
    layer_names_.push_back("layer " + std::to_string(l));
  }

  rope_ = upload_table(arena_, rope_inv_freq_pow(Da_, cfg_.rope_theta), "RoPE inverse frequencies", stream_);

  cublas_workspace_ = arena_.require(MemCategory::activations, kCublasWorkspaceBytes, "activations: cuBLAS workspace");
  check_gemm(gemm_.set_workspace(cublas_workspace_.get(), static_cast<size_t>(kCublasWorkspaceBytes)),
             "set the cuBLAS workspace");
  check_gemm(gemm_.choose_algorithms(gemm_algorithms_from_env()), "choose the GEMM algorithms");
  gemm_.set_small_rows(gemm_small_rows_from_env());
}

TransformerCudaModel::~TransformerCudaModel() {
  // Nothing may still read the buffers the members free below.
  if (stream_) cudaStreamSynchronize(stream_);
}


void TransformerCudaModel::drop_generation() {
  cudaStreamSynchronize(stream_);  // nothing in flight may still use what is freed (errors surface elsewhere)
  graph_.invalidate();
  caches_.clear();  // frees (cudaFree waits for the work that used them)
  cache_batch_ = cache_rows_ = 0;
  batch_ = 0;
  position_ = 0;
  capacity_ = 0;
  decode_splits_ = 1;
}

void TransformerCudaModel::allocate_caches(int64_t batch, int64_t rows) {
  const int64_t row_bytes = 2 * kvw_ * static_cast<int64_t>(sizeof(bf16));
  if (rows > std::numeric_limits<int64_t>::max() / row_bytes / batch) {
    drop_generation();
    throw DeviceOutOfMemory("kv_cache: " + std::to_string(batch) + " x " + std::to_string(rows) +
                            " tokens per layer do not fit (the size overflows 64 bits)");
  }
  const int64_t bytes = batch * rows * row_bytes;
  // The caches of a generation of the same shape as the one before are kept
  // (zeroed again): freeing and allocating them anew put a device-wide
  // cudaFree and a cudaMalloc a layer inside every timed prefill of a
  // benchmark's repeats (yoco_cuda_model.cpp's allocate_generation does the same).
  const bool keep =
      static_cast<int64_t>(caches_.size()) == cfg_.n_layers && batch == cache_batch_ && rows == cache_rows_;
  if (keep) {
    // The decode graph stays (as yoco_cuda_model.cpp's allocate_generation): its launches name these
    // caches, and the prefill sets its splits again (a change bumps cache_generation_ there).
    batch_ = position_ = capacity_ = 0;
  } else {
    drop_generation();
    caches_.reserve(static_cast<size_t>(cfg_.n_layers));
    for (int64_t l = 0; l < cfg_.n_layers; ++l)
      caches_.push_back(arena_.require(MemCategory::kv_cache, bytes, "kv_cache: K|V of layer " + std::to_string(l)));
  }
  // Zeroed: a key tile cut by the causal edge loads rows not written yet, and
  // a masked key's P = 0 times a NaN left in reused memory would still be NaN.
  for (DeviceBuffer& c : caches_)
    check_cuda(cudaMemsetAsync(c.get(), 0, static_cast<size_t>(bytes), stream_), "zero the KV cache");
  cache_batch_ = batch;
  cache_rows_ = rows;
  if (!keep) ++cache_generation_;
}

DecodeAttentionShape TransformerCudaModel::decode_shape(int64_t batch) const {
  DecodeAttentionShape ds;
  ds.batch = batch;
  ds.n_heads = H_;
  ds.n_kv_heads = Hkv_;
  ds.head_dim = Da_;
  ds.capacity = cache_rows_;
  ds.window = 0;
  ds.scale = attn_scale_;
  ds.ring = false;
  ds.kv_stride = 2 * kvw_;  // K at columns [0, kvw), V at [kvw, 2 kvw) of a cache row
  return ds;
}


void TransformerCudaModel::skip_positions(int64_t n) {
  if (batch_ == 0) throw InputError("skip_positions before any prefill");
  if (n < 0 || n > capacity_ - position_)
    throw InputError("cannot skip " + std::to_string(n) + " positions: the cache holds " + std::to_string(capacity_) +
                     " tokens and " + std::to_string(position_) + " are used");
  if (n == 0) return;
  position_ += n;
  if (link_) return;  // a sharded step sets its positions itself
  // Same sizes as at prefill: the existing buffers, no allocation.
  int64_t* positions = scratch_.i64("positions", batch_);
  int64_t* lengths = scratch_.i64("lengths", batch_);
  check_cuda(launch_set_positions(positions, lengths, batch_, position_, stream_), "set decode positions");
}

std::vector<float> TransformerCudaModel::logits() {
  if (batch_ == 0) throw InputError("no logits yet: run a prefill or a decode step first");
  return download_floats(scratch_.f32("logits", batch_ * V_), batch_ * V_, stream_);
}

}  // namespace transformer_runner

// cuda/runner/generation_bytes.hpp holds the formula (shared with the cost model).
double transformer_generation_device_bytes(const ModelConfig& c, double batch, double prompt, double gen,
                                           double chunk) {
  return transformer_generation_bytes(c, batch, prompt, gen, chunk, ffn_up_fused_here(ffn_fused_swiglu_from_env()))
      .total();
}
std::unique_ptr<CudaModel> create_transformer_cuda_model(const ModelConfig& cfg, const CudaWeightSource& source,
                                                         ShardLink* link) {
  if (cfg.is_yoco()) throw InputError(cfg.name + " is not a Transformer config");
  const std::string why = cuda_model_unsupported(cfg);
  if (!why.empty()) throw InputError(cfg.name + " cannot run on the CUDA runners: " + why);
  return std::make_unique<transformer_runner::TransformerCudaModel>(cfg, source, link);
}

}  // namespace yoco::cuda
