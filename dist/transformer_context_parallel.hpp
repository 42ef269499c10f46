#pragma once
// The Transformer's context-parallel baseline (Megatron / TransformerEngine
// context parallelism): the prompt cut into 2R chunks, rank r holding chunks r
// and 2R-1-r (causal load balancing: every rank one early and one late chunk),
// every layer's attention by ring attention (R steps; each passes its keys and
// values on to the next rank, online softmax across the steps), the per-layer
// KV cache sharded the same way. Decode: the new token's layers on every rank
// (one row), its keys and values appended on rank 0 (which holds the last
// chunk), attention split over the shards and combined by log-sum-exp.
// Unlike YOCO's, its prefill communication grows with the prompt: each rank
// receives every other rank's keys and values in every layer.
#include <cstdint>
#include <vector>

#include "communicator.hpp"
#include "shard_plan.hpp"
#include "transformer_model.hpp"

namespace yoco::dist {

template <class T>
class ContextParallelTransformer {
 public:
  // `chunks`: 2 x comm.size() chunks of the prompt (ShardPlan::even(N, 2R) or uneven).
  ContextParallelTransformer(const TransformerModel<T>& model, Communicator& comm, ShardPlan chunks);

  Mat<T> prefill(const TokenBatch& prompt, int64_t max_new_tokens);
  Mat<T> decode_step(const std::vector<int64_t>& tokens);
  // Logits at every position, [B * N, vocab], the same on every rank: the
  // prefill's ring attention through every layer, the LM head on this rank's
  // two chunks, the logits gathered ("logits"). Replaces the decoding cache.
  Mat<T> forward(const TokenBatch& tokens);
  // Timing only: the cache advanced by n positions (zero keys and values
  // appended on the rank that keeps the generated tokens).
  void skip_positions(int64_t n);
  // weights and this rank's shard of every layer's KV cache (as allocated:
  // the keeper's generated rows as they grow); activations: the caller's.
  MemoryBreakdown memory() const;
  int64_t position() const { return position_; }
  int64_t capacity() const { return capacity_; }

 private:
  // This rank's pieces of the sequence: [begin, begin + n) with its layers' keys and values.
  struct Piece {
    int64_t begin = 0, n = 0;
    std::vector<Mat<T>> k, v;  // per layer, [batch * n, Hkv * Da] (the generated piece grows)
  };
  std::vector<int> chunks_of(int rank) const;
  // Checks, then every layer over this rank's two chunks (ring attention);
  // sets pieces_ (with their keys and values) and returns the pieces' outputs.
  std::vector<Mat<T>> layers(const TokenBatch& prompt, int64_t max_new_tokens);

  const TransformerModel<T>& model_;
  Communicator& comm_;
  ShardPlan chunks_;
  std::vector<Piece> pieces_;  // prompt pieces, then (rank 0) the generated tokens
  int64_t batch_ = 0, position_ = 0, capacity_ = 0;
};

extern template class ContextParallelTransformer<float>;
extern template class ContextParallelTransformer<double>;

}  // namespace yoco::dist
