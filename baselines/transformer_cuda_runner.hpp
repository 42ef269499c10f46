#pragma once
// The GQA Transformer baseline on the GPU (baselines/transformer_cuda_model.hpp):
// the pair of baselines/transformer_model.cpp, step for step.
//
// Buffers (every one in the model's arena):
//  - weights: per layer the fused [Wq; Wk; Wv] ([qw + 2 kvw, d]) and [W1; W3]
//    ([2F, d]) groups, every other tensor on its own; the RoPE table.
//  - kv_cache: per layer one [B, capacity, 2 kvw] bf16 buffer, K at columns
//    [0, kvw) of a row and V at [kvw, 2 kvw): the fused projection's k|v columns
//    go in with one row copy, and the attention kernels read K at `base` and V
//    at `base + kvw` with kv_stride 2 kvw. capacity = prompt + generation exactly.
//  - activations (Scratch, kept between calls, sized by the largest request):
//    the residual stream (fp32) and the bf16 temporaries of one chunk of B * n
//    rows, logits, token ids, the decode positions, the FlashDecoding workspace;
//    and cuBLAS's 32 MiB workspace (its own buffer, set once: a captured graph
//    must not allocate).
//
// Row layout: rows b * n + i of every activation are token i of sequence b in
// the current chunk (n = 1 at decode), as in the reference's stacked batches.
//
// Sharded (context parallelism, a RingShard): a rank's two chunks run as one
// step, piece-major -- rows [0, B n0) are piece 0 (b * n0 + i), then B n1
// rows of piece 1 -- and so does its cache ([piece 0 | piece 1 | the
// keeper's generated rows] per sequence) and the block it passes around the
// ring ([B, n0, 2 kvw] then [B, n1, 2 kvw]). Per layer and ring step, each
// piece's queries attend each key chunk they may see (cuda/attention/
// ring_plan.hpp: its own on the diagonal with the dispatcher, an earlier one
// wholly with flash prefill v1), each partial merged into an fp32 running one
// (attention_merge.cu).
//
// The runner's class, shared by its files, each one part of it:
//   transformer_cuda_model.cpp   weights, the per-layer caches, logits, what the suite sees of it
//   transformer_layers.cpp       a step's buffers, the layer stack, a prefill chunk, the LM head
//   transformer_ring.cpp         a sharded prefill: a rank's two chunks by ring attention
//   transformer_prefill.cpp      prefill (chunked) and the full forward
//   transformer_decode.cpp       the decode step: a captured CUDA graph, or eager on one rank
// Internal to the runner: everyone else makes one with create_transformer_cuda_model.
#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/cache_plan.hpp"
#include "attention/flash_decode.hpp"
#include "attention/flash_prefill.hpp"
#include "ops/gemm.hpp"
#include "runner/cuda_model.hpp"
#include "runner/runner_support.hpp"
#include "runner/shard_link.hpp"
#include "transformer_cuda_model.hpp"

namespace yoco::cuda::transformer_runner {

using bf16 = __nv_bfloat16;

// Device pointers of one layer's tensors, looked up once (no string maps on the
// decode step's host path).
struct LayerWeights {
  const bf16* attn_norm = nullptr;  // [d]
  const bf16* wqkv = nullptr;       // [qw + 2 kvw, d]
  const bf16* wo = nullptr;         // [d, qw]
  const bf16* ffn_norm = nullptr;   // [d]
  const bf16* w13 = nullptr;        // [2F, d]
  const bf16* w2 = nullptr;         // [d, F]
};

// The activation buffers one pass over `rows` rows uses.
struct Activations {
  float* residual = nullptr;  // [rows, d] fp32
  bf16* normed = nullptr;     // [rows, d]
  bf16* qkv = nullptr;        // [rows, qw + 2 kvw]
  bf16* attn = nullptr;       // [rows, qw]
  bf16* delta = nullptr;      // [rows, d]: the Wo and W2 outputs
  bf16* h13 = nullptr;        // [h13_rows, 2F]: the generation's W1|W3 output (null where every call fuses)
  int64_t h13_rows = 0;
  bf16* act = nullptr;        // [rows, F]
  int64_t* tokens = nullptr;  // [rows]
};

enum class Head { none, last_rows, all_rows };

// The decode step's buffers and FlashDecoding's launch, looked up before the
// step is enqueued (allocated at the prefill: lookups only).
struct DecodeBuffers {
  Activations a;
  int64_t *positions = nullptr, *lengths = nullptr;
  bf16* q = nullptr;  // [B, qw]: FlashDecoding reads dense queries
  float* logits = nullptr;
  DecodeAttentionShape ds;
  int splits = 1;
  float* workspace = nullptr;
};

class TransformerCudaModel final : public CudaModel {
 public:
  // link: null for the whole sequence on this GPU, else this rank's shard of
  // it (runner/shard_link.hpp; outlives the model).
  TransformerCudaModel(const ModelConfig& cfg, const CudaWeightSource& source, ShardLink* link);
  ~TransformerCudaModel() override;

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
  // A step's buffers for `rows` rows; the FFN's W1|W3 output for `w13_rows` (0: none, every FFN
  // call of the step takes the fused kernel).
  Activations activations(int64_t rows, int64_t w13_rows);
  void allocate_caches(int64_t batch, int64_t rows);
  // The decode step's buffers and FlashDecoding's splits over the caches allocate_caches made for
  // `batch` sequences of `rows` rows, so that an out-of-memory shows at the prefill and the first
  // step allocates nothing.
  void prepare_decode_buffers(int64_t batch, int64_t rows);
  // A prefill step's buffers for a prompt of B x N tokens in steps of `prefill_chunk` (sharded: this
  // rank's two chunks as one step): what prefill and reserve_generation take.
  Activations prefill_activations(int64_t B, int64_t N, int64_t prefill_chunk);
  // FlashDecoding's shape over the current caches.
  DecodeAttentionShape decode_shape(int64_t batch) const;
  void drop_generation();
  // Sharded: the link's ring shard of a prompt of `length` tokens (planned before each prefill or
  // forward), checked, into ring_ and row0_; the generation dropped.
  void take_ring_shard(const char* what, int64_t length);
  // Prefill of one chunk: rows b * n + i at positions s + i; tokens already in
  // a.tokens, q_start / q_len ([B] each) already on the device. The caches
  // receive the chunk's keys and values; `head` says which rows reach the LM head.
  // Every layer over `rows` rows of `a`; prefill and decode differ only in
  // `attend(layer cache)`: RoPE on q and k, k|v into the cache, attention into a.attn.
  void run_layers(const Activations& a, int64_t rows, const std::function<void(bf16* cache)>& attend);
  // write_start: [B] the cache row of the chunk's first key (= q_start).
  void run_chunk(const Activations& a, int64_t B, int64_t n, int64_t s, const int64_t* q_start, const int64_t* q_len,
                 const int64_t* write_start, Head head, bf16* last, float* logits);
  // Sharded: this rank's two chunks of `tokens` ([B, N] host ids) through
  // every layer, each layer's attention by ring attention; the caches receive
  // the pieces' keys and values.
  void ring_chunk(const Activations& a, int64_t B, const std::vector<int64_t>& tokens, int64_t N, Head head,
                  bf16* last, float* logits);
  // The final norm over `rows` rows and the LM head: on every row, or on
  // row `last_row` + b * pitch of each sequence b gathered into `last`.
  void lm_head(const Activations& a, int64_t B, int64_t rows, Head head, int64_t last_row, int64_t pitch, bf16* last,
               float* logits);
  // A decode step on one rank of a sharded sequence (eager: it meets the
  // other ranks in every layer).
  void sharded_decode_step(const std::vector<int64_t>& tokens);
  // The unsharded step: captured as a CUDA graph once, replayed (or eager).
  void graph_decode_step(const std::vector<int64_t>& tokens);
  DecodeBuffers decode_buffers(int64_t batch);
  // The new token's q and k rotated at `positions`, q copied out dense into d.q.
  void decode_rope_and_q(const DecodeBuffers& d, int64_t batch);
  // On the tuned GEMM path, before a decode step's graph is captured: the step's GEMM shapes (B rows)
  // timed now, eagerly, on the step's buffers, where the process has not met them yet (inside the
  // capture they could only take the heuristic's first candidate). A no-op otherwise.
  void choose_decode_gemms(const Activations& a, int64_t batch, float* logits);
  void gemm(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, bf16* y, const char* what);
  // A sublayer's output projection (n = d): into a.delta, or added to a.residual by the GEMM
  // (YOCO_RESIDUAL_IN_GEMM=1). Then the residual's norm into a.normed: add + RMSNorm of the delta, or
  // RMSNorm alone where the GEMM added it.
  void project_out(const bf16* x, int64_t m, int64_t k, const bf16* w, const Activations& a, const char* what);
  void residual_norm(const Activations& a, const bf16* w, int64_t rows, const char* what);
  // The norm between a layer's attention and its FFN: add + RMSNorm, or (the residual stored once a layer,
  // YOCO_RESIDUAL_PER_LAYER) the norm of residual + a.delta with nothing stored; then residual_norm adds
  // a.delta and W2's output, which goes into a.attn (dead after the attention's output projection).
  void mid_layer_norm(const Activations& a, const bf16* w, int64_t rows);
  // Where W2 writes its [rows, d] output: a.attn where the residual is stored once a layer, else a.delta.
  bf16* ffn_out(const Activations& a) const { return residual_per_layer_ ? a.attn : a.delta; }

  ModelConfig cfg_;
  int64_t d_ = 0, F_ = 0, V_ = 0, H_ = 0, Hkv_ = 0, Da_ = 0, qw_ = 0, kvw_ = 0, qkv_w_ = 0;
  float eps_ = 0, attn_scale_ = 0;

  Gemm gemm_;
  bool ffn_fused_ = false;  // the W1|W3 GEMM with SwiGLU in its epilogue (YOCO_FFN_FUSED, on a device it runs on)
  GemmSwigluCtas ffn_ctas_ = GemmSwigluCtas::one;  // which fused kernel (YOCO_FFN_FUSED=pairs: its CTA pairs)
  bool residual_in_gemm_ = false;  // the sublayers' outputs added to the residual by their GEMMs
  bool residual_per_layer_ = false;  // YOCO_RESIDUAL_PER_LAYER, where the attention output holds [rows, d]
  DeviceBuffer cublas_workspace_;
  DeviceBuffer rope_;  // inv_freq, Da / 2 doubles
  const bf16* embedding_ = nullptr;
  const bf16* final_norm_ = nullptr;
  const bf16* output_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<std::string> layer_names_;  // "layer N" (NVTX)

  std::vector<DeviceBuffer> caches_;  // per layer [cache_batch_, cache_rows_, 2 kvw]
  // The caches' shape, which allocate_caches keeps for a generation of the same one: not batch_,
  // which says a prefill ran (a reservation leaves it 0).
  int64_t cache_batch_ = 0, cache_rows_ = 0;
  uint64_t cache_generation_ = 0;  // bumped at every cache allocation (graph key)
  int decode_splits_ = 1;

  // Sharded only: the link, this rank's two chunks, and row0_: the keeper
  // appends position p >= N at cache row p - row0_ (after its prompt rows).
  ShardLink* link_ = nullptr;
  RingShard ring_;
  int64_t row0_ = 0;

  Scratch scratch_{arena_};
  StepGraph graph_;
  TokenUpload token_upload_;  // chunk / step token ids
  TokenUpload range_upload_;  // a prefill chunk's q_start | q_len
  std::vector<int64_t> host_ids_, host_range_;
};

}  // namespace yoco::cuda::transformer_runner
