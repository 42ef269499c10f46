#pragma once
// The YOCO model on the CPU (DESIGN.md §3, §4): a self-decoder of gated
// retention or sliding-window attention, then a cross-decoder whose layers all
// read one global key/value cache produced from the self-decoder's output.
#include <cstdint>
#include <vector>

#include "config.hpp"
#include "gret.hpp"
#include "memory.hpp"
#include "sequence_exchange.hpp"
#include "tensor.hpp"
#include "token_batch.hpp"
#include "weights.hpp"

namespace yoco {

// Everything decoding needs after a prefill, for B sequences.
template <class T>
struct YocoCache {
  int64_t batch = 0;
  int64_t position = 0;  // tokens consumed so far (same for every sequence)
  int64_t capacity = 0;  // tokens the global cache can hold (prompt + generation)
  // gRet: gret_state[layer][b * Hs + h] is [D, D].
  std::vector<std::vector<Mat<T>>> gret_state;
  // SWA: ring buffers swa_k/v[layer][b] of [W, d]; slot p % W holds position p.
  std::vector<std::vector<Mat<T>>> swa_k, swa_v;
  // The one global cache: k_hat/v_hat[b] of [capacity, Hkv * Da] (keys after RoPE).
  std::vector<Mat<T>> k_hat, v_hat;

  int64_t kv_cache_bytes() const;
  int64_t state_bytes() const;
};

template <class T>
class YocoModel {
 public:
  YocoModel(ModelConfig cfg, Weights<T> weights);
  const ModelConfig& config() const { return cfg_; }
  const Weights<T>& weights() const { return w_; }

  // Logits at every position, [B * N, vocab]: the self-decoder over all tokens
  // with the given gRet paradigm (no chunking of the sequence), the
  // cross-decoder over all positions. The ground truth for the cached paths.
  Mat<T> forward(const TokenBatch& tokens, GretParadigm paradigm = GretParadigm::parallel) const;

  // Time to first token: the prompt in chunks of `prefill_chunk` tokens through
  // the self-decoder (chunkwise gRet, state carried), the global K/V written
  // once, the cross-decoder for the last position only. Returns [B, vocab] and
  // fills `cache`, sized for prompt + max_new_tokens.
  Mat<T> prefill(const TokenBatch& prompt, int64_t max_new_tokens, YocoCache<T>& cache,
                 int64_t prefill_chunk = kDefaultPrefillChunk) const;

  // One token per sequence: recurrent gRet or the SWA ring, cross-attention over
  // the global cache. Returns [B, vocab].
  Mat<T> decode_step(const std::vector<int64_t>& tokens, YocoCache<T>& cache) const;

  // weights, kv_cache and state of `cache`, activations = peak of the last
  // prefill or decode call.
  MemoryBreakdown memory(const YocoCache<T>& cache) const;

  // The building blocks of the calls above, for a driver that shards the
  // sequence across ranks (dist/yoco_sharded): rows are [batch * n]
  // sequence-major at positions pos0 + i.
  Mat<T> embed(const TokenBatch& tokens) const;
  // `exchange`: the ranks before this one (a shard's prefill); null otherwise.
  Mat<T> self_layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0, GretParadigm paradigm,
                    YocoCache<T>* cache, const SequenceExchange<T>* exchange = nullptr) const;
  // K-hat, V-hat rows for the self-decoder output rows m at positions pos0...
  void global_kv(const Mat<T>& m, int64_t batch, int64_t n, int64_t pos0, Mat<T>& k, Mat<T>& v) const;
  // One cross layer for queries x ([batch * nq] rows at positions q_pos0 + i)
  // over keys [0, kv_len) of each sequence's k/v: cross_query (the attention's
  // queries, RoPE applied), the attention, cross_finish (output projection,
  // residual, FFN).
  Mat<T> cross_layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t nq, int64_t q_pos0,
                     const std::vector<const Mat<T>*>& k, const std::vector<const Mat<T>*>& v, int64_t kv_len) const;
  Mat<T> cross_query(int64_t l, const Mat<T>& x, int64_t batch, int64_t nq, int64_t q_pos0) const;
  Mat<T> cross_finish(int64_t l, const Mat<T>& x, const Mat<T>& attention_out) const;
  Mat<T> lm_head(const Mat<T>& x) const;

 private:
  Mat<T> gret_mixer(int64_t l, const Mat<T>& h, int64_t batch, int64_t n, int64_t pos0, GretParadigm paradigm,
                    YocoCache<T>* cache, const SequenceExchange<T>* exchange) const;
  Mat<T> swa_mixer(int64_t l, const Mat<T>& h, int64_t batch, int64_t n, int64_t pos0, YocoCache<T>* cache,
                   const SequenceExchange<T>* exchange) const;

  ModelConfig cfg_;
  Weights<T> w_;
  std::vector<double> self_freq_, cross_freq_;
  mutable ActivationMeter meter_;
};

extern template class YocoModel<float>;
extern template class YocoModel<double>;

}  // namespace yoco
