// The Transformer runner's layer stack (baselines/transformer_cuda_runner.hpp): a step's buffers, every
// layer over a step's rows (prefill and decode differ only in the attention), a prefill chunk, and the
// final norm with the LM head.
#include "transformer_cuda_runner.hpp"

#include "attention/cache_ops.hpp"
#include "ops/elementwise.hpp"
#include "ops/ffn_up.hpp"

namespace yoco::cuda::transformer_runner {

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
  else if (residual_per_layer_)
    check_cuda(launch_add2_rms_norm(a.residual, a.delta, ffn_out(a), w, rows, d_, eps_, a.normed, stream_), what);
  else check_cuda(launch_add_rms_norm(a.residual, a.delta, w, rows, d_, eps_, a.normed, stream_), what);
}

void TransformerCudaModel::mid_layer_norm(const Activations& a, const bf16* w, int64_t rows) {
  if (!residual_per_layer_) return residual_norm(a, w, rows, "attention residual + FFN norm");
  check_cuda(launch_rms_norm_of_sum(a.residual, a.delta, w, rows, d_, eps_, a.normed, stream_),
             "FFN norm of residual + attention output");
  ++sums_peeked_;
}

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
    mid_layer_norm(a, w.ffn_norm, rows);
    check_gemm(ffn_up_swiglu(gemm_, a.normed, rows, d_, w.w13, F_, a.h13, a.h13_rows, a.act, ffn_fused_, stream_, ffn_ctas_),
               "FFN W1|W3 + SwiGLU");
    if (residual_per_layer_) gemm(a.act, rows, F_, w.w2, d_, ffn_out(a), "FFN W2");
    else project_out(a.act, rows, F_, w.w2, a, "FFN W2");
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

}  // namespace yoco::cuda::transformer_runner
