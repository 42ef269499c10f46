#pragma once
// The GQA Transformer the paper compares against (Llama style, the authors'
// baseline code; DESIGN.md §3): half-split RoPE with theta^(-2i/D), no
// embedding scale, one KV cache per layer.
#include <cstdint>
#include <vector>

#include "config.hpp"
#include "memory.hpp"
#include "tensor.hpp"
#include "token_batch.hpp"
#include "weights.hpp"

namespace yoco {

template <class T>
struct TransformerCache {
  int64_t batch = 0;
  int64_t position = 0;
  int64_t capacity = 0;
  // k[layer][b], v[layer][b]: [capacity, Hkv * Da], keys after RoPE.
  std::vector<std::vector<Mat<T>>> k, v;
  int64_t kv_cache_bytes() const;
};

template <class T>
class TransformerModel {
 public:
  TransformerModel(ModelConfig cfg, Weights<T> weights);
  const ModelConfig& config() const { return cfg_; }
  const Weights<T>& weights() const { return w_; }

  // Logits at every position, [B * N, vocab], all layers over the whole sequence.
  Mat<T> forward(const TokenBatch& tokens) const;
  // All layers over the prompt in chunks (KV cache per layer filled), LM head
  // on the last position only. Returns [B, vocab].
  Mat<T> prefill(const TokenBatch& prompt, int64_t max_new_tokens, TransformerCache<T>& cache,
                 int64_t prefill_chunk = kDefaultPrefillChunk) const;
  Mat<T> decode_step(const std::vector<int64_t>& tokens, TransformerCache<T>& cache) const;
  MemoryBreakdown memory(const TransformerCache<T>& cache) const;

  // The building blocks of the calls above, for a driver that shards the
  // sequence across ranks (dist/transformer_context_parallel): rows are
  // [batch * n] sequence-major at positions pos0 + i.
  Mat<T> embed(const TokenBatch& tokens) const;
  // A layer's attention inputs: q [rows, H * Da], k and v [rows, Hkv * Da], RoPE applied.
  void attention_inputs(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0, Mat<T>& q, Mat<T>& k,
                        Mat<T>& v) const;
  // The rest of the layer: output projection, residual, FFN.
  Mat<T> layer_finish(int64_t l, const Mat<T>& x, const Mat<T>& attention_out) const;
  Mat<T> lm_head(const Mat<T>& x) const;

 private:
  // One layer over [batch * n] rows at positions pos0...; with a cache the new
  // keys are appended and attention reads [0, pos0 + n).
  Mat<T> layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0, TransformerCache<T>* cache) const;

  ModelConfig cfg_;
  Weights<T> w_;
  std::vector<double> freq_;
  mutable ActivationMeter meter_;
};

extern template class TransformerModel<float>;
extern template class TransformerModel<double>;

}  // namespace yoco
