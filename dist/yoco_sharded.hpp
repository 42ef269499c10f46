#pragma once
// YOCO with the sequence split across ranks (paper appendix A: chunk
// parallelism). Each rank holds a contiguous shard of the prompt:
//  - self-decoder, per layer: gRet's incoming state from a scan over the
//    ranks' (total decay, local state) pairs, one fixed-size collective
//    (B x Hs x (D x D + 1) values a rank, whatever the prompt's length); SWA
//    the previous ranks' last W - 1 keys and values (B x (W - 1) x 2 d);
//  - the global K-hat / V-hat stay sharded by sequence (never gathered);
//  - the last position's cross-decoder: its hidden state broadcast once from
//    the last rank, then per cross layer split-KV attention over the shards
//    combined by log-sum-exp (B x H x (Da + 2) values a rank).
// Decode: the new token's self-decoder on the last rank (it holds the final
// gRet states / SWA windows), its K-hat / V-hat row appended there, the
// cross-decoder as above. Every rank returns the same logits.
#include <cstdint>
#include <vector>

#include "communicator.hpp"
#include "shard_plan.hpp"
#include "yoco_model.hpp"

namespace yoco::dist {

template <class T>
class ShardedYoco {
 public:
  // `model` and `comm` outlive this; plan.ranks() == comm.size().
  ShardedYoco(const YocoModel<T>& model, Communicator& comm, ShardPlan plan);

  // The whole prompt on every rank (each takes its shard); [B, vocab] logits
  // of the last position, the same on every rank.
  Mat<T> prefill(const TokenBatch& prompt, int64_t max_new_tokens);
  // One token per sequence (the same on every rank); [B, vocab].
  Mat<T> decode_step(const std::vector<int64_t>& tokens);
  // Logits at every position, [B * N, vocab], the same on every rank (the
  // decoding cache untouched): the self-decoder sharded as in prefill, the
  // global K-hat / V-hat gathered once ("kv_gather": every cross layer reads
  // the same gathered cache, paper appendix A), the cross-decoder over this
  // rank's positions, the logits gathered ("logits").
  Mat<T> forward(const TokenBatch& tokens);
  // Timing only (a sampled decode late in a long generation): the cache
  // advanced by n positions without computing them.
  void skip_positions(int64_t n);
  // weights, this rank's shard of the global cache (the last rank's with
  // room for the generated rows), the states or windows; activations are the
  // caller's to meter.
  MemoryBreakdown memory() const;
  int64_t capacity() const { return cache_.capacity; }

  const ShardPlan& plan() const { return plan_; }
  int64_t position() const { return position_; }
  // This rank's rows of the global cache (the last rank's include the generated ones).
  int64_t local_rows() const { return local_rows_; }

 private:
  Mat<T> cross_decoder(Mat<T> x, int64_t pos);
  // This rank's shard through the self-decoder into `cache` (fresh states or
  // windows, its K-hat / V-hat rows first in k_hat / v_hat, `extra_rows` more
  // on the last rank); returns the shard's M rows.
  Mat<T> shard_self_decoder(const TokenBatch& prompt, int64_t extra_rows, YocoCache<T>& cache);
  bool last_rank() const { return comm_.rank() == comm_.size() - 1; }

  const YocoModel<T>& model_;
  Communicator& comm_;
  ShardPlan plan_;
  YocoCache<T> cache_;  // states / windows (meaningful on the last rank after prefill); k_hat/v_hat: this shard
  int64_t batch_ = 0, position_ = 0, local_rows_ = 0;
};

extern template class ShardedYoco<float>;
extern template class ShardedYoco<double>;

}  // namespace yoco::dist
