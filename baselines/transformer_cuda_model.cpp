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
#include "transformer_cuda_model.hpp"

#include "runner/generation_bytes.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/cache_ops.hpp"
#include "attention/cache_plan.hpp"
#include "config.hpp"
#include "ops/elementwise.hpp"
#include "errors.hpp"
#include "attention/attention_merge.hpp"
#include "attention/flash_decode.hpp"
#include "attention/flash_prefill.hpp"
#include "attention/ring_plan.hpp"
#include "ops/gemm.hpp"
#include "ops/ffn_up.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "inference_checks.hpp"
#include "ops.hpp"
#include "param_layout.hpp"
#include "runner/runner_support.hpp"
#include "runner/shard_link.hpp"
#include "token_batch.hpp"

namespace yoco::cuda {
namespace {


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
  // A step's buffers for `rows` rows; the FFN's W1|W3 output for `w13_rows` (0: none, every FFN
  // call of the step takes the fused kernel).
  Activations activations(int64_t rows, int64_t w13_rows);
  void allocate_caches(int64_t batch, int64_t rows);
  // FlashDecoding's shape over the current caches.
  DecodeAttentionShape decode_shape(int64_t batch) const;
  void drop_generation();
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
  void gemm(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, bf16* y, const char* what);
  // A sublayer's output projection (n = d): into a.delta, or added to a.residual by the GEMM
  // (YOCO_RESIDUAL_IN_GEMM=1). Then the residual's norm into a.normed: add + RMSNorm of the delta, or
  // RMSNorm alone where the GEMM added it.
  void project_out(const bf16* x, int64_t m, int64_t k, const bf16* w, const Activations& a, const char* what);
  void residual_norm(const Activations& a, const bf16* w, int64_t rows, const char* what);

  ModelConfig cfg_;
  int64_t d_ = 0, F_ = 0, V_ = 0, H_ = 0, Hkv_ = 0, Da_ = 0, qw_ = 0, kvw_ = 0, qkv_w_ = 0;
  float eps_ = 0, attn_scale_ = 0;

  Gemm gemm_;
  bool ffn_fused_ = false;  // the W1|W3 GEMM with SwiGLU in its epilogue (YOCO_FFN_FUSED, on a device it runs on)
  bool residual_in_gemm_ = false;  // the sublayers' outputs added to the residual by their GEMMs
  DeviceBuffer cublas_workspace_;
  DeviceBuffer rope_;  // inv_freq, Da / 2 doubles
  const bf16* embedding_ = nullptr;
  const bf16* final_norm_ = nullptr;
  const bf16* output_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::vector<std::string> layer_names_;  // "layer N" (NVTX)

  std::vector<DeviceBuffer> caches_;  // per layer [batch, cache_rows_, 2 kvw]
  int64_t cache_rows_ = 0;
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
  residual_in_gemm_ = residual_in_gemm_from_env();

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
}

TransformerCudaModel::~TransformerCudaModel() {
  // Nothing may still read the buffers the members free below.
  if (stream_) cudaStreamSynchronize(stream_);
}

void TransformerCudaModel::gemm(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, bf16* y,
                                const char* what) {
  check_gemm(gemm_.linear(x, m, k, w, n, y, stream_), what);
}

void TransformerCudaModel::project_out(const bf16* x, int64_t m, int64_t k, const bf16* w, const Activations& a,
                                       const char* what) {
  if (residual_in_gemm_) check_gemm(gemm_.accumulate_f32(x, m, k, w, d_, a.residual, stream_), what);
  else gemm(x, m, k, w, d_, a.delta, what);
}

void TransformerCudaModel::residual_norm(const Activations& a, const bf16* w, int64_t rows, const char* what) {
  if (residual_in_gemm_) check_cuda(launch_rms_norm(a.residual, w, rows, d_, eps_, a.normed, stream_), what);
  else check_cuda(launch_add_rms_norm(a.residual, a.delta, w, rows, d_, eps_, a.normed, stream_), what);
}

}  // namespace

// cuda/runner/generation_bytes.hpp holds the formula (shared with the cost model).
double transformer_generation_device_bytes(const ModelConfig& c, double batch, double prompt, double gen,
                                           double chunk) {
  return transformer_generation_bytes(c, batch, prompt, gen, chunk, ffn_up_fused_here(ffn_fused_swiglu_from_env()))
      .total();
}

namespace {

Activations TransformerCudaModel::activations(int64_t rows, int64_t w13_rows) {
  Activations a;
  a.residual = scratch_.f32("residual", rows * d_);
  a.normed = scratch_.bf16("normed", rows * d_);
  a.qkv = scratch_.bf16("qkv", rows * qkv_w_);
  a.attn = scratch_.bf16("attention out", rows * qw_);
  a.delta = scratch_.bf16("delta", rows * d_);
  // The W1|W3 output: the generation's (ffn_w13_rows, asked by the prefill), which the decode
  // step's activations(B) then finds; none where no call of it takes the pair.
  a.h13 = w13_rows > 0 ? scratch_.bf16("ffn w1|w3", w13_rows * 2 * F_) : nullptr;
  a.h13_rows = w13_rows;
  a.act = scratch_.bf16("ffn act", rows * F_);
  a.tokens = scratch_.i64("tokens", rows);
  return a;
}

void TransformerCudaModel::drop_generation() {
  cudaStreamSynchronize(stream_);  // nothing in flight may still use what is freed (errors surface elsewhere)
  graph_.invalidate();
  caches_.clear();  // frees (cudaFree waits for the work that used them)
  cache_rows_ = 0;
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
  const bool keep = static_cast<int64_t>(caches_.size()) == cfg_.n_layers && batch == batch_ && rows == cache_rows_;
  if (keep) {
    cudaStreamSynchronize(stream_);  // as drop_generation: no replay of the old graph in flight
    graph_.invalidate();
    batch_ = position_ = capacity_ = 0;
    decode_splits_ = 1;
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
  cache_rows_ = rows;
  ++cache_generation_;
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

void TransformerCudaModel::run_layers(const Activations& a, int64_t rows,
                                      const std::function<void(bf16* cache)>& attend) {
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    NvtxRange range(layer_names_[static_cast<size_t>(l)]);
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    // The previous layer's FFN output joins the residual in the same pass as this layer's norm.
    if (l == 0)
      check_cuda(launch_rms_norm(a.residual, w.attn_norm, rows, d_, eps_, a.normed, stream_), "attention norm");
    else
      residual_norm(a, w.attn_norm, rows, "FFN residual + attention norm");
    gemm(a.normed, rows, d_, w.wqkv, qkv_w_, a.qkv, "QKV projection");
    attend(caches_[static_cast<size_t>(l)].as<bf16>());
    project_out(a.attn, rows, qw_, w.wo, a, "attention output projection");
    residual_norm(a, w.ffn_norm, rows, "attention residual + FFN norm");
    check_gemm(ffn_up_swiglu(gemm_, a.normed, rows, d_, w.w13, F_, a.h13, a.h13_rows, a.act, ffn_fused_, stream_),
               "FFN W1|W3 + SwiGLU");
    project_out(a.act, rows, F_, w.w2, a, "FFN W2");
  }
}

void TransformerCudaModel::run_chunk(const Activations& a, int64_t B, int64_t n, int64_t s, const int64_t* q_start,
                                     const int64_t* q_len, const int64_t* write_start, Head head, bf16* last,
                                     float* logits) {
  const int64_t R = B * n;
  check_cuda(launch_embedding(a.tokens, R, embedding_, d_, 1.0f, a.residual, stream_), "embedding");

  PrefillAttentionShape shape;
  shape.batch = B;
  shape.n_heads = H_;
  shape.n_kv_heads = Hkv_;
  shape.head_dim = Da_;
  shape.q_rows = n;
  shape.capacity = cache_rows_;
  shape.q_stride = qkv_w_;
  shape.kv_stride = 2 * kvw_;
  shape.window = 0;
  shape.scale = attn_scale_;

  run_layers(a, R, [&](bf16* cache) {
    // q (H heads) and k (Hkv heads) are adjacent at the start of each row: one
    // launch rotates both, at positions s + i.
    check_cuda(launch_rope(a.qkv, R, qkv_w_, H_ + Hkv_, Da_, s, n, rope_.as<double>(), RopeLayout::half_split,
                           stream_),
               "RoPE on q and k");
    // k | v (2 kvw contiguous columns) -> cache rows s .. s + n - 1.
    check_cuda(launch_cache_write_rows(a.qkv + qw_, qkv_w_, B, n, 2 * kvw_, write_start, cache, cache_rows_, 2 * kvw_,
                                       0, stream_),
               "KV cache write");
    check_cuda(launch_flash_prefill(a.qkv, cache, cache + kvw_, q_start, q_len, shape, a.attn, nullptr, stream_),
               "flash prefill attention");
  });
  lm_head(a, B, R, head, n - 1, n, last, logits);
}

void TransformerCudaModel::lm_head(const Activations& a, int64_t B, int64_t rows, Head head, int64_t last_row,
                                   int64_t pitch, bf16* last, float* logits) {
  // A chunk before the last needs only its keys and values: the residual
  // stream restarts from the embedding in the next chunk.
  if (head == Head::none) return;
  residual_norm(a, final_norm_, rows, "FFN residual + final norm");
  if (head == Head::all_rows) {
    check_gemm(gemm_.linear_f32(a.normed, rows, d_, output_, V_, logits, stream_), "LM head");
    return;
  }
  // Each sequence's last row -> a dense [B, d] block for the LM head.
  const size_t row_bytes = static_cast<size_t>(d_) * sizeof(bf16);
  check_cuda(cudaMemcpy2DAsync(last, row_bytes, a.normed + last_row * d_, static_cast<size_t>(pitch) * row_bytes,
                               row_bytes, static_cast<size_t>(B), cudaMemcpyDeviceToDevice, stream_),
             "gather the last positions");
  check_gemm(gemm_.linear_f32(last, B, d_, output_, V_, logits, stream_), "LM head");
}

void TransformerCudaModel::ring_chunk(const Activations& a, int64_t B, const std::vector<int64_t>& tokens, int64_t N,
                                      Head head, bf16* last, float* logits) {
  const int R = ring_.ranks, r = ring_.rank, C = 2 * R;
  const int64_t n0 = ring_.piece_length(0), n1 = ring_.piece_length(1), rows = B * (n0 + n1);
  const int64_t np[2] = {n0, n1}, row_off[2] = {0, B * n0};  // a piece's rows and its first activation row
  // Token ids piece-major.
  host_ids_.resize(static_cast<size_t>(rows));
  for (int p = 0; p < 2; ++p)
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(tokens.begin() + (b * N + ring_.piece_begin(p)), np[p], host_ids_.begin() + row_off[p] + b * np[p]);
  token_upload_.upload(host_ids_.data(), rows, a.tokens, stream_);
  // [B] arrays on the device: slot p the piece's q_len, 2 + p its first cache
  // row, 4 + p C + c its queries' q_start over key chunk c (ring_plan.hpp).
  const int64_t slots = 4 + 2 * C;
  host_range_.assign(static_cast<size_t>(slots * B), 0);
  auto fill = [&](int64_t slot, int64_t value) {
    std::fill_n(host_range_.begin() + slot * B, B, value);
  };
  for (int p = 0; p < 2; ++p) {
    fill(p, np[p]);
    fill(2 + p, p == 0 ? 0 : n0);
    for (int c = 0; c <= ring_.chunk(p); ++c)
      fill(4 + p * C + c, ring::relative_q_start(ring_.piece_begin(p), ring_.chunk_begin(c)));
  }
  int64_t* table = scratch_.i64("ring q_len|write start|q_start", slots * B);
  range_upload_.upload(host_range_.data(), slots * B, table, stream_);

  int64_t most = 0, n_most = std::max(n0, n1);
  for (int j = 0; j < R; ++j) most = std::max(most, ring_.rows_of(j));
  const int64_t kv_row = 2 * kvw_;
  bf16* block[2] = {scratch_.bf16("ring K|V a", B * most * kv_row), scratch_.bf16("ring K|V b", B * most * kv_row)};
  bf16* part_o = scratch_.bf16("ring partial out", B * n_most * qw_);
  float* part_lse = scratch_.f32("ring partial lse", B * H_ * n_most);
  float* acc_o = scratch_.f32("ring running out", rows * qw_);
  float* acc_lse = scratch_.f32("ring running lse", B * H_ * (n0 + n1));

  check_cuda(launch_embedding(a.tokens, rows, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
  run_layers(a, rows, [&](bf16* cache) {
    for (int p = 0; p < 2; ++p) {
      bf16* qkv = a.qkv + row_off[p] * qkv_w_;
      check_cuda(launch_rope(qkv, B * np[p], qkv_w_, H_ + Hkv_, Da_, ring_.piece_begin(p), np[p], rope_.as<double>(),
                             RopeLayout::half_split, stream_),
                 "RoPE on q and k");
      check_cuda(launch_cache_write_rows(qkv + qw_, qkv_w_, B, np[p], kv_row, table + (2 + p) * B, cache, cache_rows_,
                                         kv_row, 0, stream_),
                 "KV cache write");
      // This rank's block for the ring: its pieces' k | v rows, dense.
      check_cuda(cudaMemcpy2DAsync(block[0] + row_off[p] * kv_row, static_cast<size_t>(kv_row) * sizeof(bf16),
                                   qkv + qw_, static_cast<size_t>(qkv_w_) * sizeof(bf16),
                                   static_cast<size_t>(kv_row) * sizeof(bf16), static_cast<size_t>(B * np[p]),
                                   cudaMemcpyDeviceToDevice, stream_),
                 "the ring block");
    }
    bool first[2] = {true, true};
    int held = 0;  // which of the two blocks holds this step's keys and values
    for (int step = 0; step < R; ++step) {
      const int src = ring::source_at(r, step, R);
      int64_t key_row = 0;  // the key chunk's first row in the block
      for (int kp = 0; kp < 2; ++kp) {
        const int c = ring::chunk_of(src, kp, R);
        const int64_t nc = ring_.chunk_length(c);
        const bf16* keys = block[held] + key_row * kv_row;
        key_row += B * nc;
        for (int p = 0; p < 2; ++p) {
          const ring::Block kind = ring::block_kind(ring_.chunk(p), c);
          if (kind == ring::Block::skip) continue;
          PrefillAttentionShape shape;
          shape.batch = B;
          shape.n_heads = H_;
          shape.n_kv_heads = Hkv_;
          shape.head_dim = Da_;
          shape.q_rows = np[p];
          shape.capacity = nc;
          shape.q_stride = qkv_w_;
          shape.kv_stride = kv_row;
          shape.window = 0;
          shape.scale = attn_scale_;
          const bf16* q = a.qkv + row_off[p] * qkv_w_;
          const int64_t* q_start = table + (4 + p * C + c) * B;
          const int64_t* q_len = table + p * B;
          // The diagonal keeps the contract of every variant; a wholly visible earlier chunk has
          // queries past its rows, which v1 serves (flash_prefill.hpp).
          check_cuda(kind == ring::Block::diagonal
                         ? launch_flash_prefill(q, keys, keys + kvw_, q_start, q_len, shape, part_o, part_lse, stream_)
                         : launch_flash_prefill_v1(q, keys, keys + kvw_, q_start, q_len, shape, part_o, part_lse,
                                                   stream_),
                     "ring attention block");
          check_cuda(launch_attention_merge(part_o, part_lse, B, np[p], H_, Da_, first[p], acc_o + row_off[p] * qw_,
                                            acc_lse + H_ * row_off[p], a.attn + row_off[p] * qw_, stream_),
                     "ring attention merge");
          first[p] = false;
        }
      }
      if (step + 1 < R) {
        const int next = ring::source_at(r, step + 1, R);
        link_->ring_pass(block[held], B * ring_.rows_of(src) * kv_row * 2, block[1 - held],
                         B * ring_.rows_of(next) * kv_row * 2, stream_);
        held = 1 - held;
      }
    }
  });
  // The last position: piece 1's last row on the keeper (the others' rows there are no use).
  lm_head(a, B, rows, head, row_off[1] + n1 - 1, n1, last, logits);
}

void TransformerCudaModel::prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length,
                                   int64_t max_new_tokens, int64_t prefill_chunk) {
  // Messages and their order as the YOCO runner's (cuda/runner/yoco_prefill.cpp).
  if (batch < 1) throw InputError("prefill needs a batch of at least one sequence");
  if (length > std::numeric_limits<int64_t>::max() / batch || static_cast<int64_t>(tokens.size()) != batch * length)
    throw InputError("prefill: " + std::to_string(tokens.size()) + " tokens for batch " + std::to_string(batch) +
                     " x length " + std::to_string(length));
  TokenBatch shape_only;  // check_prefill_args reads the shape only
  shape_only.batch = batch;
  shape_only.length = length;
  check_prefill_args(shape_only, max_new_tokens, prefill_chunk);
  if (max_new_tokens > std::numeric_limits<int64_t>::max() - length)
    throw InputError("prompt + tokens to generate overflow");
  validate_tokens(cfg_, tokens);
  if (link_) {
    const RingShard sh = checked_ring_shard(*link_, "prefill", length);  // a refused prompt leaves the generation as it is
    drop_generation();
    ring_ = sh;
    row0_ = length - ring_.rows();
  }

  NvtxRange range("prefill");
  const int64_t B = batch, N = length, capacity = N + max_new_tokens;
  // Sharded: this rank's two chunks as one step (ring attention in every
  // layer), its cache rows (the keeper's with room for the generated ones).
  const int64_t rows = link_ ? ring_.rows() + (ring_.keeper() ? max_new_tokens : 0) : capacity;
  // Each step: n_max tokens of every sequence, batch x n_max <= prefill_chunk.
  const int64_t n_max = link_ ? ring_.rows() : cache_plan::prefill_tokens_per_sequence(prefill_chunk, B, N);
  try {
    allocate_caches(B, rows);  // keeps the previous generation's of the same shape, else drops it first
    // The FFN's W1|W3 output for every call of this generation that takes the pair (the
    // formula's ffn_w13_rows: prefill steps, the ragged last one, the decode steps' B rows).
    const int64_t w13 = static_cast<int64_t>(
        link_ ? ffn_w13_rows(cfg_, static_cast<double>(B), static_cast<double>(n_max), static_cast<double>(B * n_max),
                             0, ffn_fused_, true)
              : ffn_w13_rows(cfg_, static_cast<double>(B), static_cast<double>(N), static_cast<double>(prefill_chunk), 0,
                             ffn_fused_, true));
    const Activations a = activations(B * n_max, w13);
    int64_t* range_dev = link_ ? nullptr : scratch_.i64("prefill q_start|q_len|write start", 3 * B);
    int64_t* positions = scratch_.i64("positions", B);
    int64_t* lengths = scratch_.i64("lengths", B);
    bf16* last = scratch_.bf16("last rows", B * d_);
    float* logits = scratch_.f32("logits", B * V_);
    // The decode step's own buffers too, so that an out-of-memory shows here and
    // the first step allocates nothing. Splits: once per generation, for the
    // longest length the caches can hold.
    const DecodeAttentionShape ds = decode_shape(B);
    decode_splits_ = std::max(1, choose_decode_splits(ds, rows, device_sm_count()));
    // Sharded, decode's attention always leaves split partials for the combine across ranks.
    if (link_) decode_splits_ = std::max(decode_splits_, 2);
    scratch_.bf16("decode q", B * qw_);
    scratch_.f32("flash-decode workspace", decode_workspace_floats(ds, decode_splits_));
    if (link_) scratch_.i64("decode write rows", B);

    if (link_) {
      // The last position is on the keeper: its logits go to every rank.
      ring_chunk(a, B, tokens, N, Head::last_rows, last, logits);
      link_->hidden_from(ring::keeper(), logits, B * V_, stream_);
    }
    host_ids_.resize(static_cast<size_t>(B * n_max));
    host_range_.resize(static_cast<size_t>(3 * B));
    for (int64_t s = 0; !link_ && s < N; s += n_max) {
      NvtxRange chunk_range("prefill chunk");
      const int64_t n = std::min(n_max, N - s);
      for (int64_t b = 0; b < B; ++b) {
        std::copy_n(tokens.begin() + (b * N + s), n, host_ids_.begin() + b * n);
        host_range_[static_cast<size_t>(b)] = s;          // q_start
        host_range_[static_cast<size_t>(B + b)] = n;      // q_len
        host_range_[static_cast<size_t>(2 * B + b)] = s;  // the cache write's first row
      }
      token_upload_.upload(host_ids_.data(), B * n, a.tokens, stream_);
      range_upload_.upload(host_range_.data(), 3 * B, range_dev, stream_);
      const bool has_last = s + n == N;
      run_chunk(a, B, n, s, range_dev, range_dev + B, range_dev + 2 * B, has_last ? Head::last_rows : Head::none, last,
                logits);
    }
    check_cuda(launch_set_positions(positions, lengths, B, N, stream_), "set decode positions");
    batch_ = B;
    position_ = N;
    capacity_ = capacity;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // the next attempt (e.g. a smaller batch) starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
}

void TransformerCudaModel::decode_step(const std::vector<int64_t>& tokens) {
  if (batch_ == 0) throw InputError("decode step before any prefill: prefill a prompt first");
  check_decode_args(tokens, batch_, position_, capacity_);
  validate_tokens(cfg_, tokens);
  NvtxRange range("decode step");
  try {
    if (link_) {
      const auto t0 = std::chrono::steady_clock::now();
      sharded_decode_step(tokens);
      last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      graph_decode_step(tokens);
    }
    ++position_;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();
    throw;
  } catch (...) {
    drop_generation();  // the device positions may or may not have advanced
    throw;
  }
}

void TransformerCudaModel::graph_decode_step(const std::vector<int64_t>& tokens) {
  const int64_t B = batch_;
  // Every buffer the step uses exists before the capture (same sizes as the
  // prefill's or smaller: nothing is allocated here after the first step).
  const DecodeBuffers d = decode_buffers(B);
  const Activations& a = d.a;
  int64_t *positions = d.positions, *lengths = d.lengths;
  float* logits = d.logits;

  token_upload_.upload(tokens.data(), B, a.tokens, stream_);  // outside the graph: new ids every step

  auto enqueue = [&] {
    check_cuda(launch_embedding(a.tokens, B, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
    run_layers(a, B, [&](bf16* cache) {
      decode_rope_and_q(d, B);
      check_cuda(launch_cache_write_rows(a.qkv + qw_, qkv_w_, B, 1, 2 * kvw_, positions, cache, cache_rows_,
                                         2 * kvw_, 0, stream_),
                 "KV cache write");
      check_cuda(launch_flash_decode(d.q, cache, cache + kvw_, lengths, d.ds, d.splits, d.workspace, a.attn, stream_),
                 "flash decode attention");
    });
    residual_norm(a, final_norm_, B, "FFN residual + final norm");
    check_gemm(gemm_.linear_f32(a.normed, B, d_, output_, V_, logits, stream_), "LM head");
    check_cuda(launch_advance_positions(positions, lengths, B, stream_), "advance decode positions");
  };

  // Pointers and launch shapes come from the caches (generation: batch,
  // capacity, splits) and the scratch buffers (version).
  const uint64_t key = (cache_generation_ << 32) ^ scratch_.version();
  const auto t0 = std::chrono::steady_clock::now();
  graph_.run(stream_, key, graphs_, enqueue);
  last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

DecodeBuffers TransformerCudaModel::decode_buffers(int64_t B) {
  DecodeBuffers d;
  // B rows: the fused kernel where they are enough, else the prefill's W1|W3 buffer (>= B rows).
  d.a = activations(B, ffn_fused_ && gemm_swiglu::fused_on_every_block(B, 0, d_, F_) ? 0 : B);
  d.positions = scratch_.i64("positions", B);
  d.lengths = scratch_.i64("lengths", B);
  d.q = scratch_.bf16("decode q", B * qw_);
  d.logits = scratch_.f32("logits", B * V_);
  d.ds = decode_shape(B);
  d.splits = decode_splits_;
  d.workspace = scratch_.f32("flash-decode workspace", decode_workspace_floats(d.ds, d.splits));
  return d;
}

void TransformerCudaModel::decode_rope_and_q(const DecodeBuffers& d, int64_t B) {
  check_cuda(launch_rope_at(d.a.qkv, B, qkv_w_, H_ + Hkv_, Da_, d.positions, 1, rope_.as<double>(),
                            RopeLayout::half_split, 1.0, stream_),
             "RoPE on q and k");
  check_cuda(cudaMemcpy2DAsync(d.q, static_cast<size_t>(qw_) * sizeof(bf16), d.a.qkv,
                               static_cast<size_t>(qkv_w_) * sizeof(bf16), static_cast<size_t>(qw_) * sizeof(bf16),
                               static_cast<size_t>(B), cudaMemcpyDeviceToDevice, stream_),
             "copy q to a dense buffer");
}

void TransformerCudaModel::sharded_decode_step(const std::vector<int64_t>& tokens) {
  const int64_t B = batch_, pos = position_;
  const bool keeper = ring_.keeper();
  const DecodeBuffers d = decode_buffers(B);
  const Activations& a = d.a;
  int64_t* write_rows = scratch_.i64("decode write rows", B);
  // RoPE at the absolute position; the keeper appends the new key and value
  // (its local row) and sees its rows up to it, the others all theirs.
  check_cuda(launch_set_positions(d.positions, nullptr, B, pos, stream_), "set decode positions");
  check_cuda(launch_set_positions(d.lengths, nullptr, B, keeper ? pos - row0_ + 1 : ring_.rows(), stream_),
             "set visible rows");
  check_cuda(launch_set_positions(write_rows, nullptr, B, pos - row0_, stream_), "set the append row");
  token_upload_.upload(tokens.data(), B, a.tokens, stream_);
  // Every rank runs the layers on the new token (the same inputs, the same
  // kernels: the same hidden states); only the attention is split.
  check_cuda(launch_embedding(a.tokens, B, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
  run_layers(a, B, [&](bf16* cache) {
    decode_rope_and_q(d, B);
    if (keeper)
      check_cuda(launch_cache_write_rows(a.qkv + qw_, qkv_w_, B, 1, 2 * kvw_, write_rows, cache, cache_rows_, 2 * kvw_,
                                         0, stream_),
                 "KV cache write");
    check_cuda(launch_flash_decode(d.q, cache, cache + kvw_, d.lengths, d.ds, d.splits, d.workspace, a.attn, stream_),
               "flash decode attention over this rank's rows");
    const DecodePartials parts = decode_partials(d.ds, d.splits, d.workspace);
    link_->attention_across(parts.part_o, parts.part_lse, B, H_, d.splits, Da_, a.attn, "decode_partial", stream_);
  });
  residual_norm(a, final_norm_, B, "FFN residual + final norm");
  check_gemm(gemm_.linear_f32(a.normed, B, d_, output_, V_, d.logits, stream_), "LM head");
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

std::vector<float> TransformerCudaModel::forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) {
  if (batch < 1 || length < 1) throw InputError("forward needs at least one token");
  if (length > std::numeric_limits<int64_t>::max() / batch || static_cast<int64_t>(tokens.size()) != batch * length)
    throw InputError("forward: " + std::to_string(tokens.size()) + " tokens for batch " + std::to_string(batch) +
                     " x length " + std::to_string(length));
  validate_tokens(cfg_, tokens);
  if (link_) {
    const RingShard sh = checked_ring_shard(*link_, "forward", length);  // a refused prompt leaves the generation as it is
    drop_generation();
    ring_ = sh;
    row0_ = length - ring_.rows();
  }

  NvtxRange range("forward");
  // Sharded: this rank's two chunks, ring attention in every layer, then
  // every rank's logits gathered.
  const int64_t B = batch, N = length, n = link_ ? ring_.rows() : N, R = B * n;
  std::vector<float> out;
  try {
    allocate_caches(B, n);  // drops any generation in progress; a cache of exactly this rank's tokens
    // One step of R rows (the forward): the W1|W3 output unless it fuses.
    const Activations a = activations(R, ffn_fused_ && gemm_swiglu::fused_on_every_block(R, 0, d_, F_) ? 0 : R);
    float* logits = scratch_.f32("logits", R * V_);
    if (link_) {
      ring_chunk(a, B, tokens, N, Head::all_rows, nullptr, logits);
      float* all = scratch_.f32("forward logits of every rank", B * N * V_);
      link_->gather_ring_rows(logits, all, B, V_ * 4, stream_);
      logits = all;
    } else {
      int64_t* range_dev = scratch_.i64("prefill q_start|q_len|write start", 3 * B);
      host_range_.assign(static_cast<size_t>(3 * B), 0);
      host_ids_.resize(static_cast<size_t>(R));
      for (int64_t b = 0; b < B; ++b) {
        host_range_[static_cast<size_t>(B + b)] = n;  // q_len; q_start and the cache write's first row are 0
        std::copy_n(tokens.begin() + b * N, n, host_ids_.begin() + b * n);
      }
      token_upload_.upload(host_ids_.data(), R, a.tokens, stream_);
      range_upload_.upload(host_range_.data(), 3 * B, range_dev, stream_);
      run_chunk(a, B, n, 0, range_dev, range_dev + B, range_dev + 2 * B, Head::all_rows, nullptr, logits);
    }
    out = download_floats(logits, B * N * V_, stream_);
  } catch (...) {
    drop_generation();
    scratch_.clear();
    throw;
  }
  drop_generation();
  scratch_.clear();  // [B N, V] logits and B N-row temporaries: not kept for later calls
  return out;
}

}  // namespace

std::unique_ptr<CudaModel> create_transformer_cuda_model(const ModelConfig& cfg, const CudaWeightSource& source,
                                                         ShardLink* link) {
  if (cfg.is_yoco()) throw InputError(cfg.name + " is not a Transformer config");
  const std::string why = cuda_model_unsupported(cfg);
  if (!why.empty()) throw InputError(cfg.name + " cannot run on the CUDA runners: " + why);
  return std::make_unique<TransformerCudaModel>(cfg, source, link);
}

}  // namespace yoco::cuda
