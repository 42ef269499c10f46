#pragma once
// The YOCO runner's class (DESIGN.md §3-4), the pair of reference/yoco_model.cpp YocoModel, shared by
// its files, each one part of it:
//   yoco_cuda_model.cpp    weights, a generation's caches and state, logits
//   yoco_self_decoder.cpp  a prefill step's self-decoder: the sublayers, their buffers, the global K/V
//   yoco_cross_decoder.cpp the cross-decoder over the one global cache
//   yoco_prefill.cpp       prefill (chunked, the early exit) and the full forward
//   yoco_decode.cpp        the decode step: a captured CUDA graph, or eager on one rank of a shard
// The self-decoder (gRet: fused QKVG GEMM, RoPE with the key scale folded in, log-decays, the chunk
// kernel, per-head norm + gate; or SWA: windowed flash prefill over the ring, ring-buffer
// FlashDecoding) produces the one global K/V cache, written once; the cross-decoder runs for the last
// position only at prefill (the early exit) and reads that cache with FlashDecoding at decode.
// Internal to the runner library: everyone else makes one with create_yoco_cuda_model.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/flash_decode.hpp"
#include "attention/flash_prefill.hpp"
#include "gret/gret_recurrent.hpp"
#include "gret/gret_select.hpp"
#include "ops/gemm.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "runner/cuda_model.hpp"
#include "runner/runner_support.hpp"
#include "runner/shard_link.hpp"
#include "runner/sublayer_buffers.hpp"

namespace yoco::cuda::yoco_runner {

using bf16 = __nv_bfloat16;

inline std::string self_prefix(int64_t l) { return "self_decoder.layers." + std::to_string(l) + "."; }
inline std::string cross_prefix(int64_t l) { return "cross_decoder.layers." + std::to_string(l) + "."; }

// Extra decode-state bytes per gRet layer that the selected decode step keeps
// beside the state (gret_decode_state_extra_bytes), after the states.
inline int64_t gret_extra_bytes_per_layer(GretDecodeVariant decode, const ModelConfig& c, int64_t batch) {
  return gret_decode_state_extra_bytes(decode, batch, c.n_self_heads, c.self_head_dim());
}

inline PrefillAttentionShape attention_shape(int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                             int64_t q_rows, int64_t capacity, int64_t q_stride, int64_t kv_stride, int64_t window) {
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
  // The layer's second sublayer output, pending beside delta where the residual is stored once a
  // layer (YOCO_RESIDUAL_PER_LAYER): the next norm adds both.
  const bf16* second = nullptr;
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
  void reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) override;
  void decode_step(const std::vector<int64_t>& tokens) override;
  void skip_positions(int64_t n) override;
  std::vector<float> logits() override;
  std::vector<float> forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) override;
  std::vector<std::string> gemm_tuning_record() const override { return gemm_.tuning_record(); }
  int decode_graph_captures() const override { return graph_.captures(); }
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
  // Every buffer a prefill step of batch x n rows takes from the scratch (the step's working set,
  // the chunk kernel's workspace, the batch's positions): what reserve_generation allocates ahead.
  void reserve_step_buffers(int64_t batch, int64_t n);
  GretChunkShape gret_step_shape(int64_t batch, int64_t n) const;  // the chunk kernel's, on q|k|v|g rows
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
  // On the tuned GEMM path, before a decode step's graph is captured: the step's GEMM shapes timed
  // now, eagerly, on the step's buffers, where the process has not met them yet (inside the capture
  // they could only take the heuristic's first candidate). In the benchmarks that is the untimed
  // warm-up step. A no-op on cuBLAS's path and once every shape is chosen.
  void choose_decode_gemms(int64_t batch, const StepBuffers& b);

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
  GemmSwigluCtas ffn_ctas_ = GemmSwigluCtas::one;  // which fused kernel (YOCO_FFN_FUSED=pairs: its CTA pairs)
  bool residual_in_gemm_ = false;  // the prefill's sublayer outputs added to the residual by their GEMMs
  bool residual_per_layer_ = false;  // YOCO_RESIDUAL_PER_LAYER, where a prefill step allows it
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
  std::vector<int64_t> host_ids_;  // a prefill step's ids, gathered for the upload (sized by a reservation too)
};

}  // namespace yoco::cuda::yoco_runner
